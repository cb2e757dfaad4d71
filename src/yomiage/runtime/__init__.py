"""Synthesis backends behind one protocol: PyTorch (CUDA, and CPU for tests) and
ONNX Runtime (the CPU default)."""

from yomiage.options import OptionFields, SynthesisOptions
from yomiage.runtime.types import EncodedSentence, SynthesisBackend

__all__ = ["EncodedSentence", "OptionFields", "SynthesisBackend", "SynthesisOptions"]
