"""What ``yomiage batch`` shows while it works and when it ends.

On a terminal: one bar line, redrawn per item and as workers get through
their items (the items in hand with how much of each is read, their audio
counted in, and the time left from the pace of the work so far, so both show
during the first item). Otherwise (a
log file, CI): one line per item, and for a long item a line at most every
:data:`LINE_SECONDS` saying how far it is, so a long job is never silent. The
summary always lists failed items by id with the reason. Events come from
the job's thread and progress from the pool's, so drawing is under a lock.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from yomiage.batch import BatchSummary, Event, ItemProgress

LINE_SECONDS = 30.0  # off a terminal: the most often an item's progress is logged


class BatchProgress:
    def __init__(
        self,
        total: int,
        *,
        quiet: bool,
        tty: bool,
        out: TextIO | None = None,
        line_seconds: float = LINE_SECONDS,
    ) -> None:
        self.total = max(1, total)
        self.quiet = quiet
        self.tty = tty
        self.out = out or sys.stderr
        self.line_seconds = line_seconds
        self._drawn = False
        self._closed = False
        self._lock = threading.Lock()
        self._summary = BatchSummary(items=total)
        self._in_hand: dict[str, ItemProgress] = {}  # items being made, as far as reported
        self._pace_from: tuple[float, float] | None = None  # (time, work) first seen
        self._logged: dict[str, float] = {}  # off a terminal: when each item's line was last

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        with self._lock:
            self._summary = event.summary
            self._in_hand.pop(event.item_id, None)
            self._logged.pop(event.item_id, None)
            done = event.summary.finished
            if self.tty:
                self._draw()
                if event.status in ("retrying", "failed"):
                    self.out.write(f"\n{event.item_id}: {event.status}: {event.detail}\n")
            else:
                detail = f" ({event.detail})" if event.detail else ""
                length = f" ({_length(event.seconds)})" if event.seconds else ""
                status = "already done" if event.status == "skipped" else event.status
                print(f"[{done}/{self.total}] {event.item_id}: {status}{length}{detail}",
                      file=self.out, flush=True)  # fmt: skip

    def item_progress(self, progress: ItemProgress) -> None:
        """A worker got further into an item (called as its chunks are made)."""
        if self.quiet:
            return
        with self._lock:
            if self._closed:
                return
            self._in_hand[progress.item_id] = progress
            if self.tty:
                self._draw()
                return
            now = time.perf_counter()
            last = self._logged.setdefault(progress.item_id, now)  # the first after a wait
            if now - last < self.line_seconds:
                return
            self._logged[progress.item_id] = now
            share = progress.characters / max(1, progress.total)
            print(
                f"[{self._summary.finished}/{self.total}] {progress.item_id}: "
                f"{progress.characters:,} of {progress.total:,} characters read ({share:.0%}), "
                f"{_length(progress.seconds)} of audio so far",
                file=self.out,
                flush=True,
            )

    def _draw(self) -> None:
        summary = self._summary
        done = summary.finished
        partial = sum(p.characters / max(1, p.total) for p in self._in_hand.values())
        width = 30
        filled = min(width, int(width * (done + partial) / self.total))
        audio = summary.audio_seconds + sum(p.seconds for p in self._in_hand.values())
        left = self._time_left(summary.made + len(summary.failed) + partial,
                               self.total - summary.skipped)  # fmt: skip
        eta = f"  ~{_clock(left)} left" if left is not None and done < self.total else ""
        in_hand = [f"{p.item_id} {p.characters / max(1, p.total):.0%}"
                   for p in list(self._in_hand.values())[:2]]  # fmt: skip
        if len(self._in_hand) > 2:
            in_hand.append(f"+{len(self._in_hand) - 2}")
        making = f"  ({', '.join(in_hand)})" if in_hand else ""
        self.out.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} items"
            f"  {_length(audio)} of audio{eta}{making}   "
        )
        self.out.flush()
        self._drawn = True

    def _time_left(self, work: float, of: int) -> float | None:
        """Seconds until ``of`` items are made, at the pace since work was first seen
        (items made, and the share read of those in hand: an estimate from the first
        item on, and no voice loading counted); None until there is a pace."""
        now = time.perf_counter()
        if self._pace_from is None:
            if work > 0:  # the first audio: voices loaded, items skipped, work begun
                self._pace_from = (now, work)
            return None
        since, at_first = self._pace_from
        if work <= at_first or now <= since:
            return None
        return (now - since) / (work - at_first) * max(0.0, of - work)

    def close(self) -> None:
        with self._lock:
            if self._drawn:
                self.out.write("\n")
                self.out.flush()
                self._drawn = False
            self._closed = True  # progress still on its way from the pool draws nothing

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


def _clock(seconds: float) -> str:
    """Time left as a person reads it: 40 s, 12 min, 1.5 h."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _length(seconds: float) -> str:
    """Audio length as a person reads it: 14.5 s, 3.2 min, 1.25 h."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
