"""Whether other work ran beside a measuring process, so that its figures are not this
machine's.

A plan is judged on the figures its measuring processes take, once per machine, and
a measurement taken while another job ran was kept for good (issue 48 saw the first
engine measured come out about twice as slow as the same engine measured later). So
each measuring process is watched: the CPU time the whole machine spent while it ran
(``/proc/stat``), less what this process and its children spent (``getrusage``), is
the other work's. More than :data:`DISTURBED_CORES` of a core on average over the
process's run and its figures are set aside and measured again
(:mod:`yomiage.runtime.plan.measure`); they are never kept.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

# Cores of other work on average, over one measuring process, past which its figures
# are not kept: a quarter of a core is far over an idle machine's daemons and far under
# one busy thread of another job.
DISTURBED_CORES = 0.25


@dataclass(frozen=True)
class CpuClock:
    """CPU time read at one moment: the whole machine's busy time (None where
    ``/proc/stat`` cannot be read), this process's and its waited-for children's."""

    machine_busy_s: float | None
    ours_s: float
    at: float

    @classmethod
    def now(cls) -> CpuClock:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
        return cls(_machine_busy_s(), ours, time.monotonic())

    def other_cores_since(self, earlier: CpuClock) -> float | None:
        """Cores other processes kept busy on average from ``earlier`` to this reading
        (None where it cannot be told)."""
        if self.machine_busy_s is None or earlier.machine_busy_s is None:
            return None
        wall = self.at - earlier.at
        if wall <= 0:
            return None
        others = (self.machine_busy_s - earlier.machine_busy_s) - (self.ours_s - earlier.ours_s)
        return max(0.0, others / wall)


def _machine_busy_s() -> float | None:
    """Seconds all CPUs spent busy since boot (user, nice, system, interrupts and time
    stolen by the hypervisor for another guest), from the first line of ``/proc/stat``."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / ticks
