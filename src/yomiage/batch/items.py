"""What a batch job reads: one item per text file, or one per line of a JSONL file.

A text file is one item named after its stem (``ch01.txt`` → ``ch01``); a
``.jsonl`` file holds ``{"id", "text", "voice"?, "options"?}`` objects, one per
line. Every item is checked before any audio is made, so a typo on line 29
of a corpus is reported at once with its file and line, not after hours.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yomiage.errors import OptionError, YomiageError
from yomiage.options import SynthesisOptions

# fullmatch: "$" would also accept an id ending in a newline ("abc\n").
_SAFE_ID = re.compile(r"[\w][\w.\-]{0,127}")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
# The most characters one item may have: about 8 hours of speech at the default
# speed (a WAV file holds at most 13.5 h at 44.1 kHz). A worker holds an item's
# text and its sentences' readings (about 200 bytes a character) while it
# makes the item; its audio goes to disk as it is made. Longer texts are split
# into several items (chapters); checked before any audio is made.
MAX_ITEM_CHARS = 200_000
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


def read_items(paths: Iterable[Path | str]) -> list[BatchItem]:
    """The items of every input, in order; BatchInputError for the first bad one."""
    items: list[BatchItem] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            raise BatchInputError(f"{path}: no such file")
        if path.suffix.lower() in JSONL_SUFFIXES:
            items.extend(_jsonl_items(path))
        else:
            items.append(_checked(path.stem, _read_text(path), None, {}, f"{path}"))
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


def _read_text(path: Path) -> str:
    if path.stat().st_size > 4 * MAX_ITEM_CHARS:  # UTF-8 has at most 4 bytes a character
        _too_long(f"{path}", path.stem, MAX_ITEM_CHARS + 1)
    try:
        return path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        where = f"{exc.reason} at byte {exc.start}"
        raise BatchInputError(f"{path}: not UTF-8 text ({where})") from None


def _too_long(where: str, item_id: object, characters: int) -> None:
    if characters > MAX_ITEM_CHARS:
        raise BatchInputError(
            f"{where}: item {item_id!r} has more than {MAX_ITEM_CHARS:,} characters, the most "
            "one item may have (about 8 hours of speech); split it into several items"
        )


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    """Each line of ``path``, read no further than :data:`_MAX_LINE_BYTES` (a line of
    100 MB is refused without being held)."""
    with open(path, "rb") as f:
        number = 0
        while raw := f.readline(_MAX_LINE_BYTES + 1):
            number += 1
            where = f"{path}:{number}"
            if len(raw) > _MAX_LINE_BYTES:
                raise BatchInputError(
                    f"{where}: the line is longer than {_MAX_LINE_BYTES:,} bytes; an item may "
                    f"have at most {MAX_ITEM_CHARS:,} characters (about 8 hours of speech): "
                    "split it into several items"
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BatchInputError(
                    f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start} of the line)"
                ) from None
            yield number, line


def _jsonl_items(path: Path) -> Iterable[BatchItem]:
    for number, line in _lines(path):
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
