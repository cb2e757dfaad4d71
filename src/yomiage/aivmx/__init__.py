"""AivisSpeech's AIVMX voices: read one (:mod:`.reader`), cut its single graph into a
yomiage bundle's encoder, flow and decoder (:mod:`.split`), write the bundle
(:mod:`.bundle`). No torch anywhere: the graph is cut as ONNX."""

from yomiage.aivmx.reader import AivmxFile, AivmxSpeaker, read_aivmx

__all__ = ["AivmxFile", "AivmxSpeaker", "read_aivmx"]
