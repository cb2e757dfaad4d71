"""The yomiage voice bundle: what ``yomiage convert`` writes and the ONNX runtime reads.

A folder with ``voice.json`` (format version, the hyperparameters the runtime
needs, styles, speakers, sha256 of every file), ``style_vectors.npy`` and the
``encoder``/``flow``/``decoder`` ONNX graphs. No torch needed to read it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yomiage.errors import ModelLoadError
from yomiage.json_file import read_json_file
from yomiage.runtime.stage_trims import StageTrims

FORMAT = "yomiage-voice"
FORMAT_VERSION = 1
BERT_FORMAT = "yomiage-bert"
GRAPHS = ("encoder", "flow", "decoder")
# The decoder graph each decoder precision loads. int8: opt-in (``yomiage convert
# --decoder int8``), about twice as fast on ONNX Runtime at ~27 dB SNR against float32
# (yomiage.export.decoder_int8).
DECODER_GRAPHS = {"fp32": "decoder.onnx", "bf16": "decoder.onnx", "int8": "decoder_int8.onnx"}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def graph_bytes(path: Path) -> int:
    """Bytes of an ONNX graph with its external data (``<name>.onnx.data``): its weights,
    4 bytes a float32 parameter, read from the file sizes without loading anything."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + ".data")) if p.is_file())


@dataclass(frozen=True)
class VoiceManifest:
    """``voice.json`` of a bundle, validated."""

    path: Path
    name: str
    sampling_rate: int
    hop_length: int
    add_blank: bool
    bert_dim: int
    inter_channels: int
    n_speakers: int
    spk2id: Mapping[str, int]
    style2id: Mapping[str, int]
    receptive_field_frames: int
    files: Mapping[str, str]
    decoder_int8: Mapping[str, float] | None = None  # its error vs float32, when present
    aivm: Mapping[str, Any] | None = None  # the AIVM identity of a bundle cut from an AIVMX file
    # where the decoder may drop context between stages (runtime.stage_trims); None in
    # bundles converted before it could
    stage_trims: StageTrims | None = None

    def file(self, name: str) -> Path:
        return self.path / name

    def verify(self) -> None:
        """Check every listed file against its sha256 (reads them all: slow on big voices)."""
        for name, digest in self.files.items():
            actual = sha256_file(self.file(name))
            if actual != digest:
                raise ModelLoadError(f"{self.file(name)} is corrupt: sha256 {actual} != {digest}")


def _field(data: Mapping[str, Any], key: str, kind: type, path: Path) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ModelLoadError(f"{path}: '{key}' is missing or not a {kind.__name__}")
    return value


def _count(data: Mapping[str, Any], key: str, path: Path, low: int = 1, high: int = 2**31) -> int:
    """An integer field in ``[low, high]`` (a zero sample rate once divided by zero)."""
    value: int = _field(data, key, int, path)
    if not low <= value <= high:
        raise ModelLoadError(f"{path}: '{key}' is {value}; it must be from {low} to {high}")
    return value


def _ids(data: Mapping[str, Any], key: str, path: Path) -> dict[str, int]:
    value = _field(data, key, dict, path)
    if not value or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value.values()
    ):
        raise ModelLoadError(f"{path}: '{key}' must map names to non-negative integer ids")
    return {str(k): v for k, v in value.items()}


def read_manifest(folder: Path) -> VoiceManifest:
    path = folder / "voice.json"
    try:
        data = read_json_file(path)
    except FileNotFoundError as exc:
        raise ModelLoadError(
            f"{folder} is not a yomiage voice bundle (no voice.json); convert an SBV2 voice "
            "folder with `yomiage convert SBV2_DIR OUT_DIR --bert BERT_DIR`"
        ) from exc
    except (OSError, ValueError) as exc:  # JsonFileError names the file itself
        raise ModelLoadError(f"not a readable bundle manifest: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ModelLoadError(f"{path}: not a {FORMAT} manifest")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise ModelLoadError(
            f"{path}: bundle format {version!r}, this yomiage reads {FORMAT_VERSION}; "
            "convert the voice again with this version"
        )
    files = _field(data, "files", dict, path)
    for name in (*(f"{g}.onnx" for g in GRAPHS), "style_vectors.npy"):
        if name not in files:
            raise ModelLoadError(f"{path}: the bundle lists no {name}")
        if not (folder / name).is_file():
            raise ModelLoadError(f"{folder / name} is missing from the voice bundle")
    return VoiceManifest(
        path=folder,
        name=_field(data, "name", str, path),
        sampling_rate=_count(data, "sampling_rate", path, 8000, 192000),
        hop_length=_count(data, "hop_length", path, 1, 4096),
        add_blank=_field(data, "add_blank", bool, path),
        bert_dim=_count(data, "bert_dim", path),
        inter_channels=_count(data, "inter_channels", path, 2),
        n_speakers=_count(data, "n_speakers", path),
        spk2id=_ids(data, "spk2id", path),
        style2id=_ids(data, "style2id", path),
        receptive_field_frames=_count(data, "receptive_field_frames", path, 0, 4096),
        files=files,
        decoder_int8=data.get("decoder_int8")
        if isinstance(data.get("decoder_int8"), dict)
        else None,
        aivm=data.get("aivm") if isinstance(data.get("aivm"), dict) else None,
        stage_trims=_stage_trims(data, path),
    )


def _stage_trims(data: Mapping[str, Any], path: Path) -> StageTrims | None:
    """``decoder_stages`` as trims; a bundle written with wrong ones would decode wrong
    audio, so a malformed entry refuses the bundle rather than being ignored."""
    stages = data.get("decoder_stages")
    if stages is None:
        return None
    try:
        rates, margins = stages["rates"], stages["margins"]
        if not all(type(v) is int for v in (*rates, *margins)) or len(rates) > 16:
            raise ValueError("rates and margins must be lists of integers")
        return StageTrims(tuple(rates), tuple(margins), data["hop_length"])
    except (TypeError, KeyError, ValueError) as exc:
        raise ModelLoadError(f"{path}: 'decoder_stages' is not valid ({exc})") from None
