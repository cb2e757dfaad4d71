"""Which kind of voice folder this is, by the files it holds (no heavy imports)."""

from __future__ import annotations

import enum
import re
from pathlib import Path

from yomiage.json_file import read_json_object

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


CHECKPOINT_SUFFIX = ".safetensors"  # one checkpoint of an SBV2 folder, given as the voice
AIVMX_SUFFIX = ".aivmx"  # an AivisSpeech voice file


def declared_name(path: Path) -> str | None:
    """The name a local voice gives itself, so ``--model PATH`` is named after its model,
    not its folder: a bundle's ``voice.json`` ``name``, an SBV2 or HayaKoe ``config.json``'s
    ``model_name`` (for a ``.safetensors`` checkpoint, its folder's), an AIVMX
    manifest's ``name``. Characters a voice name may not hold become ``-``; None where
    the files say nothing usable."""
    if path.suffix.lower() == AIVMX_SUFFIX:  # the manifest's name, read without the graph
        from yomiage.aivmx.metadata import manifest_name

        return _as_name(manifest_name(path))
    folder = path.parent if path.suffix.lower() == CHECKPOINT_SUFFIX else path
    for file, key in (("voice.json", "name"), ("config.json", "model_name")):
        try:
            value = read_json_object(folder / file).get(key)
        except (OSError, ValueError):  # JsonFileError too
            continue
        return _as_name(value)
    return None


def _as_name(value: object) -> str | None:
    name = re.sub(r"[^\w.-]+", "-", value).strip("-.") if isinstance(value, str) else ""
    return name or None
