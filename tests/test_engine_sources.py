"""TTS end to end through remote sources: a loopback hub in HayaKoe's layout, then offline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.sources_servers import HubState, fake_hub
from yomiage import TTS
from yomiage.errors import OfflineError


def _hayakoe_repo(test_voice: Path, speaker: str) -> dict[str, bytes]:
    """The test voice in HayaKoe's layout with its q8 BERT, as HayaKoe's repository holds it."""
    graphs = test_voice.parent / "hayakoe"
    files = {f"onnx/speakers/{speaker}/{p.name}": p.read_bytes() for p in graphs.iterdir()}
    for name in ("bert_q8.onnx", "bert_q8.onnx.data"):
        files[f"onnx/bert/q8/{name}"] = (test_voice / "bert" / name).read_bytes()
    files["bert/tokenizer/tokenizer.json"] = (test_voice / "bert" / "tokenizer.json").read_bytes()
    return files


@pytest.fixture
def hub(test_voice: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    with fake_hub() as (endpoint, state):
        state.add_repo("lemondouble/hayakoe", _hayakoe_repo(test_voice, "jvnv-F1-jp"))
        state.add_repo("someone/voices", _hayakoe_repo(test_voice, "mine"))
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        for var in ("HF_HUB_OFFLINE", "YOMIAGE_OFFLINE", "HF_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        yield state


def test_catalog_name_downloads_then_works_offline(hub: HubState, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with TTS(cache_dir=cache).load("jvnv-F1-jp").prepare() as tts:
        online = tts.speakers["jvnv-F1-jp"].generate("こんにちは。", noise=0, noise_w=0)
    with TTS(cache_dir=cache, offline=True).load("jvnv-F1-jp").prepare() as tts:
        offline = tts.speakers["jvnv-F1-jp"].generate("こんにちは。", noise=0, noise_w=0)
    np.testing.assert_array_equal(online.samples, offline.samples)
    with pytest.raises(OfflineError, match="yomiage download jvnv-F2-jp"):
        TTS(cache_dir=cache, offline=True).load("jvnv-F2-jp").prepare()


def test_hub_source_takes_the_bert_of_its_repo(hub: HubState, tmp_path: Path) -> None:
    source = "hf://someone/voices/onnx/speakers/mine"
    tts = TTS(cache_dir=tmp_path / "cache").load("mine", source=source)
    fetched = tts.pre_download()
    assert fetched[0].name == "mine"
    with tts.prepare():
        audio = tts.speakers["mine"].generate("はい。", noise=0, noise_w=0)
    assert audio.duration > 0
    # The BERT came from someone/voices, not from the catalog's repository.
    assert (tmp_path / "cache" / "hub" / "someone--voices" / "main" / "onnx" / "bert").is_dir()
    assert not (tmp_path / "cache" / "hub" / "lemondouble--hayakoe").exists()


def test_local_voice_without_a_bert_suggests_bert(
    test_voice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local voice folder without --bert failed on the hub BERT with a network error."""
    import shutil

    from yomiage import TTS
    from yomiage.errors import ModelLoadError

    voice = tmp_path / "voice"
    shutil.copytree(test_voice, voice, ignore=shutil.ignore_patterns("bert"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    engine = TTS(cache_dir=tmp_path / "cache").load("v", source=voice)
    with pytest.raises(ModelLoadError, match="--bert PATH"):
        engine.prepare()
