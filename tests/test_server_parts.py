"""The server's parts on their own: resampler, metrics text, admission gate, formats, subtitles."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from yomiage.audio.resample import Resampler, resample
from yomiage.audio.subtitles import sentence_cues, to_srt, to_vtt
from yomiage.audio.timings import Span, Timings

# -- resampler ------------------------------------------------------------------------


@pytest.mark.parametrize("rate_out", [24000, 48000, 16000, 22050])
def test_resampled_sine_stays_a_sine(rate_out: int) -> None:
    t = np.arange(44100) / 44100
    x = 0.5 * np.sin(2 * np.pi * 440 * t)
    y = resample(x, 44100, rate_out)
    assert len(y) == rate_out
    expected = 0.5 * np.sin(2 * np.pi * 440 * np.arange(len(y)) / rate_out)
    # Away from the edges (where the signal starts and stops) it is the same tone.
    assert np.abs(y[200:-200] - expected[200:-200]).max() < 1e-3


def test_stream_in_any_chunking_equals_one_go() -> None:
    x = np.random.default_rng(0).standard_normal(30000).astype(np.float32)
    whole = resample(x, 44100, 48000)
    rng = np.random.default_rng(1)
    r = Resampler(44100, 48000)
    pieces, i = [], 0
    while i < len(x):
        n = int(rng.integers(0, 3000))
        pieces.append(r.process(x[i : i + n]))
        i += n
    pieces.append(r.flush())
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    assert len(whole) == -(-len(x) * 48000 // 44100)


def test_resampler_removes_what_the_new_rate_cannot_hold() -> None:
    t = np.arange(44100) / 44100
    above = np.sin(2 * np.pi * 15000 * t)  # above 12 kHz, the Nyquist of 24 kHz
    assert np.abs(resample(above, 44100, 24000)[200:-200]).max() < 1e-3
    dc = resample(np.ones(5000), 44100, 24000)
    assert np.abs(dc[100:-100] - 1).max() < 1e-5


def test_resampler_edge_cases() -> None:
    x = np.arange(10, dtype=np.float32)
    same = resample(x, 44100, 44100)
    np.testing.assert_array_equal(same, x)
    assert same is not x
    assert len(resample(np.zeros(0), 44100, 24000)) == 0
    with pytest.raises(ValueError, match="positive"):
        Resampler(0, 24000)
    r = Resampler(44100, 24000)
    r.flush()
    with pytest.raises(RuntimeError):
        r.process(x)


# -- metrics --------------------------------------------------------------------------


def test_metrics_text_format() -> None:
    from yomiage.server.metrics import Counter, Registry

    r = Registry()
    c = r.counter("demo_requests_total", "Requests.", ["route", "status"])
    c.inc("/a", "200")
    c.inc("/a", "200", amount=2)
    c.inc('/"odd"\\\n', "500")
    g = r.gauge("demo_depth", "Depth.", callback=lambda: 3)
    h = r.histogram("demo_seconds", "Latency.", ["route"], buckets=(0.1, 1.0))
    for value in (0.05, 0.5, 0.7, 5.0):
        h.observe(value, "/a")
    text = r.render()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert "# TYPE demo_requests_total counter" in lines
    assert 'demo_requests_total{route="/a",status="200"} 3' in lines
    assert 'demo_requests_total{route="/\\"odd\\"\\\\\\n",status="500"} 1' in lines
    assert "demo_depth 3" in lines and g.value() == 3
    kept = Counter("demo_kept_total", "Kept elsewhere.", callback=lambda: 7)
    r.add(kept)
    assert "demo_kept_total 7" in r.render().splitlines() and kept.value() == 7
    assert 'demo_seconds_bucket{route="/a",le="0.1"} 1' in lines
    assert 'demo_seconds_bucket{route="/a",le="1"} 3' in lines
    assert 'demo_seconds_bucket{route="/a",le="+Inf"} 4' in lines
    assert 'demo_seconds_count{route="/a"} 4' in lines
    assert 'demo_seconds_sum{route="/a"} 6.25' in lines
    with pytest.raises(ValueError, match="cannot go down"):
        c.inc("/a", "200", amount=-1)
    with pytest.raises(ValueError, match="takes labels"):
        c.inc("/a")
    with pytest.raises(ValueError, match="already registered"):
        r.counter("demo_requests_total", "again")


def test_server_metrics_names_are_valid() -> None:
    from yomiage.server.metrics import ServerMetrics

    text = ServerMetrics(in_flight=lambda: 0, queued=lambda: 0, version="1").render()
    for line in text.splitlines():
        if line.startswith("# TYPE"):
            name = line.split()[2]
            assert re.fullmatch(r"yomiage_[a-z_]+", name), name
            if line.endswith(" counter"):
                assert name.endswith("_total"), name


# -- admission gate -------------------------------------------------------------------


def test_gate_admits_queues_and_refuses() -> None:
    from yomiage.server.limits import AdmissionGate, Rejected

    async def scenario() -> None:
        gate = AdmissionGate(limit=1, max_queue=1, timeout=5)
        first = await gate.acquire()
        waiting = asyncio.ensure_future(gate.acquire())
        await asyncio.sleep(0.01)
        assert (gate.active, gate.waiting) == (1, 1)
        with pytest.raises(Rejected) as caught:
            await gate.acquire()
        assert caught.value.reason == "queue_full"
        first.release()
        first.release()  # idempotent
        second = await waiting
        assert (gate.active, gate.waiting) == (1, 0)
        second.release()
        assert gate.active == 0

    asyncio.run(scenario())


def test_gate_wait_times_out() -> None:
    from yomiage.server.limits import AdmissionGate, Rejected

    async def scenario() -> None:
        gate = AdmissionGate(limit=1, max_queue=4, timeout=0.05)
        held = await gate.acquire()
        with pytest.raises(Rejected) as caught:
            await gate.acquire()
        assert caught.value.reason == "queue_timeout"
        assert (gate.active, gate.waiting) == (1, 0)
        held.release()
        async with await gate.acquire():
            assert gate.active == 1
        assert gate.active == 0

    asyncio.run(scenario())


# -- formats --------------------------------------------------------------------------


def test_output_formats_and_rates() -> None:
    from yomiage.server.encoding import output_format
    from yomiage.server.errors import APIError

    opus = output_format("opus", 44100, sample_rate=None, stream=True, param="f")
    assert (opus.sample_rate, opus.stream, opus.media_type) == (48000, False, "audio/opus")
    wav = output_format("WAV", 44100, sample_rate=None, stream=True, param="f")
    assert (wav.name, wav.sample_rate, wav.stream, wav.resampled) == ("wav", 44100, True, False)
    assert output_format("mp3", 44100, sample_rate=16000, stream=True, param="f").resampled
    for name, rate in (("aac", None), ("wav", 4000), ("opus", 44100), ("mp3", 20000)):
        with pytest.raises(APIError) as caught:
            output_format(name, 44100, sample_rate=rate, stream=True, param="f")
        assert caught.value.status == 400


# -- subtitles ------------------------------------------------------------------------


def _sentence(*words: tuple[str, float, float]) -> Timings:
    return Timings((), tuple(Span(*w) for w in words))


def test_cues_per_sentence() -> None:
    sentences = [
        _sentence(("こんにちは", 0.2, 0.9), (".", 0.95, 1.0)),
        _sentence(),  # nothing spoken: no cue
        _sentence(("今日", 3661.5, 3662.25)),
    ]
    cues = sentence_cues(sentences, ["こんにちは。", "", "今日 --> 明日"])
    assert [(c.text, c.start, c.end) for c in cues] == [
        ("こんにちは。", 0.2, 1.0),
        ("今日 --> 明日", 3661.5, 3662.25),
    ]
    assert to_srt(cues) == (
        "1\n00:00:00,200 --> 00:00:01,000\nこんにちは。\n\n"
        "2\n01:01:01,500 --> 01:01:02,250\n今日 → 明日\n"
    )
    assert to_vtt(cues).startswith("WEBVTT\n\n00:00:00.200 --> 00:00:01.000\nこんにちは。\n")
    # Without one text per sentence, a cue shows the words as read.
    assert sentence_cues(sentences, None)[0].text == "こんにちは."
