"""Synthesis backends behind one protocol: PyTorch (CUDA, and CPU for tests) and
ONNX Runtime (the CPU default)."""

from yomiage.runtime.types import (
    EncodedSentence,
    OptionFields,
    SynthesisBackend,
    SynthesisOptions,
)

__all__ = ["EncodedSentence", "OptionFields", "SynthesisBackend", "SynthesisOptions"]
