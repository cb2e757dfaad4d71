"""Bundles are verified at load (issue 11): corrupt weights gave NaN audio served as 200."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from yomiage import TTS
from yomiage.errors import ModelLoadError
from yomiage.runtime.bundle import read_manifest


@pytest.fixture
def bundle(test_voice: Path, tmp_path: Path) -> Path:
    out = tmp_path / "voice"
    shutil.copytree(test_voice, out)
    return out


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _load(bundle: Path, cache: Path) -> TTS:
    return TTS(cache_dir=cache).load("v", source=bundle).prepare()


def _weights(bundle: Path, graph: str) -> Path:
    data = bundle / f"{graph}.onnx.data"
    return data if data.exists() else bundle / f"{graph}.onnx"


def test_same_size_corruption_of_weights_is_refused_at_load(bundle: Path, tmp_path: Path) -> None:
    _flip_byte(_weights(bundle, "decoder"))
    with pytest.raises(ModelLoadError, match=r"decoder\.onnx.* is corrupt"):
        _load(bundle, tmp_path / "cache")


def test_corrupt_bert_is_refused_at_load(bundle: Path, tmp_path: Path) -> None:
    _flip_byte(_weights(bundle / "bert", "bert_q8"))
    with pytest.raises(ModelLoadError, match="corrupt"):
        _load(bundle, tmp_path / "cache")


def test_verified_files_are_remembered_until_they_change(bundle: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _load(bundle, cache).close()
    memo = list((cache / "verified").glob("*.json"))
    assert len(memo) == 2  # the voice and its BERT
    # A later load trusts files whose size and time are unchanged (no hashing)...
    _load(bundle, cache).close()
    # ...and hashes again any whose time changed.
    _flip_byte(_weights(bundle, "flow"))
    with pytest.raises(ModelLoadError, match="corrupt"):
        _load(bundle, cache)


def test_unused_decoder_is_not_read(bundle: Path, tmp_path: Path) -> None:
    manifest = json.loads((bundle / "voice.json").read_text("utf-8"))
    manifest["files"]["decoder_int8.onnx"] = "0" * 64  # listed, absent, not used
    (bundle / "voice.json").write_text(json.dumps(manifest), "utf-8")
    _load(bundle, tmp_path / "cache").close()


@pytest.mark.parametrize(
    ("key", "value"),
    [("sampling_rate", 0), ("sampling_rate", -44100), ("hop_length", 0), ("n_speakers", 0),
     ("spk2id", {"a": -1}), ("style2id", {}), ("bert_dim", True)],
)  # fmt: skip
def test_manifest_values_are_checked(bundle: Path, key: str, value: object) -> None:
    """sampling_rate 0 in voice.json once raised ZeroDivisionError."""
    manifest = json.loads((bundle / "voice.json").read_text("utf-8"))
    manifest[key] = value
    (bundle / "voice.json").write_text(json.dumps(manifest), "utf-8")
    with pytest.raises(ModelLoadError, match=key):
        read_manifest(bundle)


@pytest.mark.parametrize(("section", "key", "value"),
                         [("data", "sampling_rate", 0), ("model", "n_heads", 0)])  # fmt: skip
def test_sbv2_config_values_are_checked(section: str, key: str, value: int) -> None:
    from tests.conftest import require_fixtures
    from yomiage.sbv2.config import parse_config

    config = json.loads((require_fixtures() / "sbv2_tiny" / "model" / "config.json").read_text())
    config[section][key] = value
    with pytest.raises(ModelLoadError, match=key):
        parse_config(config, Path("config.json"))
