"""What ``yomiage bench`` prints on stdout: the machine, the table with a key to its
columns, each configuration's plan and the alternatives it was chosen from, then the
notes (a busy machine first) and the recommendation.

Built from what was measured and nothing else, so a test can give it configurations
that ran different plans on a loaded machine and read what a user would.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from yomiage.cli.bench_load import busy_warning, own_threads
from yomiage.cli.bench_plans import Configuration, plan_lines
from yomiage.cli.bench_report import TABLE_KEY, Recommendation, Row, table


@dataclass(frozen=True)
class Measured:
    """Everything one run of bench found: the configurations (in the order measured),
    their rows, the default one's (no ``--threads``: the voice as first loaded), the
    notes on how it was measured, and the machine."""

    rows: tuple[Row, ...]
    configs: tuple[Configuration, ...]
    default: Configuration | None
    notes: tuple[str, ...]
    machine: dict[str, Any]
    repeat: int

    @property
    def busy(self) -> str | None:
        """The warning that other work disturbed the timings, None if nothing says so."""
        cores = int(self.machine.get("logical_cores") or 1)
        own = own_threads([c.threads for c in self.configs], cores)
        readings = [(c.name, c.load, n) for c, n in zip(self.configs, own, strict=True)]
        return busy_warning(readings, cores)

    @property
    def all_notes(self) -> tuple[str, ...]:
        busy = self.busy
        return (busy, *self.notes) if busy else self.notes


def summary(measured: Measured, recommendation: Recommendation, *, version: str, voice: str) -> str:
    """The text bench prints on stdout."""
    machine = measured.machine
    cores = f"{machine['physical_cores']} cores, {machine['logical_cores']} logical"
    runs = f"{measured.repeat} run{'s' * (measured.repeat != 1)}"
    lines = [
        f"yomiage {version}, voice {voice}; {machine['cpu']} ({cores})",
        f"each number the median of {runs}",
        *TABLE_KEY,
        "",
        table(list(measured.rows)),
        "",
    ]
    plans = plan_lines(list(measured.configs), measured.default)
    if plans:
        lines.extend([*plans, ""])
    lines.extend(measured.all_notes)
    lines.extend(recommendation.lines)
    return "\n".join(lines)


def configurations_json(measured: Measured) -> dict[str, Any]:
    """The ``--json`` keys for the configurations, their plans and the load."""
    return {
        "configurations": [
            {**asdict(c), "name": c.name, "plan_faster_over_budget": c.faster_over_budget}
            for c in measured.configs
        ],
        "busy": measured.busy,
    }
