"""Which kind of voice folder this is, by the files it holds (no heavy imports)."""

from __future__ import annotations

import enum
from pathlib import Path

SYNTHESIZER = "synthesizer.onnx"
DURATION_PREDICTOR = "duration_predictor.onnx"


class VoiceLayout(enum.Enum):
    BUNDLE = "yomiage bundle"  # voice.json + encoder/flow/decoder graphs
    HAYAKOE = "HayaKoe ONNX speaker"  # config.json + synthesizer.onnx
    SBV2 = "SBV2 folder"  # config.json + *.safetensors


def detect_layout(folder: Path) -> VoiceLayout | None:
    if (folder / "voice.json").is_file():
        return VoiceLayout.BUNDLE
    if (folder / "config.json").is_file():
        if (folder / SYNTHESIZER).is_file():
            return VoiceLayout.HAYAKOE
        if any(folder.glob("*.safetensors")):
            return VoiceLayout.SBV2
    return None
