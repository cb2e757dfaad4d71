"""What a batch job reads: one item per text file, or one per line of a JSONL file.

A text file is one item named after its stem (``ch01.txt`` → ``ch01``); a
``.jsonl`` file holds ``{"id", "text", "voice"?, "options"?}`` objects, one per
line. Every item is checked before any audio is made, so a typo on line 29
of a corpus is reported at once with its file and line, not after hours.
Files are decoded by :mod:`yomiage.text_input` (UTF-8 unless told otherwise):
a Shift_JIS chapter is refused naming its encoding, never read as noise.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yomiage import text_input
from yomiage.errors import OptionError, YomiageError
from yomiage.options import SynthesisOptions

# fullmatch: "$" would also accept an id ending in a newline ("abc\n").
_SAFE_ID = re.compile(r"[\w][\w.\-]{0,127}")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
# The most characters one item may have: about 8 hours of speech at the default
# speed (a WAV file holds at most 13.5 h at 44.1 kHz), as for any one audio file.
# A worker holds an item's text and reads its sentences as it speaks them; its
# audio goes to disk as it is made. Longer texts are split into several items
# (chapters); checked before any audio is made.
MAX_ITEM_CHARS = text_input.MAX_TEXT_CHARS
# A line of JSONL read at most this far: the text's characters, each up to six
# bytes as a JSON escape, and room for the other fields.
_MAX_LINE_BYTES = 6 * MAX_ITEM_CHARS + 65536


class BatchInputError(YomiageError, ValueError):
    """An input file or item that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class BatchItem:
    """One audio file to make: ``id`` names it, ``options`` are SynthesisOptions fields
    (over the job's own), ``voice`` None means the job's first voice."""

    id: str
    text: str
    voice: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def digest(self, fmt: str, job_options: Mapping[str, Any]) -> str:
        """What the output depends on: an output made from another text, voice or
        options is not this item's, and is made again."""
        key = json.dumps(
            [self.text, self.voice, {**job_options, **self.options}, fmt],
            ensure_ascii=False, sort_keys=True,
        )  # fmt: skip
        return hashlib.sha256(key.encode()).hexdigest()


def read_items(paths: Iterable[Path | str], encoding: str | None = None) -> list[BatchItem]:
    """The items of every input, in order; BatchInputError for the first bad one.
    ``encoding``: the inputs' (default UTF-8, a byte order mark allowed)."""
    items: list[BatchItem] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            raise BatchInputError(f"{path}: no such file")
        if path.suffix.lower() in JSONL_SUFFIXES:
            items.extend(_jsonl_items(path, encoding))
        else:
            text = _read_text(path, encoding)
            items.append(_checked(path.stem, text, None, {}, f"{path}"))
    seen: dict[str, int] = {}
    for n, item in enumerate(items):
        if item.id in seen:
            raise BatchInputError(
                f"two items are called {item.id!r} (items {seen[item.id] + 1} and {n + 1}); "
                "their audio would overwrite each other"
            )
        seen[item.id] = n
    if not items:
        raise BatchInputError("the inputs hold no items")
    return items


def _read_text(path: Path, encoding: str | None) -> str:
    try:
        return text_input.read_file(path, encoding, max_chars=MAX_ITEM_CHARS)
    except text_input.TextTooLongError:
        raise _too_long_error(f"{path}", path.stem) from None
    except text_input.TextInputError as exc:
        raise BatchInputError(str(exc)) from None


def _too_long(where: str, item_id: object, characters: int) -> None:
    if characters > MAX_ITEM_CHARS:
        raise _too_long_error(where, item_id)


def _too_long_error(where: str, item_id: object) -> BatchInputError:
    return BatchInputError(
        f"{where}: item {item_id!r} has more than {MAX_ITEM_CHARS:,} characters, the most "
        "one item may have (about 8 hours of speech); split it into several items"
    )


def _lines(path: Path, encoding: str | None) -> Iterable[tuple[int, str]]:
    """Each line of ``path``, read no further than :data:`_MAX_LINE_BYTES` (a line of
    100 MB is refused without being held)."""
    with open(path, "rb") as f:
        try:
            yield from text_input.lines(
                f, encoding, where=str(path), max_line_bytes=_MAX_LINE_BYTES
            )
        except text_input.TextTooLongError as exc:
            raise BatchInputError(
                f"{exc.where}: the line is longer than {_MAX_LINE_BYTES:,} bytes; an item may "
                f"have at most {MAX_ITEM_CHARS:,} characters (about 8 hours of speech): "
                "split it into several items"
            ) from None
        except text_input.TextInputError as exc:
            raise BatchInputError(str(exc)) from None


def _jsonl_items(path: Path, encoding: str | None) -> Iterable[BatchItem]:
    for number, line in _lines(path, encoding):
        where = f"{path}:{number}"
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise BatchInputError(f"{where}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise BatchInputError(f"{where}: each line must be a JSON object")
        unknown = set(record) - {"id", "text", "voice", "options"}
        if unknown:
            raise BatchInputError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        yield _checked(
            record.get("id"), record.get("text"), record.get("voice"),
            record.get("options", {}), where,
        )  # fmt: skip


def _checked(item_id: Any, text: Any, voice: Any, options: Any, where: str) -> BatchItem:
    if not isinstance(item_id, str) or not _SAFE_ID.fullmatch(item_id):
        raise BatchInputError(
            f"{where}: id {item_id!r} must be 1-128 letters, digits, '_', '-' or '.' "
            "(it names the output file)"
        )
    if not isinstance(text, str) or not text.strip():
        raise BatchInputError(f"{where}: item {item_id!r} has no text")
    _too_long(where, item_id, len(text))
    if voice is not None and not isinstance(voice, str):
        raise BatchInputError(f"{where}: voice must be a name")
    if not isinstance(options, dict):
        raise BatchInputError(f"{where}: options must be an object of synthesis options")
    try:
        SynthesisOptions.from_fields(options)
    except (OptionError, TypeError) as exc:
        raise BatchInputError(f"{where}: {exc}") from None
    return BatchItem(item_id, text, voice, dict(options))
