"""Synthesis backends behind one protocol: PyTorch (CUDA, and CPU for tests) and,
next, ONNX Runtime (the CPU default)."""

from yomiage.runtime.types import EncodedSentence, SynthesisBackend, SynthesisOptions

__all__ = ["EncodedSentence", "SynthesisBackend", "SynthesisOptions"]
