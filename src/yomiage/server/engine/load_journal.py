"""Which installed voice a worker process died loading, so that the next one skips it.

A voice file that crashes the engine natively (a segfault in a graph library, no
Python error to catch) takes its worker process with it. The command line's voices
are the operator's explicit choice, but an installed voice is only a file in the
models folder, and every worker start loads the installed voices again: without
this record one bad file kept ``yomiage serve`` from starting at all, and a worker
restarted after an unrelated crash died on it again and again.

The journal is a folder that lives for one server run. The worker writes a voice's
path there before loading it and removes it once the load has returned (loaded or
refused); a worker that finds the mark left behind knows its predecessor died on
that voice, records it as crashed, and skips it from then on. Writing is best
effort: a journal that cannot be written never stops a voice from loading.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

from yomiage.atomic import write_atomic
from yomiage.json_file import read_json_file

log = logging.getLogger(__name__)

_LOADING = "loading"  # the path of the voice being loaded, while it is
_CRASHED = "crashed.json"  # the paths of the voices a worker died loading


def died_loading(folder: Path) -> bool:
    """Whether a worker died while loading a voice recorded in ``folder`` (the next
    worker to open the journal will skip that voice)."""
    return (folder / _LOADING).is_file()


class LoadJournal:
    """The journal in ``folder``, opened by a worker as it starts."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._crashed = self._read_crashed()
        left = self._read_loading()
        if left is not None:
            self._crashed.add(left)
            log.error(
                "installed voice %s crashed the synthesis worker while loading; it is skipped "
                "until the server restarts (remove it, or install it again)",
                left,
            )
            self._write(_CRASHED, json.dumps(sorted(self._crashed), ensure_ascii=False))
            (folder / _LOADING).unlink(missing_ok=True)

    def crashed(self, path: Path) -> bool:
        """Whether a worker of this server run died loading ``path``."""
        return str(path) in self._crashed

    @contextlib.contextmanager
    def loading(self, path: Path) -> Iterator[None]:
        """Marks ``path`` as being loaded for the duration of the block."""
        self._write(_LOADING, str(path))
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                (self.folder / _LOADING).unlink(missing_ok=True)

    def _read_loading(self) -> str | None:
        try:
            return (self.folder / _LOADING).read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def _read_crashed(self) -> set[str]:
        try:
            paths = read_json_file(self.folder / _CRASHED)
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as exc:
            log.warning("cannot read the voice load journal in %s: %s", self.folder, exc)
            return set()
        return {str(p) for p in paths} if isinstance(paths, list) else set()

    def _write(self, name: str, text: str) -> None:
        try:
            write_atomic(self.folder / name, text)
        except OSError as exc:
            log.warning("cannot write the voice load journal in %s: %s", self.folder, exc)
