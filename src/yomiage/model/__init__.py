"""Our PyTorch implementation of the SBV2 JP-Extra synthesizer (needs ``yomiage[torch]``)."""

from yomiage.model.loader import TorchVoice, load_voice
from yomiage.model.synthesizer import Decoded, Encoded, JPExtraSynthesizer

__all__ = ["Decoded", "Encoded", "JPExtraSynthesizer", "TorchVoice", "load_voice"]
