"""What the CPU offers this process."""

from __future__ import annotations

import os
from pathlib import Path

# More threads must be at least this much faster to be taken (by the plan, and in
# ``yomiage bench``'s advice): a hardware thread that adds less is better left to the
# rest of the machine, and is within the noise.
THREADS_WORTH = 0.05


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


def logical_cpus() -> int:
    """Logical CPUs available to this process (each SMT sibling counted)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def thread_choices() -> tuple[int, ...]:
    """The thread counts a plan measures when none is asked for: one per physical core,
    and one per logical CPU where SMT gives more. Whether a core's second hardware
    thread speeds the convolutions up or only contends for the same units depends on
    the CPU (and on what a cloud VM calls a vCPU), so it is measured, not assumed."""
    return tuple(sorted({physical_cores(), logical_cpus()}))


def cpu_flags() -> frozenset[str] | None:
    """The first CPU's feature flags from Linux's ``/proc/cpuinfo`` (``flags``, or an Arm
    board's ``Features``); None where there is no such file."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


# Where OpenVINO's CPU plugin computes bfloat16 natively (and so defaults to it).
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
