"""Strings from files, made safe to print to a terminal.

A voice file's name, speakers, styles and licence text are written by whoever
made the file. Printed raw, an ESC or a C1 control starts a terminal escape
sequence (colours, cursor moves, a changed window title, on some terminals
worse), and a bidi override makes the text read other than it is (a licence
line that seems to say the opposite). Each such character is shown instead as
a visible Python-style escape (``\\x1b``, ``\\x9b``, ``\\u202e``), so what is
printed is what the file holds, and nothing else.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

# Bidirectional formatting characters (Unicode TR 9): embeddings, overrides,
# isolates and marks. Not controls (category Cf), yet they reorder what follows.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe(char: str, keep: str) -> bool:
    if char in keep:
        return False
    # Cc: C0, DEL and C1 controls; Cs: lone surrogates (cannot be encoded);
    # Zl/Zp: line and paragraph separators (a line break the reader did not write).
    return char in BIDI or unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp")


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with every control, bidi and separator character replaced by a visible
    escape; characters in ``keep`` (say ``"\\t"`` in a licence line) pass unchanged."""
    if text.isprintable() and not any(c in BIDI for c in text):
        return text  # the common case: nothing to replace
    return "".join(_escape(c) if _unsafe(c, keep) else c for c in text)


def printable_json(value: Any) -> str:
    """``value`` as JSON (non-ASCII kept readable) where no character a terminal acts on
    appears raw: they are written as ``\\uXXXX`` escapes, which is the same JSON value."""
    text = json.dumps(value, ensure_ascii=False)
    return "".join(f"\\u{ord(c):04x}" if _unsafe(c, "") else c for c in text)
