"""Backends that load voice folders into :class:`~yomiage.runtime.voice.Voice` objects:
ONNX Runtime (the CPU default) and PyTorch (CUDA, and CPU for tests)."""

from yomiage.runtime.voice import EncodedSentence, SynthesisBackend, Voice, VoiceInfo

__all__ = ["EncodedSentence", "SynthesisBackend", "Voice", "VoiceInfo"]
