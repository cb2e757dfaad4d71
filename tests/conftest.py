from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from yomiage.text import Frontend, UserDictionary

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FIXTURES = SHARED / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_user_dict(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test may read or write the real per-user dictionary or cache."""
    path = tmp_path_factory.mktemp("userdict") / "user_dict.json"
    monkeypatch.setenv("YOMIAGE_USER_DICT", str(path))
    # Nor the real download cache.
    monkeypatch.setenv("YOMIAGE_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def frontend() -> Iterator[Frontend]:
    f = Frontend(UserDictionary(None))
    yield f
    f.close()


def require_fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny fixture voice converted by our exporter, with its BERT bundle in ``bert/``.

    Needs the [torch] extra (conversion only); made once per test session.
    """
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    tiny = require_fixtures() / "sbv2_tiny"
    from yomiage.export.convert import convert_bert, convert_voice

    out = tmp_path_factory.mktemp("bundles") / "tiny"
    convert_voice(tiny / "model", out)
    convert_bert(tiny / "bert" / "model", out / "bert", tokenizer_dir=tiny / "bert" / "tokenizer")
    return out
