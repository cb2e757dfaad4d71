"""The store folder's own files beside the voices, and what a cut-off change leaves there.

New bytes arrive in a hidden partial file; a voice being replaced keeps its old
file under a second name (a hard link) until the change ends, and one being
uninstalled is moved aside first. A server that dies mid-change leaves these
behind: the next :class:`~yomiage.aivmx.store.ModelStore` removes stale partials and
puts back the old file of a replacement it did not finish, once they are older than
:data:`STALE_PARTIAL_S` (another process may be in the middle of one).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from contextlib import suppress
from pathlib import Path

from yomiage.aivmx.upload import ModelStoreError

SUFFIX = ".aivmx"
PARTIAL_PREFIX, PARTIAL_SUFFIX = ".upload-", ".partial"
REPLACED_PREFIX = ".replaced-"  # the old file of a voice being replaced, until the change ends
REMOVED = ".removed"  # ... and of one being uninstalled
STALE_PARTIAL_S = 3600.0  # a partial untouched this long was left by a server that died

log = logging.getLogger(__name__)


def keep_aside(target: Path) -> Path | None:
    """A second name for the file at ``target`` (None if there is none), so that it can
    be put back whatever happens to ``target``. A hard link: no copy of a big file."""
    if not target.exists():
        return None
    kept = target.with_name(f"{REPLACED_PREFIX}{target.name}")
    try:
        kept.unlink(missing_ok=True)
        try:
            os.link(target, kept)
        except OSError:  # a file system without hard links
            shutil.copy2(target, kept)
    except OSError as exc:
        kept.unlink(missing_ok=True)
        raise ModelStoreError(
            f"cannot keep {target.name} aside while it is replaced: {exc.strerror or exc}"
        ) from exc
    return kept


def put_back(target: Path, kept: Path | None) -> None:
    """Undo an install: the kept old file back at ``target``, or the new one removed."""
    try:
        if kept is not None:
            os.replace(kept, target)
        else:
            target.unlink(missing_ok=True)
    except OSError as exc:  # the first error is the one to raise; this one is logged
        log.error("could not undo the install into %s: %s", target, exc)


def restore_cut_replacements(root: Path) -> None:
    """Put back the old file of a replacement that a server did not live to finish (a
    crash while it checked the new one). Only after the partials' stale age, since
    another process may be in the middle of one (the link's ctime is its own)."""
    cutoff = time.time() - STALE_PARTIAL_S
    for gone in root.glob(f"{REPLACED_PREFIX}*{SUFFIX}{REMOVED}"):
        with suppress(OSError):  # an uninstall cut off after the move: it was going
            if gone.stat().st_ctime < cutoff:
                gone.unlink()
    for kept in root.glob(f"{REPLACED_PREFIX}*{SUFFIX}"):
        try:
            if kept.stat().st_ctime < cutoff:
                os.replace(kept, root / kept.name[len(REPLACED_PREFIX) :])
                log.warning("restored %s: a replacement of it was cut off",
                            kept.name[len(REPLACED_PREFIX) :])  # fmt: skip
        except OSError:
            pass


def remove_stale_partials(root: Path) -> None:
    """Remove the partial files of uploads and fetches that a dead server left."""
    cutoff = time.time() - STALE_PARTIAL_S
    for path in root.glob(f"{PARTIAL_PREFIX}*{PARTIAL_SUFFIX}"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass
