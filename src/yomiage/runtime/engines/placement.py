"""The words for where a graph runs: the engines and what each can do (:data:`ENGINES`,
the one table the plan, the sessions and the plan store read), the precisions, and
the placements the plan names (:data:`ORT_FP32`, :data:`OPENVINO_BF16`, ...).

Which graph goes where, and why (measured: each graph on each engine in
``benchmarks/history/issue-13.md``, the small decoder in
``benchmarks/history/issues-22-23.md``; what each CPU family gets end to end in
``benchmarks/RESULTS.md``):

* the decoder, most of the work, is where the engines differ: bfloat16 on OpenVINO
  where the CPU computes it natively (AVX512_BF16 or AMX; emulated, it is slower
  than float32), float32 on ONNX Runtime elsewhere, which gives the reference
  output exactly and holds less memory (OpenVINO keeps kernels for every input
  length it meets). The plan chooses between them by measuring
  (:mod:`yomiage.runtime.plan`);
* the flow stays on ONNX Runtime in float32 unless a plan whose decoder runs
  bfloat16 on OpenVINO measured it faster there too, padded to a few lengths so
  the memory it keeps per length stays bounded (:mod:`yomiage.runtime.flow_lengths`),
  or a plan's memory budget needs its weights in bfloat16 (``onnxruntime bf16``:
  the weights rounded to bfloat16, the arithmetic float32;
  :mod:`yomiage.runtime.light_flows`);
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

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
    # The precisions it runs: of its arithmetic, but for ONNX Runtime's bf16, which keeps
    # the weights in bfloat16 and computes in float32 (only the flow runs so).
    precisions: tuple[Precision, ...]
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


ONNXRUNTIME = EngineKind("onnxruntime", "ONNX Runtime", "onnxruntime", ("fp32", "int8", "bf16"),
                         keeps_shapes=False)  # fmt: skip
OPENVINO = EngineKind("openvino", "OpenVINO", "openvino", ("fp32", "bf16"), keeps_shapes=True,
                      caches_compiled=True)  # fmt: skip
ENGINES: Mapping[str, EngineKind] = {e.name: e for e in (ONNXRUNTIME, OPENVINO)}


@dataclass(frozen=True, order=True)
class Placement:
    """Where one graph runs: the engine, and the precision it runs the graph in (one the
    engine runs: ValueError otherwise, as for a plan file that names another)."""

    engine: Engine
    precision: Precision

    def __post_init__(self) -> None:
        kind = ENGINES.get(self.engine)
        if kind is None:
            raise ValueError(f"unknown engine {self.engine!r}")
        if self.precision not in kind.precisions:
            raise ValueError(f"{kind.title} runs nothing in {self.precision!r}")

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
        weights = " weights" if (self.kind, self.precision) == (ONNXRUNTIME, "bf16") else ""
        return f"{self.engine} {self.precision}{weights}"


# The placements the plan names.
ORT_FP32 = Placement(ONNXRUNTIME.name, "fp32")
ORT_INT8 = Placement(ONNXRUNTIME.name, "int8")
ORT_BF16 = Placement(ONNXRUNTIME.name, "bf16")  # bfloat16 weights, float32 arithmetic: the flow
OPENVINO_FP32 = Placement(OPENVINO.name, "fp32")
OPENVINO_BF16 = Placement(OPENVINO.name, "bf16")
