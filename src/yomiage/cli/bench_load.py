"""Whether other work on the machine disturbed ``yomiage bench``'s timings.

A timing taken while other processes want the same cores measures the share
the scheduler gave bench, not the configuration: on a 2-core machine at load 8
the newcomer's bench saw one thread beat two by 21%. Bench cannot stop other
work, but it can read the load average before and after each configuration and
say so, so that nobody acts on numbers the machine made up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Load that bench's own threads cannot explain, beyond their count: the 1-minute
# average lags and rounds, so a configuration's own threads may read a little over.
SLACK = 1.0


def load_average() -> float | None:
    """The 1-minute load average, None where the system has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class LoadReading:
    """The 1-minute load average as one configuration started and as it ended."""

    before: float | None
    after: float | None

    @property
    def peak(self) -> float | None:
        return None if self.before is None or self.after is None else max(self.before, self.after)

    def over(self, cores: int) -> bool:
        """Whether the load exceeded the ``cores`` (logical CPUs): something waited for one."""
        return self.peak is not None and self.peak > cores

    def moved(self, own_threads: int) -> bool:
        """Whether the load changed by more than bench's own threads (``own_threads``, plus
        :data:`SLACK`) explain: other work started or ended while this configuration ran."""
        if self.before is None or self.after is None:
            return False
        return abs(self.after - self.before) > own_threads + SLACK

    def disturbed(self, cores: int, own_threads: int) -> str | None:
        """Why this configuration's timings cannot be trusted, None if nothing says so."""
        if self.over(cores):
            return f"load {self.peak:.1f} on {cores} logical cores"
        if self.moved(own_threads):
            return f"load went from {self.before:.1f} to {self.after:.1f} while it ran"
        return None


def own_threads(threads: list[int | None], cores: int) -> list[int]:
    """For configurations run one after another on ``threads`` (None: yomiage's default),
    the most threads bench itself ran while each one's reading could change: its own and
    the previous process's, whose load the 1-minute average still holds (the first
    follows the voice's first load, on the default threads: up to one per logical core)."""
    out, previous = [], cores
    for count in threads:
        count = count or cores
        out.append(max(count, previous))
        previous = count
    return out


def busy_warning(readings: list[tuple[str, LoadReading, int]], cores: int) -> str | None:
    """One line for the configurations whose timings other work disturbed, given as
    ``(name, reading, own_threads)``: ``own_threads`` the most threads bench itself ran
    while the reading could change (this configuration's and the one before it, whose
    load the 1-minute average still holds); None when none was disturbed."""
    over = [(name, r) for name, r, _ in readings if r.over(cores)]
    moved = [(name, r) for name, r, own in readings if not r.over(cores) and r.moved(own)]
    if not over and not moved:
        return None

    def during(found: list[tuple[str, LoadReading]]) -> str:
        if len(found) == len(readings) > 1:
            return "every configuration"
        return "; ".join(name for name, _ in found)

    parts = []
    if over:
        peak = max(r.peak or 0.0 for _, r in over)
        parts.append(f"load up to {peak:.1f} on {cores} logical cores during {during(over)}")
    if moved:
        changes = "; ".join(f"{name}, {r.before:.1f} to {r.after:.1f}" for name, r in moved)
        parts.append(f"the load changed by more than bench's own threads ({changes})")
    return (
        f"the machine was busy: {', and '.join(parts)}; timings are not reliable, "
        "run again when idle (`uptime` shows the load)"
    )
