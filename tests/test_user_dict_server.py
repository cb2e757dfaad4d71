"""The server's user dictionary: the word cap over HTTP, and words another process
(``yomiage dict add``) writes to the file while the server runs."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.serving import serve
from yomiage import TTS
from yomiage.server import ServerConfig
from yomiage.text import UserDictionary

pytestmark = pytest.mark.server


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    return tmp_path / "user_dict.json"


@pytest.fixture
def tts(test_voice: Path, shared: Path) -> Iterator[TTS]:
    """An engine over a file-backed dictionary of at most two words."""
    engine = TTS(threads=1, user_dictionary=UserDictionary(shared, max_words=2))
    yield engine.load("tiny", source=test_voice).prepare()
    engine.close()


def test_a_full_dictionary_is_409_and_changes_nothing(tts: TTS, shared: Path) -> None:
    config = ServerConfig(warmup=False, dict_api="write")
    with serve(tts, config) as running, running.client() as http:
        for surface, reading in (("鬼滅", "キメツ"), ("呪術", "ジュジュツ")):
            word = {"surface": surface, "reading": reading}
            assert http.post("/v1/dictionary", json=word).status_code == 201
        saved = shared.read_bytes()
        full = http.post("/v1/dictionary", json={"surface": "担々麺", "reading": "タンタンメン"})
        assert full.status_code == 409
        error = full.json()["error"]
        assert error["code"] == "dictionary_full" and "at most 2" in error["message"]
        vox = http.post(
            "/user_dict_word",
            params={
                "surface": "担々麺",
                "pronunciation": "タンタンメン",
                "accent_type": 0,
            },
        )
        assert vox.status_code == 422 and "at most 2" in vox.text
        assert shared.read_bytes() == saved
        assert len(http.get("/v1/dictionary").json()["words"]) == 2


def test_a_running_server_sees_words_added_from_the_command_line(tts: TTS, shared: Path) -> None:
    with serve(tts, ServerConfig(warmup=False)) as running, running.client() as http:
        assert http.get("/v1/dictionary").json() == {"words": []}
        UserDictionary(shared).add("担々麺", "タンタンメン", accent=3)  # as `yomiage dict add`
        words = http.get("/v1/dictionary").json()["words"]
        assert [w["surface"] for w in words] == ["担々麺"]
        assert "タンタンメン" in tts.frontend.g2p("担々麺を食べる").readings


def test_a_word_crosses_the_worker_process_whole(test_voice: Path) -> None:
    """POST /v1/dictionary checks the word once and hands the child one UserWord."""
    import functools

    from tests import crashing_service
    from yomiage.server.engine.worker import WorkerService

    service = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    try:
        config = ServerConfig(warmup=False, dict_api="write")
        with serve(service, config) as running, running.client() as http:  # type: ignore[arg-type]
            word = {"surface": "推し", "reading": "おし", "accent": 1, "word_type": "common_noun"}
            added = http.post("/v1/dictionary", json=word)
            assert added.status_code == 201
            assert added.json() == {**word, "reading": "オシ", "priority": 5}
            assert http.get("/v1/dictionary").json()["words"] == [added.json()]
            bad = http.post("/v1/dictionary", json={"surface": "推し", "reading": "oshi"})
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_word"
            assert "must be katakana" in bad.json()["error"]["message"]
    finally:
        service.close()


def test_serve_says_what_its_worker_does_as_the_command_line_does(
    tmp_path: Path, test_voice: Path
) -> None:
    """Issue 31, 18: the docs promise "user dictionary reloaded (N words)" once ``yomiage
    dict add`` changed the file, and ``generate`` says it converts a voice on first use;
    ``serve`` said neither without -v: its worker process logged at WARNING only. (The
    AIVMX voice is cut into a bundle on first use; the test's cache is empty.)"""
    httpx = pytest.importorskip("httpx")
    words = tmp_path / "user_dict.json"
    aivmx = test_voice.parent.parent / "aivmx" / "tiny.aivmx"
    yomiage = [sys.executable, "-m", "yomiage"]
    command = [*yomiage, "serve", "--model", str(aivmx), "--bert", str(test_voice / "bert"),
               "--port", "0", "--threads", "1", "--no-warmup", "--no-access-log",
               "--user-dict", str(words)]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    loading, url = "", ""  # what it says until it listens (the voice is converted then)
    try:
        while not url and (found := process.stderr.readline()):
            loading += found
            url = next(iter(re.findall(r" on (http://127\.0\.0\.1:\d+)/", found)), "")
        assert url, loading
        add = [*yomiage, "dict", "add", "担々麺", "タンタンメン", "--user-dict", str(words)]
        subprocess.run(add, check=True, capture_output=True, timeout=120)
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.post("/tts", json={"text": "担々麺です。"}).status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert f"user dictionary reloaded (1 words) from {words}" in err, err
    assert "INFO yomiage.converted (worker): converting" in loading, loading
    assert "(once; it takes minutes)" in loading
