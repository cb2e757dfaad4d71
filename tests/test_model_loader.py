"""Loading SBV2 voice folders: both weight-norm spellings, and clear errors for bad ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES
from yomiage.errors import ModelLoadError
from yomiage.sbv2 import load_config

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from yomiage.model import load_voice  # noqa: E402

TINY_MODEL = FIXTURES / "sbv2_tiny" / "model"
WEIGHTS = "sbv2_tiny_e1_s100.safetensors"


@pytest.fixture
def voice_dir(tmp_path: Path) -> Path:
    if not TINY_MODEL.is_dir():
        pytest.skip("shared fixtures not available")
    out = tmp_path / "voice"
    shutil.copytree(TINY_MODEL, out)
    return out


def _tensors(folder: Path) -> dict[str, Any]:
    return dict(safetensors_torch.load_file(str(folder / WEIGHTS)))


def _write(folder: Path, tensors: dict[str, Any]) -> None:
    safetensors_torch.save_file(tensors, str(folder / WEIGHTS))


def _audio(folder: Path) -> Any:
    voice = load_voice(folder)
    t = 9
    with torch.inference_mode():
        enc = voice.model.encode(
            torch.arange(t)[None] % 50,
            torch.full((1, t), 6),
            torch.ones(1, t, dtype=torch.long),
            torch.zeros(1, voice.bert_dim, t),
            torch.from_numpy(voice.styles.vector("Happy"))[None],
            torch.tensor([1]),
            sdp_ratio=0.0,
            noise_scale_w=0.0,
            length_scale=1.0,
        )
        return voice.model.decode(enc, noise_scale=0.0).audio


def test_names_and_bert_width_come_from_the_folder(voice_dir: Path) -> None:
    voice = load_voice(voice_dir)
    assert voice.bert_dim == 64
    assert voice.styles.names == ("Neutral", "Happy", "Sad")
    assert dict(voice.config.spk2id) == {"spk_a": 0, "spk_b": 1}
    with pytest.raises(ValueError, match="Neutral, Happy, Sad"):
        voice.styles.vector("Angry")


def test_parametrization_spelling_gives_the_same_audio(voice_dir: Path, tmp_path: Path) -> None:
    reference = _audio(voice_dir)
    renamed = {}
    for key, value in _tensors(voice_dir).items():
        key = key.replace(".weight_g", ".parametrizations.weight.original0")
        key = key.replace(".weight_v", ".parametrizations.weight.original1")
        renamed[key] = value
    _write(voice_dir, renamed)
    assert torch.equal(_audio(voice_dir), reference)


def test_float16_and_no_posterior_encoder(voice_dir: Path) -> None:
    tensors = {
        k: (v.half() if v.is_floating_point() else v)
        for k, v in _tensors(voice_dir).items()
        if not k.startswith("enc_q.")
    }
    _write(voice_dir, tensors)
    assert _audio(voice_dir).abs().max() > 0


def test_truncated_weights(voice_dir: Path) -> None:
    path = voice_dir / WEIGHTS
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match=WEIGHTS):
        load_voice(voice_dir)


def test_garbage_weights(voice_dir: Path) -> None:
    (voice_dir / WEIGHTS).write_bytes(b"\x00" * 100)
    with pytest.raises(ModelLoadError, match="safetensors"):
        load_voice(voice_dir)


def test_missing_tensor_is_named(voice_dir: Path) -> None:
    tensors = _tensors(voice_dir)
    del tensors["flow.flows.2.post.weight"]
    _write(voice_dir, tensors)
    with pytest.raises(ModelLoadError, match=r"flow\.flows\.2\.post\.weight"):
        load_voice(voice_dir)


def test_wrong_shape_is_named(voice_dir: Path) -> None:
    tensors = _tensors(voice_dir)
    tensors["dp.conv_1.weight"] = torch.zeros(256, 24, 5)
    _write(voice_dir, tensors)
    with pytest.raises(ModelLoadError, match=r"dp.conv_1.weight \(256, 24, 5\)"):
        load_voice(voice_dir)


def test_config_for_another_width(voice_dir: Path) -> None:
    config = json.loads((voice_dir / "config.json").read_text())
    config["model"]["hidden_channels"] = 32
    (voice_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="wrong shape"):
        load_voice(voice_dir)


@pytest.mark.parametrize("missing", ["config.json", "style_vectors.npy", WEIGHTS])
def test_missing_file(voice_dir: Path, missing: str) -> None:
    (voice_dir / missing).unlink()
    with pytest.raises(
        ModelLoadError, match=missing.split("_e1")[0] if missing == WEIGHTS else missing
    ):
        load_voice(voice_dir)


def test_style_vectors_of_wrong_width(voice_dir: Path) -> None:
    np.save(voice_dir / "style_vectors.npy", np.zeros((3, 128), dtype=np.float32))
    with pytest.raises(ModelLoadError, match="256"):
        load_voice(voice_dir)


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a directory"):
        load_voice(tmp_path / "nothing")


def test_config_validation(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    base = json.loads((TINY_MODEL / "config.json").read_text()) if TINY_MODEL.exists() else {}
    if not base:
        pytest.skip("shared fixtures not available")
    path.write_text(
        json.dumps({**base, "unknown_key": 1, "model": {**base["model"], "extra": True}})
    )
    assert load_config(path).model.hidden_channels == 24
    for broken, message in [
        ({k: v for k, v in base.items() if k != "version"}, "version"),
        ({**base, "version": "2.5.0"}, "not a JP-Extra"),
        ({**base, "data": {**base["data"], "hop_length": 256}}, "hop_length"),
        ({**base, "model": {**base["model"], "n_heads": "2"}}, "n_heads"),
        ([1, 2], "JSON object"),
    ]:
        path.write_text(json.dumps(broken))
        with pytest.raises(ModelLoadError, match=message):
            load_config(path)
    path.write_text("{")
    with pytest.raises(ModelLoadError, match="JSON"):
        load_config(path)
