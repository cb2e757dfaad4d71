"""The words for where a graph runs: the engines and what each can do (:data:`ENGINES`,
the one table the plan, the sessions and the plan store read), the precisions, and
the placements the plan names (:data:`ORT_FP32`, :data:`OPENVINO_BF16`, ...).

Which graph goes where, and why (the figures per CPU family are in
``benchmarks/RESULTS.md``):

* the decoder, most of the work, is where the engines differ: bfloat16 on OpenVINO
  where the CPU computes it natively (AVX512_BF16 or AMX; emulated, it is slower
  than float32), float32 on ONNX Runtime elsewhere, which gives the reference
  output exactly and holds less memory (OpenVINO keeps kernels for every input
  length it meets). The plan chooses between them by measuring
  (:mod:`yomiage.runtime.plan`);
* the flow stays on ONNX Runtime in float32 unless a plan whose decoder runs
  bfloat16 on OpenVINO measured it faster there too, padded to a few lengths so
  the memory it keeps per length stays bounded (:mod:`yomiage.runtime.flow_lengths`);
* the encoder (with the duration predictors) runs on ONNX Runtime in float32: no
  engine was faster on it, and the spline of the stochastic duration predictor
  must stay float32;
* the BERT runs on ONNX Runtime: OpenVINO was hardly faster on it and held
  hundreds of MB more while running;
* a small decoder (the committed tiny voice) runs on ONNX Runtime: OpenVINO's
  costs per window length and its slower load are fixed, and on a small decoder
  they are most of the work;
* HayaKoe's one-graph voices run on ONNX Runtime: their graph takes a whole
  sentence at once, so every sentence length would be a new shape for OpenVINO to
  keep, without bound on a server;
* the int8 decoder (``yomiage convert --decoder int8``) runs on ONNX Runtime,
  which runs its static QDQ graph best.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, cast

log = logging.getLogger(__name__)

Engine = Literal["onnxruntime", "openvino"]
Precision = Literal["fp32", "bf16", "int8"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "bf16", "int8")


@dataclass(frozen=True)
class EngineKind:
    """What one inference engine can do. A new engine, or a precision an engine gains,
    is a row of :data:`ENGINES` (and, for an engine, an opener in
    :class:`~yomiage.runtime.engines.sessions.Sessions`)."""

    name: Engine
    title: str  # as people read it
    package: str  # its distribution: its version keys plans and compiled graphs
    precisions: tuple[Precision, ...]  # the decoder precisions it runs
    # It compiles and keeps kernels per input length, never freed: it is shown only a
    # few lengths (fixed decoder windows, flow spans padded to buckets).
    keeps_shapes: bool
    # What it compiles can be kept in the cache (compiled_dir) and loaded from there.
    caches_compiled: bool = False

    def version(self) -> str | None:
        """The installed version, read from the package's metadata (nothing is loaded:
        OpenVINO costs a process 36 MB), or None where it is not installed."""
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return None


ONNXRUNTIME = EngineKind("onnxruntime", "ONNX Runtime", "onnxruntime", ("fp32", "int8"),
                         keeps_shapes=False)  # fmt: skip
OPENVINO = EngineKind("openvino", "OpenVINO", "openvino", ("fp32", "bf16"), keeps_shapes=True,
                      caches_compiled=True)  # fmt: skip
ENGINES: Mapping[str, EngineKind] = {e.name: e for e in (ONNXRUNTIME, OPENVINO)}


@dataclass(frozen=True, order=True)
class Placement:
    """Where one graph runs: the engine, and the precision of its arithmetic (one the
    engine runs: ValueError otherwise, as for a plan file that names another)."""

    engine: Engine
    precision: Precision

    def __post_init__(self) -> None:
        kind = ENGINES.get(self.engine)
        if kind is None:
            raise ValueError(f"unknown engine {self.engine!r}")
        if self.precision not in kind.precisions:
            raise ValueError(f"{kind.title} runs no {self.precision!r} decoder")

    @classmethod
    def parse(cls, engine: str, precision: str) -> Placement:
        """The placement an engine's and a precision's names stand for (a plan file's, a
        measuring process's): ValueError as for any placement the table does not allow."""
        return cls(cast(Engine, engine), cast(Precision, precision))  # checked as it is made

    @property
    def kind(self) -> EngineKind:
        return ENGINES[self.engine]

    @property
    def keeps_shapes(self) -> bool:
        return self.kind.keeps_shapes

    def __str__(self) -> str:
        return f"{self.engine} {self.precision}"


# The placements the plan names.
ORT_FP32 = Placement(ONNXRUNTIME.name, "fp32")
ORT_INT8 = Placement(ONNXRUNTIME.name, "int8")
OPENVINO_FP32 = Placement(OPENVINO.name, "fp32")
OPENVINO_BF16 = Placement(OPENVINO.name, "bf16")

DECODER_PRECISIONS = ("auto", "fp32", "bf16", "int8")
# The decoder graph each precision loads. int8: opt-in, about 2x faster decoding on
# ONNX Runtime at ~27 dB SNR against float32 (yomiage.export.decoder_int8).
DECODER_GRAPHS = {"fp32": "decoder.onnx", "bf16": "decoder.onnx", "int8": "decoder_int8.onnx"}
# Decoders with fewer bytes of weights than this stay on ONNX Runtime under ``auto``
# (see the module docstring): 1 M float32 parameters, between the tiny voice's
# 0.06 M (OpenVINO slower) and a full-size SBV2 decoder's 14.6 M (OpenVINO ~2x faster).
OPENVINO_MIN_DECODER_BYTES = 4_000_000


@dataclass(frozen=True)
class VoicePlacement:
    """Where each graph of a bundle runs; ``decoder_graph`` is the file the decoder loads."""

    encoder: Placement
    flow: Placement
    decoder: Placement
    decoder_graph: str
    precision: str  # the decoder precision: fp32, bf16 or int8
    automatic: bool = False  # chosen by ``auto``: a voice's size may still change it

    def sized(self, decoder_bytes: int) -> VoicePlacement:
        """This placement for a voice whose decoder has ``decoder_bytes`` of weights: a
        decoder too small to gain from OpenVINO runs on ONNX Runtime in float32 when
        the precision was chosen by ``auto`` (an explicit choice stands)."""
        small = decoder_bytes < OPENVINO_MIN_DECODER_BYTES
        if self.automatic and small and self.decoder.keeps_shapes:
            return replace(self, decoder=ORT_FP32, precision="fp32")
        return self

    def running(self, decoder: Placement, flow: Placement | None = None) -> VoicePlacement:
        """This placement with the decoder (and the flow) where they actually loaded
        (OpenVINO may have refused one: then it runs on ONNX Runtime in float32)."""
        flow = self.flow if flow is None else flow
        if decoder == self.decoder and flow == self.flow:
            return self
        precision = self.precision
        if decoder != self.decoder:
            precision = "int8" if self.precision == "int8" else "fp32"
        return replace(self, decoder=decoder, precision=precision, flow=flow)

    def describe(self) -> str:
        flow = (
            f", flow {self.flow.precision} on {self.flow.engine}" if self.flow != ORT_FP32 else ""
        )
        return f"decoder {self.precision} on {self.decoder.engine}{flow}"


def check_decoder_precision(requested: str) -> str:
    """``requested`` if it names a decoder precision; ValueError listing them if not."""
    if requested not in DECODER_PRECISIONS:
        raise ValueError(
            f"decoder_precision must be one of {', '.join(DECODER_PRECISIONS)}, not {requested!r}"
        )
    return requested


def resolve_decoder_precision(requested: str, *, openvino: bool, native_bf16: bool) -> str:
    """``requested`` with ``auto`` resolved: bf16 where OpenVINO runs and the CPU computes
    bfloat16 natively (``native_bf16``), fp32 elsewhere. ValueError for bf16 without
    OpenVINO; an explicit bf16 on a CPU that emulates it is honoured with a warning
    (it is slower than fp32 there)."""
    check_decoder_precision(requested)
    native = openvino and native_bf16
    if requested == "auto":
        return "bf16" if openvino and native else "fp32"
    if requested == "bf16":
        if not openvino:
            raise ValueError(
                "decoder_precision='bf16' runs on OpenVINO, which is not available here "
                "(not installed, or YOMIAGE_OPENVINO=0): pip install openvino, or use 'auto'"
            )
        if not native:
            log.warning(
                "this CPU has no native bfloat16 (AVX512_BF16, AMX or Arm BF16): "
                "decoder_precision='bf16' is emulated and slower than 'fp32'"
            )
    return requested


def voice_placement(precision: str, *, openvino: bool, automatic: bool = False) -> VoicePlacement:
    """Where a bundle's graphs run for a resolved decoder ``precision`` (``automatic``:
    resolved from ``auto``, so :meth:`VoicePlacement.sized` may move a small decoder)."""
    graph = DECODER_GRAPHS[precision]
    # int8: static QDQ graphs run best on ONNX Runtime; fp32: see the module docstring.
    decoder = {"bf16": OPENVINO_BF16 if openvino else ORT_FP32, "int8": ORT_INT8}.get(
        precision, ORT_FP32
    )
    return VoicePlacement(ORT_FP32, ORT_FP32, decoder, graph, precision, automatic)


def graph_bytes(path: Path) -> int:
    """Bytes of an ONNX graph with its external data (``<name>.onnx.data``): its weights,
    4 bytes a float32 parameter, read from the file sizes without loading anything."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + ".data")) if p.is_file())
