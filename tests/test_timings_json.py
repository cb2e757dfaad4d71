"""Phoneme timings without the ``_`` blanks: what lip-sync reads (issue 22, item 15)."""

from __future__ import annotations

import itertools
import json

from yomiage.audio.subtitles import to_json
from yomiage.audio.timings import Span, Timings, merge_blanks

SR = 44100


def _spans(tokens: str, frames: list[int], offset: int = 0, hop: int = 512) -> list[Span]:
    """Spans of ``tokens`` (one character each) lasting ``frames`` frames from sample ``offset``."""
    out, at = [], offset
    for token, n in zip(tokens, frames, strict=True):
        out.append(Span(token, at / SR, (at + n * hop) / SR))
        at += n * hop
    return out


def test_json_timings_have_no_blanks_and_stay_contiguous_and_sample_exact() -> None:
    """Every other phoneme of the JSON was a ``_`` blank that lip-sync users had to filter."""
    first = _spans("__a_m_e_._", [1, 2, 5, 1, 4, 0, 6, 2, 3, 1])
    second = _spans("_k_a_", [2, 3, 1, 4, 2], offset=40_000)  # after a pause
    timings = Timings(tuple(first + second))
    record = json.loads(to_json([], timings, 2.0))
    phonemes = record["phonemes"]
    assert [p["text"] for p in phonemes] == ["a", "m", "e", ".", "k", "a"]
    # Leading pads join the first phoneme; each later blank joins the one before it.
    assert phonemes[0]["start"] == round(first[0].start, 6)
    assert phonemes[0]["end"] == round(first[3].end, 6)
    assert phonemes[3]["end"] == round(first[-1].end, 6)  # the sentence ends where it did
    assert phonemes[4]["start"] == round(second[0].start, 6)  # the pause is still a gap
    assert phonemes[-1]["end"] == round(second[-1].end, 6)
    merged = merge_blanks(first + second)
    for before, after in itertools.pairwise(merged[:4]):
        assert before.end == after.start  # contiguous within the sentence
    bounds = {s.start for s in first + second} | {s.end for s in first + second}
    assert all(s.start in bounds and s.end in bounds for s in merged)  # no new boundary
    # The Python API keeps every token; without_blanks() is the JSON's view of it.
    assert timings.without_blanks().phonemes == merged
    assert [p["text"] for p in json.loads(to_json([], timings, 2.0, blanks=True))["phonemes"]] == [
        s.text for s in timings.phonemes
    ]
