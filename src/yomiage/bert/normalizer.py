"""Text to characters exactly as the Rust ``tokenizers`` crate's pipeline does it.

SBV2's character tokenizer (see :mod:`yomiage.bert.tokenizer`) runs, per piece
of text between special tokens: ``BertNormalizer`` with only ``clean_text`` on,
then NFKC, then ``WhitespaceSplit``, then one piece per code point. Each step is
reproduced here with the crate's own character classes, which differ from
Python's where it matters for the ids:

* ``clean_text`` drops NUL, U+FFFD and "other" characters as the
  ``unicode_categories`` 0.1.1 crate defines them: Cc, Cf from its Unicode 8.0
  table, Co; and *not* Cn or Cs. Tab, LF and CR are kept and become spaces, as
  does every Rust ``char::is_whitespace`` character that was not dropped first
  (U+000B, U+000C and U+0085 are Cc, so they vanish instead, which lets
  ``e\\x0b\\u0301`` compose to ``é`` while ``e\\u2028\\u0301`` does not).
* NFKC uses the crate's Unicode 9.0 tables: a later character is left as it
  is and composes with nothing (:data:`yomiage.bert.unicode9.ASSIGNED_9_0`).
* ``WhitespaceSplit`` drops Rust's ``char::is_whitespace`` (the Unicode
  White_Space property), which is not Python's ``str.isspace``: U+001C-U+001F
  are not whitespace, U+180E, U+200B and U+FEFF neither.

``tests/test_bert_tokenizer_equivalence.py`` compares the result with the real
library on every code point and on random text.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from yomiage.bert.unicode9 import ASSIGNED_9_0

__all__ = ["WHITESPACE", "characters", "clean_text", "nfkc"]

# Rust's char::is_whitespace: the Unicode White_Space property (stable since 6.3).
_WHITESPACE_RANGES = (
    (0x0009, 0x000D),
    (0x0020, 0x0020),
    (0x0085, 0x0085),
    (0x00A0, 0x00A0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)
#: The characters ``WhitespaceSplit`` drops.
WHITESPACE: frozenset[str] = frozenset(
    chr(c) for first, last in _WHITESPACE_RANGES for c in range(first, last + 1)
)

# What clean_text drops: NUL, U+FFFD, and unicode_categories 0.1.1's is_other()
# (Cc | Cf | Co) except tab, LF and CR. Its Cf table is Unicode 8.0's, so later
# format characters (U+08E2, U+110CD, U+13430...) stay.
_DROPPED_RANGES = (
    (0x0000, 0x0008),
    (0x000B, 0x000C),
    (0x000E, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xE000, 0xF8FF),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0xFFFD, 0xFFFD),
    (0x110BD, 0x110BD),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
    (0xF0000, 0xFFFFD),
    (0x100000, 0x10FFFD),
)


def _char_class(ranges: tuple[tuple[int, int], ...], *, negate: bool = False) -> str:
    items = "".join(
        f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}"
        for first, last in ranges
    )
    return f"[{'^' if negate else ''}{items}]"


def _assigned_9_0() -> tuple[tuple[int, int], ...]:
    ranges = []
    for item in ASSIGNED_9_0.split():
        first, _, last = item.partition("-")
        ranges.append((int(first, 16), int(last or first, 16)))
    return tuple(ranges)


_DROPPED = re.compile(_char_class(_DROPPED_RANGES) + "+")
# After the drops, the whitespace left is tab, LF, CR and the non-control spaces.
_SPACES = re.compile(_char_class(_WHITESPACE_RANGES))


@functools.cache
def _after_9_0() -> re.Pattern[str]:
    """One character the Unicode 9.0 tables do not know (captured: re.split keeps it).

    Compiled on first use (several milliseconds), not when yomiage is imported."""
    return re.compile(f"({_char_class(_assigned_9_0(), negate=True)})")


def clean_text(text: str) -> str:
    """``BertNormalizer(clean_text=True)``: controls dropped, whitespace made a plain space."""
    return _SPACES.sub(" ", _DROPPED.sub("", text))


def nfkc(text: str) -> str:
    """NFKC with the ``tokenizers`` crate's Unicode 9.0 tables.

    A character assigned later is a starter without decomposition there, so it
    splits the text into runs that normalise apart; Python's tables, newer but
    stable for the characters 9.0 had, normalise each run.
    """
    after_9_0 = _after_9_0()
    if after_9_0.search(text) is None:
        return unicodedata.normalize("NFKC", text)
    parts = after_9_0.split(text)
    # re.split with one group: even items are runs, odd items the separators.
    parts[::2] = [unicodedata.normalize("NFKC", part) for part in parts[::2]]
    return "".join(parts)


def characters(text: str, *, clean: bool = True) -> list[str]:
    """The pieces of ``text`` before the vocabulary lookup: one per code point.

    ``clean`` is ``BertNormalizer(clean_text=...)``; ``False`` is a tokenizer
    whose normalizer is NFKC alone.
    """
    if clean:
        text = clean_text(text)
    return [c for c in nfkc(text) if c not in WHITESPACE]
