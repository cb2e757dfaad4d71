"""Which engine runs each graph of a voice, and in what precision: chosen by measurement.

Measured on the full-size synthetic voice, 2-core AMD EPYC with AVX-512 BF16,
2 threads, one graph at a time (``benchmarks/engines.py``; RESULTS.md has the
tables):

* decoder, per useful frame: ONNX Runtime 4.9 ms (128-frame windows), 4.5
  (512); OpenVINO float32 4.0 / 3.6 (equal to ONNX Runtime within 1e-6);
  OpenVINO bfloat16 2.3 / 2.0, at ~40 dB SNR against float32 on a trained
  decoder. bfloat16 on OpenVINO it is, where the CPU has it natively (elsewhere
  it is emulated and slower than float32). float32 stays on ONNX Runtime: end
  to end OpenVINO float32 was no faster (0.71-0.90x hayakoe in one run; ONNX
  Runtime 0.82-0.85x in another) and held 100-500 MB more, since OpenVINO
  keeps kernels for every input length; ONNX Runtime gives today's exact output.
* flow: ONNX Runtime float32 by default (OpenVINO float32 was 1.12x faster at
  650 frames but held ~240 MB more). A plan whose decoder runs bfloat16 on
  OpenVINO may take the flow there too (:mod:`yomiage.runtime.plan`): with its
  attention now banded, bfloat16 runs it 1.5-2.0x faster (Zen 5; 54.8 dB SNR on
  its output, random full-size voice), padded to a few lengths so the memory it
  keeps per length stays bounded (:mod:`yomiage.runtime.flow_lengths`).
* encoder (with the duration predictors): equal speed (27 ms vs 26 at 200
  tokens), OpenVINO loads 0.5 s slower; the spline of the stochastic duration
  predictor must stay float32: ONNX Runtime.
* BERT (q8): OpenVINO 1.09x faster at 100 tokens but 0.5 s slower to load and
  ~450 MB more while running: ONNX Runtime.
* small decoders: ONNX Runtime, whatever the CPU. OpenVINO's gain is in the
  arithmetic of a large decoder; its costs (compiling per window length, its
  own buffers and kernels, a slower load) are fixed, and on a small decoder
  they are most of the work. Measured (issue 22 item 14, RESULTS.md): on the
  committed tiny voice (0.3 MB of decoder weights) OpenVINO bf16 was the slower
  engine end to end and held ~3x the memory; on the full-size synthetic voice
  (59 MB) it decodes ~2x faster. So ``auto`` keeps a decoder under
  :data:`OPENVINO_MIN_DECODER_BYTES` of weights (1 M float32 parameters; SBV2
  decoders are ~14.6 M) on ONNX Runtime; an explicit ``bf16`` is honoured.
* HayaKoe's one-graph voices: ONNX Runtime. Their graph takes a whole
  sentence at once, so every sentence length is a new input shape, and
  OpenVINO keeps kernels for each shape it has seen (40-150 MB each on the
  full-size decoder, never freed): unbounded memory on a server.
"""

from __future__ import annotations

import importlib.metadata
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

Engine = Literal["onnxruntime", "openvino"]
Precision = Literal["f32", "bf16"]


@dataclass(frozen=True)
class Placement:
    """Where one graph runs: the engine, and the precision of its arithmetic."""

    engine: Engine = "onnxruntime"
    precision: Precision = "f32"

    def __str__(self) -> str:
        return f"{self.engine} {self.precision}"


ORT_F32 = Placement()

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
        if self.automatic and small and self.decoder.engine == "openvino":
            return replace(self, decoder=ORT_F32, precision="fp32")
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
        flow = f", flow {self.flow.precision} on {self.flow.engine}" if self.flow != ORT_F32 else ""
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
    decoder = Placement("openvino", "bf16") if precision == "bf16" and openvino else ORT_F32
    return VoicePlacement(ORT_F32, ORT_F32, decoder, graph, precision, automatic)


def installed_version(package: str) -> str | None:
    """The installed version of an engine's package, read from its metadata (nothing is
    loaded: OpenVINO costs a process 36 MB), or None."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def graph_bytes(path: Path) -> int:
    """Bytes of an ONNX graph with its external data (``<name>.onnx.data``): its weights,
    4 bytes a float32 parameter, read from the file sizes without loading anything."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + ".data")) if p.is_file())
