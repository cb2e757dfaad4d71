"""The plan each configuration of ``yomiage bench`` ran by, and the alternatives it was
chosen from.

A plan is measured per thread count (:mod:`yomiage.runtime.plan.planner`), so two thread
counts of the same ``--decoder`` may run different engines, precisions or windows:
what a user gets with those flags, and why bench shows every configuration's plan
beside its timings instead of one plan for all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yomiage.cli.bench_load import LoadReading
from yomiage.cli.bench_report import faster_over_budget, faster_over_budget_lines
from yomiage.runtime.plan.choose import SPEED_WORTH_MEMORY


@dataclass(frozen=True)
class Configuration:
    """One process of bench: what it was asked (``threads`` None: yomiage's default),
    what it loaded and ran by, and what it cost. ``plan_measure_s`` is the time its
    plan's measurement took (0 when the plan was kept from before), which ``load_s``
    does not include: it is paid once per CPU, thread count and voice, not per load."""

    threads: int | None
    decoder: str  # as asked
    runtime: str
    load_s: float
    plan_measure_s: float = 0.0
    plan: str = ""  # the plan's description ("" for a voice without one)
    plan_decoder: str = ""  # its decoder (and flow, where that moved): what it runs
    plan_peak_mb: float | None = None
    plan_options: tuple[dict[str, Any], ...] = ()
    plan_threads: tuple[tuple[int, float], ...] = ()
    memory_budget_mb: int | None = None
    plan_reference_frames: tuple[int, ...] = ()
    load: LoadReading = field(default_factory=lambda: LoadReading(None, None))

    @classmethod
    def from_event(
        cls, threads: int | None, decoder: str, loaded: dict[str, Any], load: LoadReading
    ) -> Configuration:
        """The configuration from its worker's ``loaded`` event."""
        return cls(
            threads=threads,
            decoder=decoder,
            runtime=loaded.get("runtime", ""),
            load_s=loaded.get("load_s", 0.0),
            plan_measure_s=loaded.get("plan_measure_s", 0.0),
            plan=loaded.get("plan", ""),
            plan_decoder=loaded.get("plan_decoder", ""),
            plan_peak_mb=loaded.get("plan_peak_mb"),
            plan_options=tuple(loaded.get("plan_options", ())),
            plan_threads=tuple((int(n), float(ms)) for n, ms in loaded.get("plan_threads", ())),
            memory_budget_mb=loaded.get("memory_budget_mb"),
            plan_reference_frames=tuple(loaded.get("plan_reference_frames", ())),
            load=load,
        )

    @property
    def name(self) -> str:
        """``1 thread, decoder auto``, as progress lines and errors name it."""
        if self.threads is None:
            return f"no --threads, decoder {self.decoder}"
        return f"{self.threads} thread{'s' * (self.threads != 1)}, decoder {self.decoder}"

    @property
    def faster_over_budget(self) -> list[dict[str, Any]]:
        """What a larger ``--memory-budget-mb`` would buy over this plan (none without one)."""
        if self.memory_budget_mb is None:
            return []
        return faster_over_budget(list(self.plan_options), self.memory_budget_mb)

    @property
    def runs(self) -> str:
        """What decodes: the plan's decoder where there is a plan, else the runtime."""
        return self.plan_decoder or self.runtime


def plan_lines(configs: list[Configuration], default: Configuration | None) -> list[str]:
    """Each configuration's plan, the plan without ``--threads`` (what ``generate`` runs),
    then each distinct set of alternatives once, under a header naming its columns."""
    shown = [c for c in configs if c.plan]
    if default is not None and default.plan:
        shown.append(default)
    if not shown:
        return []
    lines = ["plans, one per configuration (each thread count has its own):"]
    lines.extend(f"  {c.name}: {c.plan}" for c in shown)
    measured = [c for c in shown if c.plan_measure_s > 0]
    lines.extend(
        f"  measuring the plan for {c.name}: {c.plan_measure_s:.0f} s, once per CPU, "
        "thread count and voice (kept in the cache; not in load s)"
        for c in measured
    )
    tables: dict[tuple[str, ...], str] = {}
    for c in shown:
        if not c.plan_options:
            continue
        key = tuple(repr(sorted(o.items())) for o in c.plan_options)
        if key in tables:
            lines.append(f"alternatives for {c.name}: as for {tables[key]}")
            continue
        tables[key] = c.name
        lines.append(f"alternatives for {c.name}:")
        lines.append(plan_table(list(c.plan_options), c.plan_reference_frames))
        if c.plan_threads:
            lines.append(plan_threads([list(t) for t in c.plan_threads]))
        lines.extend(faster_over_budget_lines(c.faster_over_budget))
    return lines


def plan_table(options: list[dict[str, Any]], frames: tuple[int, ...] = ()) -> str:
    """The alternatives a plan was chosen from (the chosen first, marked ``*``), under a
    header: predicted seconds of the flow and decoder over the plan's reference sentences,
    predicted peak memory, the decoder, and why one was passed over."""
    if not options:
        return "  (a fixed plan: nothing measured to compare)"
    fits = [o["predicted_decode_s"] for o in options if not o.get("refused")]
    fastest = min(fits, default=float("inf"))
    even = (f"the lightest of those within {SPEED_WORTH_MEMORY:.0%} of the fastest: "
            "as fast within what measuring can tell")  # fmt: skip
    sentences = f"{len(frames)} reference sentences" if frames else "the reference sentences"
    if frames:
        sentences += f" of {min(frames)}-{max(frames)} decoder frames"
    lines = [
        f"    predicted s: seconds the flow and decoder would take for {sentences}; "
        "peak MB: predicted peak memory",
        f"    {'predicted s':>11}  {'peak MB':>7}  decoder (why it was not chosen)",
    ]
    for i, o in enumerate(options):
        mark = "*" if i == 0 else " "
        why = o.get("refused") or ""
        if i == 0 and not why and o["predicted_decode_s"] > fastest:
            why = even
        said = f"  ({why})" if why else ""
        lines.append(f"  {mark} {o['predicted_decode_s']:>11.2f}  {o['peak_mb']:>7}  "
                     f"{o['decoder']}{said}")  # fmt: skip
    return "\n".join(lines)


def plan_threads(measured: list[list[float]]) -> str:
    """The thread counts the plan chose among, as one line."""
    counts = ", ".join(f"{int(count)}: {ms:.0f} ms" for count, ms in measured)
    return f"  threads, one full decoder window each: {counts}"
