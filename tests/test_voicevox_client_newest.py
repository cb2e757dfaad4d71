"""The VOICEVOX routes driven by the newest voicevox-client (1.1.0, its asynchronous
``vvclient`` API), unchanged: imported from its wheel in tests/data/clients (see the
README there); tests/test_voicevox.py drives them with 0.4.1."""

from __future__ import annotations

import asyncio
import io
import sys
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("aiohttp")

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, first_style, serve
from yomiage import TTS, __version__
from yomiage.server import ServerConfig

pytestmark = pytest.mark.server

WHEEL = Path(__file__).parent / "data" / "clients" / "voicevox_client-1.1.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def vvclient() -> Iterator[Any]:
    sys.path.insert(0, str(WHEEL))
    try:
        import vvclient.errors

        yield vvclient
    finally:
        sys.path.remove(str(WHEEL))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"))
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    with serve(tts, ServerConfig(warmup=False)) as running:
        yield running
    tts.close()


def test_the_newest_client_speaks_with_yomiage(vvclient: Any, server: RunningServer) -> None:
    style = first_style(server)

    async def session() -> tuple[str, list[str], bool, bytes, bytes]:
        async with vvclient.Client(server.url) as client:
            version = await client.fetch_engine_version()
            cores = await client.fetch_core_versions()
            await client.init_speaker(style)
            ready = await client.is_inited_speaker(style)
            query = await client.create_audio_query("こんにちは、今日はいい天気ですね。", style)
            plain = await query.synthesis(style)
            query.data["speedScale"] = 0.5
            slow = await query.synthesis(style, enable_interrogative_upspeak=True)
            return version, cores, ready, plain, slow

    version, cores, ready, plain, slow = asyncio.run(session())
    assert version == __version__ and cores == [__version__] and ready is True
    with wave.open(io.BytesIO(plain)) as w:
        frames = w.getnframes()
        assert w.getsampwidth() == 2 and frames > w.getframerate() // 2
    with wave.open(io.BytesIO(slow)) as w:
        assert w.getnframes() > 1.6 * frames  # the edited speed was heard


def test_the_newest_client_reads_a_missing_style_as_not_found(
    vvclient: Any, server: RunningServer
) -> None:
    async def missing() -> None:
        async with vvclient.Client(server.url) as client:
            await client.create_audio_query("こんにちは。", 999_999_999)

    with pytest.raises(vvclient.errors.NotFoundError):
        asyncio.run(missing())
