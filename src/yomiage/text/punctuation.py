"""SBV2's punctuation mapping and character whitelist (spec §2.2, step 5).

Both the normalizer and the g2p apply this to surfaces, so that the text BERT
reads and the phonemes the model hears use the same seven punctuation marks.
"""

from __future__ import annotations

import re
import unicodedata

_DASHES = "\u02d7\u2010\u2012\u2013\u2014\u2015\u2043\u2212\u23af\u23e4\u2500\u2501\u2e3a\u2e3b"
_QUOTES = '“”"‘’（）()《》【】[]「」'

_REPLACEMENTS: dict[str, str] = {
    "：": ",",
    "；": ",",
    "，": ",",
    "。": ".",
    "！": "!",
    "？": "?",
    "\n": ".",
    "．": ".",
    "…": "...",
    "···": "...",
    "・・・": "...",
    "·": ",",
    "・": ",",
    "、": ",",
    "$": ".",
    **{q: "'" for q in _QUOTES},
    **{d: "-" for d in _DASHES},
}
# Longest keys first, so the three-character ellipses win over "·" and "・".
_REPLACE_RE = re.compile(
    "|".join(re.escape(k) for k in sorted(_REPLACEMENTS, key=len, reverse=True))
)
_KEPT = (
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff"  # katakana
    "\u4e00-\u9fff\u3400-\u4dbf"  # CJK
    "\u3005\u3007"  # 々 〇
    "A-Za-z\uff21-\uff3a\uff41-\uff5a"  # ASCII and full-width letters
    "\u0370-\u03ff\u1f00-\u1fff"  # Greek
    "!?…,.'\\-"
)
_NOT_KEPT_RE = re.compile(f"[^{_KEPT}]+")
# What the two steps drop, found in one: neither kept nor mapped to a kept mark (the
# longer keys are made of one-character keys).
_DROPPED_RE = re.compile(
    f"[^{_KEPT}" + "".join(re.escape(k) for k in _REPLACEMENTS if len(k) == 1) + "]"
)


def replace_punctuation(text: str) -> str:
    """Map punctuation to SBV2's seven marks, then drop every unreadable character."""
    mapped = _REPLACE_RE.sub(lambda m: _REPLACEMENTS[m.group(0)], text)
    return _NOT_KEPT_RE.sub("", mapped)


def unreadable_characters(text: str) -> str:
    """The characters :func:`replace_punctuation` would drop (for logging)."""
    mapped = _REPLACE_RE.sub(lambda m: _REPLACEMENTS[m.group(0)], text)
    return "".join(_NOT_KEPT_RE.findall(mapped))


# Characters dropped without a word: spacing, control and format characters (the
# joiners and variation selectors inside an emoji), combining marks and emoji
# skin tones (modifier symbols), none of which is ever read.
_UNSPOKEN_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Mn", "Me", "Sk"})


def describe_symbol(ch: str) -> str:
    """``★ (U+2605)`` for a message; a character that cannot be shown or written
    (a lone surrogate, a control) by its code point alone, so a log line or an
    error that quotes it can still be encoded as UTF-8."""
    code = f"U+{ord(ch):04X}"
    if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF:
        return f"{ch} ({code})"
    return code


def skipped_symbols(text: str) -> list[str]:
    """The characters :func:`replace_punctuation` would drop that a reader could miss
    (emoji, ★, #), each once, in order; spaces and the parts of an emoji sequence that
    are not emoji themselves are not listed."""
    dropped = _DROPPED_RE.findall(text)
    if not dropped:
        return []
    return list(
        dict.fromkeys(ch for ch in dropped if unicodedata.category(ch) not in _UNSPOKEN_CATEGORIES)
    )
