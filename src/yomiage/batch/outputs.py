"""Where a batch job's audio goes, and how a rerun knows what is already made.

Each item's audio is ``OUTDIR/<id>.<format>``, written atomically, then a
small record ``OUTDIR/.yomiage-batch/<id>.<format>.json`` with the digest of what it
was made from and its length. An item counts as done only when both exist
and the digest matches: a file from an interrupted run never exists (the
rename is the last step), and an item whose text or options changed since
is made again.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from pathlib import Path

from yomiage.atomic import write_atomic
from yomiage.batch.items import BatchItem

RECORDS = ".yomiage-batch"


@dataclass(frozen=True)
class Made:
    """An item's audio, made by a worker: encoded bytes and their length in seconds, or
    (``path``) a temporary file in the output folder that holds them (a local worker
    writes it as it makes the audio; :meth:`OutputFolder.write` renames it into place)."""

    id: str
    data: bytes
    seconds: float
    path: str | None = None


class OutputFolder:
    """The job's output folder, held as an absolute path: workers write their temporary
    files into it (``mkstemp`` names them absolutely) and :meth:`write` tells its own
    file from a leftover by comparing paths, so a relative ``-o`` must not reach them."""

    def __init__(self, root: Path | str, fmt: str) -> None:
        self.root = Path(root).resolve()
        self.fmt = fmt
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / RECORDS).mkdir(exist_ok=True)

    def audio_path(self, item_id: str) -> Path:
        return self.root / f"{item_id}.{self.fmt}"

    def _record_path(self, item_id: str) -> Path:
        return self.root / RECORDS / f"{item_id}.{self.fmt}.json"  # one per output file

    def done_seconds(self, item: BatchItem, digest: str) -> float | None:
        """The audio length of ``item`` if its output is complete and current, else None."""
        if not self.audio_path(item.id).is_file():
            return None
        try:
            record = json.loads(self._record_path(item.id).read_text("utf-8"))
            if record["digest"] == digest:
                return float(record["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def write(self, made: Made, digest: str) -> Path:
        """The audio, then its record (both atomic): the record is the mark of done.

        Temporary files an earlier run or attempt left for this item (a job killed
        mid-write leaves one; it never has the final name) are removed first."""
        ours = Path(made.path) if made.path is not None else None
        for final in (self.audio_path(made.id), self._record_path(made.id)):
            for leftover in final.parent.glob(f".{glob.escape(final.name)}.*"):
                if leftover != ours:
                    leftover.unlink(missing_ok=True)
        if ours is not None:
            path = self.audio_path(made.id)
            os.replace(ours, path)  # the worker wrote it in this folder: an atomic rename
        else:
            path = write_atomic(self.audio_path(made.id), made.data)
        record = {"digest": digest, "seconds": made.seconds, "format": self.fmt}
        write_atomic(self._record_path(made.id), json.dumps(record))
        return path
