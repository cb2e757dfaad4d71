"""Iteration marks (々, ゝゞヽヾ) written out where OpenJTalk would read them as a pause.

々 repeats the kanji before it. OpenJTalk knows it only inside the words of its
dictionary (時々, 人々, 佐々木); after any other kanji it reads the mark alone as a
symbol, which the g2p turns into a pause: 担々麺 was タン'メン. Such a 々 is written
as the katakana reading of what it repeats (担タン麺 タンタンメン). Katakana, not the
kanji again: OpenJTalk would segment the doubled kanji anew (湯湯麺 is 湯 + 湯麺
タンメン, where a reader says ユユメン). 々々 repeats the two kanji before it
(部分々々 ブブンブブン). A 々 inside a word OpenJTalk reads, a user word included,
is left to it.

The kana marks repeat the kana before them, ゞ and ヾ voiced (いすゞ いすず); their
reading never depends on a dictionary, so they are written out everywhere.
"""

from __future__ import annotations

import re

from yomiage.text.openjtalk import OpenJTalk
from yomiage.text.unreadable import kanji_readings, piece_reading

_KANJI = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A run of kanji holding a 々 that follows a kanji, and the kana after it: OpenJTalk is
# shown both, as the word may go on in kana (騒々しい ソーゾーシイ; 騒々 alone is 騒 + 々).
_MARKED_RUN_RE = re.compile(
    f"[{_KANJI}々]*[{_KANJI}]々[{_KANJI}々]*(?=([\u3041-\u3096\u30a1-\u30fc]{{0,8}}))"
)
_KANA_MARK_RE = re.compile("(?<=[\u3041-\u3096\u30a1-\u30fa])[ゝゞヽヾ]")
_VOICELESS = "かきくけこさしすせそたちつてとはひふへほカキクケコサシスセソタチツテトハヒフヘホウ"
_VOICED_KANA = "がぎぐげござじずぜぞだぢづでどばびぶべぼガギグゲゴザジズゼゾダヂヅデドバビブベボヴ"
_VOICED = dict(zip(_VOICELESS, _VOICED_KANA, strict=True))
_SYMBOL_READING = "、"  # OpenJTalk's reading of a symbol
_CACHE_LIMIT = 4096


def _kana_mark(match: re.Match[str]) -> str:
    before = match.string[match.start() - 1]
    return _VOICED.get(before, before) if match.group(0) in "ゞヾ" else before


class IterationMarks:
    """Writes out the iteration marks OpenJTalk would read as a pause; safe to share
    between threads (the cache holds plain strings)."""

    def __init__(self, openjtalk: OpenJTalk) -> None:
        self._openjtalk = openjtalk
        self._cache: dict[str, str] = {}

    def apply(self, text: str) -> str:
        """``text`` with each iteration mark OpenJTalk cannot read written out."""
        if "ゝ" in text or "ゞ" in text or "ヽ" in text or "ヾ" in text:
            text = _KANA_MARK_RE.sub(_kana_mark, text)
        if "々" not in text:
            return text
        return _MARKED_RUN_RE.sub(lambda m: self._run(m.group(0), m.group(1)), text)

    def _run(self, run: str, kana_after: str) -> str:
        key = run + "\n" + kana_after
        written = self._cache.get(key)
        if written is None:
            written = self._write_out(run, kana_after)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = written
        return written

    def _write_out(self, run: str, kana_after: str) -> str:
        """``run`` with each 々 that OpenJTalk, reading it with ``kana_after``, reads as a
        symbol written in katakana."""
        shown = run + kana_after
        nodes = self._openjtalk.run_frontend(shown)
        if "".join(str(n["string"]) for n in nodes) != shown:
            return run  # OpenJTalk rewrote the text; nothing to line the marks up with
        out: list[str] = []
        for i, node in enumerate(nodes):
            surface = str(node["string"])
            marks = len(surface)
            if set(surface) != {"々"} or node["pron"] != _SYMBOL_READING or i == 0:
                out.append(surface)
                continue
            written = "".join(out)
            repeated = written[-marks:]
            before = nodes[i - 1]
            reading: str | None = str(before["pron"]).replace("’", "")
            if before["string"] != repeated:
                reading = self._reading(repeated)
            out.append(reading or surface)
        written = "".join(out)
        return written[: len(written) - len(kana_after)]  # the kana after it hold no 々

    def _reading(self, kanji: str) -> str | None:
        """The katakana of ``kanji`` read alone: OpenJTalk's, else each one's Unihan
        reading (None when a kanji has none: the mark stays, as before)."""
        reading = piece_reading(kanji, self._openjtalk)
        if reading is not None:
            return reading
        table = kanji_readings()
        readings = [table.get(ch) for ch in kanji]
        return None if None in readings else "".join(r for r in readings if r)
