"""Text handed over as bytes (a file, stdin, a line of a corpus): decoded strictly.

UTF-8 is the default, with or without a byte order mark; any other encoding is
named by the caller (``--encoding cp932`` on the command line). Bytes that are
not text in that encoding are refused with a message that says where, and that
names the encoding they look like (Shift_JIS, EUC-JP, UTF-16) and the flag
that reads them: Aozora Bunko's books are Shift_JIS, and stdin read with
``surrogateescape`` once turned such a book into a second of noise, exit
status 0. Nothing here lets an undecodable byte through.

Every command that reads text (``generate``, ``g2p``, ``batch``) decodes it
here, so they accept and refuse the same bytes with the same words.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from yomiage.errors import YomiageError

DEFAULT_ENCODING = "utf-8"
# The most characters one audio file is made from: about 8 hours of speech at the
# default speed (a WAV file holds at most 13.5 h at 44.1 kHz). ``yomiage batch``
# holds an item to it, ``yomiage generate`` a file; longer texts go in parts.
MAX_TEXT_CHARS = 200_000
BYTES_PER_CHAR = 4  # the most bytes one character takes in UTF-8, UTF-16 or UTF-32
_BOM = "\ufeff"
_SAMPLE_BYTES = 1 << 16  # how much of the bytes a guess looks at
_PLAUSIBLE = 0.8  # the least share of ordinary Japanese-text characters a guess needs
# Byte order marks, longest first (UTF-32's begins with UTF-16's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)
# Encodings tried on bytes without a byte order mark, and how a message names them.
# A tie goes to the earlier: UTF-16 decodes nearly any even run of bytes, so it comes last.
_CANDIDATES = (
    ("utf-8", "UTF-8"),
    ("cp932", "Shift_JIS (cp932)"),
    ("euc_jp", "EUC-JP"),
    ("utf-16-le", "UTF-16LE"),
    ("utf-16-be", "UTF-16BE"),
)
_LABELS = {"utf-8": "UTF-8", "cp932": "Shift_JIS (cp932)", "shift_jis": "Shift_JIS",
           "euc_jp": "EUC-JP"}  # fmt: skip
ENCODING_HELP = (
    "the text's encoding (default utf-8, with or without a BOM): cp932 for "
    "Shift_JIS (Aozora Bunko, Windows), euc_jp, utf-16, or any Python codec name"
)


class TextInputError(YomiageError, ValueError):
    """Bytes that are not text in the encoding asked for; the message names where, the
    encoding they look like, and the flag that reads them."""


class TextTooLongError(TextInputError):
    """More characters than a caller takes (``limit``); callers say what to do instead."""

    def __init__(self, where: str, limit: int) -> None:
        super().__init__(f"{where} has more than {limit:,} characters")
        self.where = where
        self.limit = limit


@dataclass(frozen=True)
class Guess:
    """An encoding bytes look like: the codec name to give and how people call it."""

    codec: str
    label: str
    why: str = ""  # e.g. "it starts with a UTF-16 byte order mark"


def checked_encoding(name: str) -> str:
    """``name`` if Python has a text codec by that name (for ``--encoding``), else
    ValueError naming a few that are meant."""
    try:
        info = codecs.lookup(name)
    except (LookupError, TypeError):
        info = None
    if info is None or not getattr(info, "_is_text_encoding", True):
        raise ValueError(
            f"unknown text encoding {name!r}; e.g. utf-8, cp932 (Shift_JIS), euc_jp, utf-16"
        )
    return name


def decode(data: bytes, encoding: str | None = None, *, where: str) -> str:
    """``data`` as text in ``encoding`` (default UTF-8, a byte order mark allowed);
    TextInputError naming ``where``, the first bad byte and the likely encoding."""
    codec = _codec(encoding)
    try:
        text = data.decode(_reader(codec))
    except UnicodeDecodeError as exc:
        if _try_decode(data, _reader(codec), final=False) is not None:  # all but the end
            raise TextInputError(
                f"{where}: ends in the middle of a {_label(codec)} character, after "
                f"{len(data):,} bytes; was it cut short?"
            ) from None
        raise _not_text(data, codec, f"{exc.reason} at byte {exc.start}", where) from None
    if "\x00" in text:  # UTF-16 of ASCII text decodes as UTF-8, a NUL every other byte
        raise _not_text(data, codec, "it holds NUL characters", where)
    return text.removeprefix(_BOM)


def read_file(
    path: Path | str, encoding: str | None = None, *, max_chars: int | None = None
) -> str:
    """The text of the file ``path``; a file too large to hold ``max_chars`` characters
    is refused (TextTooLongError) before it is read, and one that holds more after."""
    path = Path(path)
    if max_chars is not None and path.stat().st_size > _max_bytes(max_chars):
        raise TextTooLongError(str(path), max_chars)
    text = decode(path.read_bytes(), encoding, where=str(path))
    _check_length(text, str(path), max_chars)
    return text


def read_stream(
    stream: BinaryIO,
    encoding: str | None = None,
    *,
    where: str = "stdin",
    max_chars: int | None = None,
) -> str:
    """All of ``stream`` as text; with ``max_chars``, reading stops one byte past what
    that many characters can take (TextTooLongError), so a huge input is never held."""
    if max_chars is None:
        data = stream.read()
    else:
        limit = _max_bytes(max_chars)
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise TextTooLongError(where, max_chars)
    text = decode(data, encoding, where=where)
    _check_length(text, where, max_chars)
    return text


def lines(
    stream: BinaryIO,
    encoding: str | None = None,
    *,
    where: str,
    max_line_bytes: int | None = None,
) -> Iterator[tuple[int, str]]:
    """Each line of ``stream`` (numbered from 1, line end kept) as it arrives, decoded
    on its own: a wrong byte on line 3 of a corpus is named as ``where:3``. An encoding
    whose newline is not the byte 0x0A (UTF-16, UTF-32) is decoded whole first.
    ``max_line_bytes``: a longer line is a TextTooLongError (``where:N``, limit in bytes)
    before it is held."""
    codec = _codec(encoding)
    if "\n".encode(codec) != b"\n":
        text = decode(stream.read(), encoding, where=where)
        for number, line in enumerate(text.splitlines(keepends=True), 1):
            yield number, line
        return
    number = 0
    read = (
        stream.readline
        if max_line_bytes is None
        else functools.partial(stream.readline, max_line_bytes + 1)  # never a 100 MB line
    )
    while raw := read():
        number += 1
        here = f"{where}:{number}"
        if max_line_bytes is not None and len(raw) > max_line_bytes:
            raise TextTooLongError(here, max_line_bytes)
        try:
            line = raw.decode(_reader(codec) if number == 1 else codec)
        except UnicodeDecodeError as exc:
            why = f"{exc.reason} at byte {exc.start} of the line"
            raise _not_text(raw, codec, why, here) from None
        if "\x00" in line:
            raise _not_text(raw, codec, "it holds NUL characters", here)
        yield number, line


def guess(data: bytes) -> Guess | None:
    """The encoding ``data`` most likely is in (a byte order mark says it; otherwise
    the one of UTF-8, Shift_JIS and EUC-JP that decodes it into the most ordinary
    Japanese text), or None when nothing fits well."""
    for bom, codec, label in _BOMS:
        if data.startswith(bom):
            return Guess(codec, label, f"it starts with a {label} byte order mark")
    sample = data[:_SAMPLE_BYTES]
    partial = len(data) > len(sample)
    if sample.count(0) * 4 >= len(sample) > 0:  # UTF-16 without a mark: NUL-heavy
        odd_zeros = sample[1::2].count(0)
        little = odd_zeros * 2 >= sample.count(0)
        codec, label = ("utf-16-le", "UTF-16LE") if little else ("utf-16-be", "UTF-16BE")
        return Guess(codec, label, "every other byte is 0")
    best: tuple[float, str, str] | None = None
    for codec, label in _CANDIDATES:
        text = _try_decode(sample, codec, final=not partial)
        if text is None or not text:
            continue
        score = _ordinary_share(text)
        if best is None or score > best[0]:
            best = (score, codec, label)
    if best is None or best[0] < _PLAUSIBLE:
        return None
    return Guess(best[1], best[2])


def _codec(encoding: str | None) -> str:
    """The codec's own name for ``encoding`` (default UTF-8)."""
    return codecs.lookup(checked_encoding(encoding or DEFAULT_ENCODING)).name


