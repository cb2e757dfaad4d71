"""What ``yomiage batch`` shows while it works and when it ends.

On a terminal: one bar line, redrawn per item. Otherwise (a log file, CI):
one line per item, so a long job is never silent. The summary always lists
failed items by id with the reason.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from yomiage.batch import BatchSummary, Event


class BatchProgress:
    def __init__(self, total: int, *, quiet: bool, tty: bool, out: TextIO | None = None) -> None:
        self.total = max(1, total)
        self.quiet = quiet
        self.tty = tty
        self.out = out or sys.stderr
        self.started = time.perf_counter()
        self._drawn = False

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        done = event.summary.finished
        if self.tty:
            width = 30
            filled = int(width * done / self.total)
            spent = time.perf_counter() - self.started
            made = event.summary.made
            eta = ""
            if made and done < self.total:
                left = spent / made * (self.total - done)
                eta = f"  ~{left / 60:.0f} min left"
            self.out.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} items"
                f"  {_length(event.summary.audio_seconds)} of audio{eta}   "
            )
            self.out.flush()
            self._drawn = True
            if event.status in ("retrying", "failed"):
                self.out.write(f"\n{event.item_id}: {event.status}: {event.detail}\n")
        else:
            detail = f" ({event.detail})" if event.detail else ""
            length = f" ({_length(event.seconds)})" if event.seconds else ""
            status = "already done" if event.status == "skipped" else event.status
            print(f"[{done}/{self.total}] {event.item_id}: {status}{length}{detail}",
                  file=self.out, flush=True)  # fmt: skip

    def close(self) -> None:
        if self._drawn:
            self.out.write("\n")
            self.out.flush()
            self._drawn = False

    def report(self, summary: BatchSummary) -> None:
        """The summary (failures are printed even when quiet)."""
        if not self.quiet:
            print(
                f"yomiage batch: {summary.items} items: {summary.made} made, "
                f"{summary.skipped} already done, {len(summary.failed)} failed; "
                f"{_length(summary.audio_seconds)} of audio; "
                f"{summary.wall_seconds:.1f} s wall time",
                file=self.out,
            )
        for item_id, why in summary.failed.items():
            print(f"failed: {item_id}: {why}", file=self.out)


def _length(seconds: float) -> str:
    """Audio length as a person reads it: 14.5 s, 3.2 min, 1.25 h."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
