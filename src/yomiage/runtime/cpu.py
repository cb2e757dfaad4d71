"""What the CPU offers this process."""

from __future__ import annotations

import os
from pathlib import Path


def physical_cores() -> int:
    """Physical cores available to this process (SMT siblings counted once)."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return max(1, (os.cpu_count() or 2) // 2)
    cores = set()
    for cpu in cpus:
        base = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(((base / "physical_package_id").read_text(), (base / "core_id").read_text()))
        except OSError:
            cores.add((str(cpu), ""))
    return max(1, len(cores))
