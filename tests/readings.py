"""Compare what the frontend reads with an expected katakana reading.

Our side is the full frontend; the expected katakana is turned into phonemes
by the mora table alone, so a case passes when the phonemes are the same,
whatever the spelling (ヲ and オ are both ``o``). Punctuation and pauses are
ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from yomiage.text import Frontend
from yomiage.text.mora import reading_to_phonemes
from yomiage.text.symbols import PUNCTUATION_SET

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class ReadingCase:
    id: str
    text: str
    readings: tuple[str, ...]
    category: str


def load_cases(name: str) -> list[ReadingCase]:
    raw = json.loads((DATA / name).read_text("utf-8"))
    return [
        ReadingCase(c["id"], c["text"], (c["reading"], *c.get("alternatives", [])), c["category"])
        for c in raw
    ]


def spoken(phones: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p for p in phones if p != "_" and p not in PUNCTUATION_SET)


def ours(frontend: Frontend, text: str) -> tuple[str, ...]:
    return spoken(frontend.g2p(text).phones)


def expected(reading: str) -> tuple[str, ...]:
    """Phonemes of a katakana reading by the mora table alone (no OpenJTalk)."""
    kana = "".join(ch for ch in reading if "\u30a0" <= ch <= "\u30ff")
    return spoken(tuple(reading_to_phonemes(kana, [])))


def matches(frontend: Frontend, case: ReadingCase) -> tuple[bool, str]:
    got = ours(frontend, case.text)
    ok = any(got == expected(r) for r in case.readings)
    return ok, frontend.normalize(case.text)
