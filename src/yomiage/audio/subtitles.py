"""Timings as files: one subtitle cue per sentence (SRT, WebVTT) or everything as JSON.

Cue times come from the word timings, which are exact to the sample; a cue
runs from the first word of its sentence to the last, so the pause between
sentences shows no text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from yomiage.audio.timings import Span, Timings

__all__ = ["TIMINGS_FORMATS", "sentence_cues", "to_json", "to_srt", "to_vtt", "write_timings"]

TIMINGS_FORMATS = {".json": "json", ".srt": "srt", ".vtt": "vtt"}


def sentence_cues(sentences: Sequence[Timings], texts: Sequence[str] | None = None) -> list[Span]:
    """One span per sentence that has words.

    ``texts`` are the sentences as the user wrote them; used when there is one
    per sentence, otherwise a cue shows the words as read (normalized text).
    """
    use_texts = texts is not None and len(texts) == len(sentences)
    cues = []
    for index, timings in enumerate(sentences):
        words = [w for w in timings.words if w.end > w.start]
        if not words:
            continue
        text = texts[index] if use_texts and texts is not None else "".join(w.text for w in words)
        cues.append(Span(text.strip(), words[0].start, words[-1].end))
    return cues


def _clock(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def _one_line(text: str) -> str:
    # A blank line ends a cue in both formats; "-->" would read as a timing line.
    return " ".join(text.split()).replace("-->", "→")


def to_srt(cues: Sequence[Span]) -> str:
    blocks = [
        f"{i}\n{_clock(c.start, ',')} --> {_clock(c.end, ',')}\n{_one_line(c.text)}\n"
        for i, c in enumerate(cues, 1)
    ]
    return "\n".join(blocks)


def to_vtt(cues: Sequence[Span]) -> str:
    blocks = [
        f"{_clock(c.start, '.')} --> {_clock(c.end, '.')}\n{_one_line(c.text)}\n" for c in cues
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)


def to_json(
    cues: Sequence[Span], timings: Timings, duration: float, *, blanks: bool = False
) -> str:
    """Sentences, words and phonemes, times in seconds. The phonemes leave out the
    ``_`` blanks and pads, their time merged into a neighbour
    (:func:`~yomiage.audio.timings.merge_blanks`); ``blanks=True`` keeps every
    token the model read, blanks included."""
    if not blanks:
        timings = timings.without_blanks()

    def spans(items: Sequence[Span]) -> list[dict[str, object]]:
        return [{"text": s.text, "start": round(s.start, 6), "end": round(s.end, 6)} for s in items]

    record = {
        "duration": round(duration, 6),
        "sentences": spans(cues),
        "words": spans(timings.words),
        "phonemes": spans(timings.phonemes),
    }
    return json.dumps(record, ensure_ascii=False, indent=1) + "\n"


def write_timings(
    path: Path | str,
    sentences: Sequence[Timings],
    duration: float,
    texts: Sequence[str] | None = None,
) -> Path:
    """Write the timings in the format named by the suffix (.json, .srt or .vtt)."""
    path = Path(path)
    fmt = TIMINGS_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"timings go to a .json, .srt or .vtt file, not {str(path)!r}")
    cues = sentence_cues(sentences, texts)
    if fmt == "srt":
        text = to_srt(cues)
    elif fmt == "vtt":
        text = to_vtt(cues)
    else:
        text = to_json(cues, Timings.join(list(sentences)), duration)
    path.write_text(text, encoding="utf-8")
    return path
