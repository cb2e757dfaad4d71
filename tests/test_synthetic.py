"""Synthetic voices and BERTs must look exactly like real ones to the loaders."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import SHARED, require_fixtures
from yomiage.devtools.synthetic import (
    TARGET_FRAMES_PER_TOKEN,
    main,
    make_bert,
    make_voice,
    plan_voice,
)

pytest.importorskip("safetensors")

TINY_MODEL = SHARED / "fixtures" / "sbv2_tiny" / "model"
FULL_MANIFEST = SHARED / "spec" / "jp_extra_full_state_dict_shapes.json"
_DTYPES = {"F32": "float32", "I64": "int64", "F16": "float16"}


def _manifest(path: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    from safetensors import safe_open

    with safe_open(str(path), "np") as f:
        return {
            key: (tuple(f.get_slice(key).get_shape()), _DTYPES[f.get_slice(key).get_dtype()])
            for key in f.keys()  # noqa: SIM118 - safe_open is not iterable
        }


def _tensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    (weights,) = folder.glob("*.safetensors")
    return load_file(str(weights))


def test_full_plan_equals_upstream_manifest() -> None:
    if not FULL_MANIFEST.exists():
        pytest.skip(f"spec not found at {FULL_MANIFEST}")
    entries = json.loads(FULL_MANIFEST.read_text("utf-8"))
    expected = {e["key"]: (tuple(e["shape"]), e["dtype"]) for e in entries["entries"]}
    plan = plan_voice("full")
    assert plan == expected
    assert len(plan) == 1268
    weights = sum(math.prod(shape) for shape, dtype in plan.values() if dtype == "float32")
    assert weights == entries["total_params"]


def test_tiny_voice_has_the_fixture_keys_and_shapes(tmp_path: Path) -> None:
    require_fixtures()
    folder = make_voice(tmp_path, "tiny", 0, n_speakers=2, styles=("Neutral", "Happy", "Sad"))
    written = _manifest(folder / "synthetic_e1_s100.safetensors")
    (fixture_weights,) = TINY_MODEL.glob("*.safetensors")
    assert written == _manifest(fixture_weights)
    assert written == plan_voice("tiny", n_speakers=2)

    config = json.loads((folder / "config.json").read_text("utf-8"))
    fixture = json.loads((TINY_MODEL / "config.json").read_text("utf-8"))
    assert config["model"] == fixture["model"]
    assert config["train"] == fixture["train"]
    assert config["version"] == fixture["version"]
    assert set(config["data"]) == set(fixture["data"])
    for key in ("sampling_rate", "hop_length", "filter_length", "add_blank", "n_speakers"):
        assert config["data"][key] == fixture["data"][key]
    assert config["data"]["style2id"] == fixture["data"]["style2id"]
    assert config["data"]["num_styles"] == 3
    assert config["data"]["spk2id"] == {"synthetic_0": 0, "synthetic_1": 1}


def test_voice_folder_follows_sbv2_conventions(tmp_path: Path) -> None:
    folder = make_voice(tmp_path, "tiny", 3, name="tester")
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "style_vectors.npy",
        "tester_e1_s100.safetensors",
    ]
    config = json.loads((folder / "config.json").read_text("utf-8"))
    assert config["version"].endswith("JP-Extra")
    assert config["data"]["spk2id"] == {"tester": 0}
    assert config["data"]["style2id"] == {"Neutral": 0, "Happy": 1, "Sad": 2, "Angry": 3}

    styles = np.load(folder / "style_vectors.npy")
    assert styles.dtype == np.float32
    assert styles.shape == (4, 256)
    np.testing.assert_allclose(styles[0], styles[1:].mean(axis=0), atol=1e-6)

    t = _tensors(folder)
    assert t["iteration"].dtype == np.int64
    assert t["iteration"].tolist() == [100]
    assert all(v.dtype == np.float32 for k, v in t.items() if k != "iteration")
    # weight_g carries the gain: a loader that ignores it must not pass by luck.
    v = t["dec.ups.0.weight_v"]
    norm = np.sqrt((v.reshape(v.shape[0], -1) ** 2).sum(axis=1))
    assert not np.allclose(t["dec.ups.0.weight_g"].reshape(-1), norm, rtol=0.1)


def test_duration_predictors_target_realistic_durations(tmp_path: Path) -> None:
    t = _tensors(make_voice(tmp_path, "tiny", 0))
    target = math.log(TARGET_FRAMES_PER_TOKEN)
    assert TARGET_FRAMES_PER_TOKEN == 2.5  # 3 frames per token after ceil, ~0.12 s per mora
    assert t["dp.proj.bias"][0] == pytest.approx(target, abs=1e-6)
    assert np.linalg.norm(t["dp.proj.weight"]) < 0.2
    # With zero noise the SDP's last reverse step maps z = 0 to -m * exp(-logs).
    m, logs = t["sdp.flows.0.m"][0, 0], t["sdp.flows.0.logs"][0, 0]
    assert -m * math.exp(-logs) == pytest.approx(target, abs=1e-5)

    slow = _tensors(make_voice(tmp_path / "slow", "tiny", 0, frames_per_token=6.5))
    assert slow["dp.proj.bias"][0] == pytest.approx(math.log(6.5), abs=1e-6)


def test_voice_speaks_at_three_frames_per_token(tmp_path: Path) -> None:
    """At SBV2's default settings nearly every token lasts ceil(2.5) = 3 frames."""
    torch = pytest.importorskip("torch")
    from yomiage.model import load_voice

    voice = load_voice(make_voice(tmp_path, "tiny", 0))
    rng = np.random.default_rng(0)
    t = 2 * 60 + 1  # 60 phones with blanks between and around them
    phones = np.zeros(t, dtype=np.int64)
    phones[1::2] = rng.integers(1, 112, t // 2)
    tones = np.zeros(t, dtype=np.int64)
    tones[1::2] = 6 + rng.integers(0, 2, t // 2)
    languages = np.zeros(t, dtype=np.int64)
    languages[1::2] = 1
    for sdp_ratio, noise_scale_w in ((0.0, 0.8), (0.2, 0.8), (1.0, 0.0)):
        with torch.no_grad():
            encoded = voice.model.encode(
                torch.from_numpy(phones)[None],
                torch.from_numpy(tones)[None],
                torch.from_numpy(languages)[None],
                torch.zeros(1, voice.bert_dim, t),
                torch.from_numpy(voice.styles.vectors[:1]),
                torch.zeros(1, dtype=torch.long),
                sdp_ratio=sdp_ratio,
                noise_scale_w=noise_scale_w,
                length_scale=1.0,
                generator=torch.Generator().manual_seed(0),
            )
        assert float(encoded.durations.mean()) == pytest.approx(3.0, abs=0.1), sdp_ratio


def test_same_seed_gives_identical_bytes(tmp_path: Path) -> None:
    a = make_voice(tmp_path / "a", "tiny", 7)
    b = make_voice(tmp_path / "b", "tiny", 7)
    c = make_voice(tmp_path / "c", "tiny", 8)
    for name in ("config.json", "synthetic_e1_s100.safetensors", "style_vectors.npy"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "synthetic_e1_s100.safetensors").read_bytes() != (
        c / "synthetic_e1_s100.safetensors"
    ).read_bytes()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_speakers": 0}, "n_speakers"),
        ({"styles": ()}, "styles"),
        ({"styles": ("Neutral", "Neutral")}, "unique"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_voice_arguments_are_refused(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make_voice(tmp_path, "tiny", 0, **kwargs)


def test_negative_seed_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="seed"):
        make_voice(tmp_path, "tiny", -1)
    assert not list(tmp_path.iterdir())


def test_command_line_writes_a_voice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "voice"
    assert main(["make-voice", str(out), "--size", "tiny", "--seed", "2", "--n-speakers", "2"]) == 0
    assert "synthetic_e1_s100.safetensors" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text("utf-8"))
    assert config["data"]["n_speakers"] == 2


def test_tiny_bert_loads_with_transformers_and_runs(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = make_bert(tmp_path / "bert", "tiny", 0)
    again = make_bert(tmp_path / "again", "tiny", 0)
    assert (folder / "model.safetensors").read_bytes() == (again / "model.safetensors").read_bytes()

    model = transformers.DebertaV2Model.from_pretrained(folder, local_files_only=True)
    transformers.DebertaV2ForMaskedLM.from_pretrained(folder, local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert type(tokenizer).__name__ == "BertJapaneseTokenizer"
    encoded = tokenizer("こんにちは。", return_tensors="pt")
    ids = encoded["input_ids"][0].tolist()
    assert ids[0] == 1 and ids[-1] == 2 and len(ids) == 8
    assert 3 not in ids  # every kana and 。 is in the vocabulary

    model.eval()
    with torch.no_grad():
        out = model(**encoded, output_hidden_states=True)
    features = out.hidden_states[-3]
    assert features.shape == (1, 8, 64)
    assert torch.isfinite(features).all()
    assert 0.5 < float(features.std()) < 2.0

    lines = (folder / "vocab.txt").read_text("utf-8").splitlines()
    assert lines[:5] == ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    assert len(lines) == len(set(lines)) == model.config.vocab_size