def _reader(codec: str) -> str:
    """What reads the start of a text in ``codec``: UTF-8 past a byte order mark."""
    return "utf-8-sig" if codec == "utf-8" else codec


def _label(codec: str) -> str:
    return _LABELS.get(codec, codec)


def _not_text(data: bytes, codec: str, why: str, where: str) -> TextInputError:
    """The error for bytes that are not ``codec`` text, with the encoding they look like."""
    message = f"{where}: not {_label(codec)} text ({why})"
    likely = guess(data)
    if likely is not None and codecs.lookup(likely.codec).name != codec:
        because = f" ({likely.why})" if likely.why else ""
        message += f"; it looks like {likely.label}{because}: add --encoding {likely.codec}"
    else:
        message += "; name its encoding with --encoding (e.g. cp932 for Shift_JIS, euc_jp)"
    return TextInputError(message)


def _try_decode(data: bytes, codec: str, *, final: bool) -> str | None:
    """``data`` decoded strictly (``final=False``: a character cut at the end is fine)."""
    decoder = codecs.getincrementaldecoder(codec)("strict")
    try:
        return str(decoder.decode(data, final))
    except UnicodeDecodeError:
        return None


def _ordinary_share(text: str) -> float:
    """The share of ``text`` that is what Japanese text is made of: kana, kanji, their
    punctuation, full-width letters, ASCII and whitespace (not half-width katakana or
    rare symbols, what other encodings' bytes decode into)."""
    ordinary = sum(1 for ch in text if _ordinary(ch))
    return ordinary / len(text)


def _ordinary(ch: str) -> bool:
    code = ord(ch)
    return (
        (0x20 <= code < 0x7F)
        or ch in "\t\n\r"
        or 0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xFF01 <= code <= 0xFF5E  # full-width ASCII
    )


def _max_bytes(max_chars: int) -> int:
    return BYTES_PER_CHAR * (max_chars + 1)  # + 1: room for a byte order mark


def _check_length(text: str, where: str, max_chars: int | None) -> None:
    if max_chars is not None and len(text) > max_chars:
        raise TextTooLongError(where, max_chars)
