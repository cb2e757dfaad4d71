from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ray_loopback import LOOPBACK_ENV
from yomiage import TTS
from yomiage.options import SynthesisOptions
from yomiage.runtime.engines.telemetry import engines_without_telemetry
from yomiage.text import Frontend, UserDictionary

# Read when Ray is imported, so before any test module imports it: every Ray cluster a
# test starts is a one-machine cluster on loopback (tests/ray_loopback.py).
os.environ.update(LOOPBACK_ENV)


def pytest_configure(config: pytest.Config) -> None:
    """Nothing the suite does may write into the real ``$HOME`` (issue 31, 16;
    tests/test_suite_home.py).

    No test may start ONNX Runtime or OpenVINO with its telemetry on: test modules import
    them themselves (at collection, in a test, in the subprocesses they start), which
    wrote a device id and events. So the whole session runs inside yomiage's guard, and
    the subprocesses inherit its ONNX Runtime switches (tests/test_telemetry.py clears
    them to check the guard itself). And a fixture wider than one test (a module's or the
    session's engine) is made before :func:`_isolated_user_dict` sets each test's
    folders, so the session has folders of its own too."""
    quiet = contextlib.ExitStack()
    quiet.enter_context(engines_without_telemetry())
    config.add_cleanup(quiet.close)
    folder = Path(tempfile.mkdtemp(prefix="yomiage-tests-"))
    environment = pytest.MonkeyPatch()
    for name, inside in SESSION_FOLDERS.items():
        environment.setenv(name, str(folder / inside))
    config.add_cleanup(functools.partial(shutil.rmtree, folder, ignore_errors=True))
    config.add_cleanup(environment.undo)


# Where the session's (and the subprocesses') cache, user dictionary and installed
# voices go; each test gets folders of its own (:func:`_isolated_user_dict`).
SESSION_FOLDERS = {
    "YOMIAGE_CACHE": "cache",
    "YOMIAGE_USER_DICT": "user_dict.json",
    "YOMIAGE_MODELS_DIR": "models",
}


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
    # Nor the voices `yomiage serve` installs and loads at start.
    monkeypatch.setenv("YOMIAGE_MODELS_DIR", str(tmp_path_factory.mktemp("models")))


@pytest.fixture(scope="session")
def frontend() -> Iterator[Frontend]:
    f = Frontend(UserDictionary(None), reading="sbv2")  # the readings these tests pin
    yield f
    f.close()


@pytest.fixture(scope="session")
def natural_frontend() -> Iterator[Frontend]:
    """The default reading, with no user words."""
    f = Frontend(UserDictionary(None))
    yield f
    f.close()


# The voices the suite runs on everywhere (tools/make_test_voices.py makes them):
# a yomiage bundle with its q8 BERT, and the same voice in HayaKoe's layout.
TEST_VOICES = Path(__file__).resolve().parent / "data" / "voices"


def reference_cases(relative: str) -> list[Any]:
    """The cases of a reference file in ../shared/fixtures as pytest parameters; without
    the fixtures, one parameter that skips and says why (never an empty set)."""
    path = FIXTURES / relative
    if not path.exists():
        reason = f"compares with reference outputs: {path} not found"
        return [pytest.param(None, id="no-reference", marks=pytest.mark.skip(reason=reason))]
    cases = json.loads(path.read_text("utf-8"))["cases"]
    return [pytest.param(case, id=case["id"]) for case in cases]


def reference_options(case: dict[str, Any], setting: dict[str, Any]) -> SynthesisOptions:
    """The options of a reference case's setting, noise off (the fixtures' comparisons)."""
    return SynthesisOptions(
        style=case["style"],
        style_weight=case["style_weight"],
        speaker_id=case["sid"],
        sdp_ratio=setting["sdp_ratio"],
        speed=setting["length_scale"],
        noise=0.0,
        noise_w=0.0,
    )


def require_fixtures() -> Path:
    """The reference implementation's outputs in ../shared/fixtures (skip without them)."""
    if not FIXTURES.is_dir():
        pytest.skip(f"compares with reference outputs: ../shared/fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture(scope="session")
def test_voice() -> Path:
    """The tiny test voice bundle (read-only: copy it to change it)."""
    return TEST_VOICES / "tiny"


@pytest.fixture(scope="session")
def engine(test_voice: Path) -> Iterator[TTS]:
    """One prepared engine for the session: the test voice as "tiny" and "tiny2"
    (two names, for tests of several voices), words in memory only."""
    tts = TTS(threads=2).load("tiny", source=test_voice).load("tiny2", source=test_voice)
    yield tts.prepare()
    tts.close()


def hayakoe_layout(root: Path, bundle: Path, synthesizer_dir: Path) -> Path:
    """``onnx/speakers/tiny`` (the graphs of ``synthesizer_dir``) and ``onnx/bert/q8``
    (the bundle's BERT) as HayaKoe publishes them; returns the speaker folder."""
    speaker = root / "onnx" / "speakers" / "tiny"
    shutil.copytree(synthesizer_dir, speaker)
    bert = root / "onnx" / "bert" / "q8"
    bert.mkdir(parents=True)
    for name in ("bert_q8.onnx", "bert_q8.onnx.data", "tokenizer.json"):
        shutil.copy(bundle / "bert" / name, bert / name)
    return speaker


@pytest.fixture(scope="session")
def reference_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference fixture's tiny voice converted by our exporter, BERT in ``bert/``:
    for the tests that compare with the reference outputs in ../shared.

    Needs the [torch] extra (conversion only); made once per test session.
    """
    tiny = require_fixtures() / "sbv2_tiny"
    pytest.importorskip("torch", reason="converting the reference voice needs yomiage[torch]")
    pytest.importorskip("onnx", reason="converting the reference voice needs yomiage[torch]")
    from yomiage.export.convert import convert_bert, convert_voice

    out = tmp_path_factory.mktemp("bundles") / "tiny"
    convert_voice(tiny / "model", out)
    convert_bert(tiny / "bert" / "model", out / "bert", tokenizer_dir=tiny / "bert" / "tokenizer")
    return out
