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

_SAFE_ID = re.compile(r"^[\w][\w.\-]{0,127}$")
JSONL_SUFFIXES = (".jsonl", ".ndjson")


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
    try:
        return path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        where = f"{exc.reason} at byte {exc.start}"
        raise BatchInputError(f"{path}: not UTF-8 text ({where})") from None


def _jsonl_items(path: Path) -> Iterable[BatchItem]:
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
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
    if not isinstance(item_id, str) or not _SAFE_ID.match(item_id):
        raise BatchInputError(
            f"{where}: id {item_id!r} must be 1-128 letters, digits, '_', '-' or '.' "
            "(it names the output file)"
        )
    if not isinstance(text, str) or not text.strip():
        raise BatchInputError(f"{where}: item {item_id!r} has no text")
    if voice is not None and not isinstance(voice, str):
        raise BatchInputError(f"{where}: voice must be a name")
    if not isinstance(options, dict):
        raise BatchInputError(f"{where}: options must be an object of synthesis options")
    try:
        SynthesisOptions.from_fields(options)
    except (OptionError, TypeError) as exc:
        raise BatchInputError(f"{where}: {exc}") from None
    return BatchItem(item_id, text, voice, dict(options))
