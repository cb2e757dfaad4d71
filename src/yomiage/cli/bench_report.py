"""What ``yomiage bench`` measured, as a table, a JSON object and a recommendation.

The recommendation answers what users of every Japanese engine ask: which thread
count and decoder precision to run on this CPU. It reads the rows only; the
thresholds are here, once.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yomiage.runtime.engines.cpu import THREADS_WORTH

PRECISIONS = ("bf16", "int8", "fp32")  # as a loaded voice's runtime names them


@dataclass(frozen=True)
class Row:
    """One text read by one configuration; ``peak_mb`` and ``load_s`` are its process's,
    ``load_s`` without the plan's measurement (``plan_measure_s``, paid once per CPU,
    thread count and voice); ``plan`` is what its decoder ran by (engine, precision,
    windows: the plan measured for its thread count), "" for a voice without a plan."""

    threads: int
    decoder: str  # as asked: auto, fp32, bf16, int8
    runtime: str  # as loaded, e.g. "decoder bf16 on openvino"
    text: str  # short, long, or given
    audio_s: float
    wall_s: float  # median of the timed runs of generate()
    speed: float  # audio_s / wall_s: x real time
    first_audio_s: float  # median time to the first chunk of stream()
    peak_mb: float | None
    load_s: float
    plan: str = ""
    plan_measure_s: float = 0.0

    @property
    def runs(self) -> str:
        """What decoded: two rows compare thread counts only where this is the same."""
        return self.plan or self.runtime

    @property
    def precision(self) -> str:
        """The decoder's precision as loaded (what ``auto`` became)."""
        return resolved_precision(self.runtime) or self.decoder

    @property
    def label(self) -> str:
        """The decoder as asked, with what ``auto`` became: ``auto (bf16)``."""
        return f"auto ({self.precision})" if self.decoder == "auto" else self.decoder

    @property
    def flags(self) -> str:
        return f"--threads {self.threads} --decoder {self.decoder}"


@dataclass(frozen=True)
class Recommendation:
    """The configuration to run (fewest threads within :data:`THREADS_WORTH` of the fastest, in
    the fastest one's precision), the one with the soonest first audio, and the
    sentences that say why."""

    threads: int
    decoder: str
    speed: float
    first_audio_threads: int
    first_audio_decoder: str
    first_audio_s: float
    lines: tuple[str, ...]
    # The decoder asked for ran by different plans at different thread counts, so no
    # line judges the thread count alone.
    plans_differ: bool = False


def resolved_precision(runtime: str) -> str | None:
    """``bf16``, ``int8`` or ``fp32`` from a voice's runtime text (its decoder's, which it
    names first: the flow's may differ), None if it names none."""
    words = runtime.split(",")[0].split()
    return next((p for p in PRECISIONS if p in words), None)


def _threads(n: int) -> str:
    return f"{n} thread{'s' * (n != 1)}"


def recommend(rows: list[Row]) -> Recommendation:
    """What the rows imply; speed is judged on the long text, first audio on the short
    one (each falls back to the text there is)."""
    if not rows:
        raise ValueError("nothing was measured")
    texts = [r.text for r in rows]
    speed_text = "long" if "long" in texts else texts[-1]
    first_text = "short" if "short" in texts else texts[0]
    timed = [r for r in rows if r.text == speed_text]
    best = max(timed, key=lambda r: r.speed)
    mine = [r for r in timed if r.decoder == best.decoder]
    # Thread counts are compared at one plan only: another plan is another engine,
    # precision or window, whose difference is not the threads'.
    same = sorted((r for r in mine if r.runs == best.runs), key=lambda r: r.threads)
    enough = next(r for r in same if r.speed >= best.speed * (1 - THREADS_WORTH))
    auto = f" ({best.precision})" if best.decoder == "auto" else ""
    lines = [f"fastest: {best.flags}{auto}, {best.speed:.1f}x real time on the {speed_text} text"]
    differ = any(r.runs != best.runs for r in mine)
    if differ:
        lines.extend(_plans_differ(best.decoder, mine))
    more = [r for r in same if r.threads > enough.threads]
    if more:
        top = max(more, key=lambda r: r.threads)
        gain = top.speed / max(enough.speed, 1e-9) - 1
        said = f"{_threads(enough.threads)}: {enough.speed:.1f}x real time; {top.threads} "
        if gain < 0:
            lines.append(said + f"are {-gain:.0%} slower: more threads do not help here")
        else:
            lines.append(said + f"add only {gain:.0%}: leave the other cores free")
    elif len(same) > 1:
        low = same[0]
        lines.append(
            f"more threads help: {_threads(low.threads)} {low.speed:.1f}x real time, "
            f"{best.threads} {best.speed:.1f}x"
        )
    precisions = {r.precision: r for r in timed if r.threads == enough.threads}
    if len(precisions) > 1:
        ranked = sorted(precisions.values(), key=lambda r: r.speed, reverse=True)
        top_p, *others = ranked
        lines.extend(
            f"decoder {top_p.precision}: {top_p.speed / max(o.speed, 1e-9):.2f}x the speed of "
            f"{o.precision} at {_threads(enough.threads)}"
            for o in others
        )
    first = min((r for r in rows if r.text == first_text), key=lambda r: r.first_audio_s)
    lines.append(
        f"first audio soonest: {first.flags}, {first.first_audio_s:.2f} s on the {first_text} text"
    )
    if best.speed < 1:
        lines.append("slower than real time at best: a stream will pause; files are fine")
    lines.append(f"recommended: --threads {enough.threads} --decoder {best.decoder}")
    return Recommendation(
        threads=enough.threads,
        decoder=best.decoder,
        speed=enough.speed,
        first_audio_threads=first.threads,
        first_audio_decoder=first.decoder,
        first_audio_s=first.first_audio_s,
        lines=tuple(lines),
        plans_differ=differ,
    )


def _plans_differ(decoder: str, rows: list[Row]) -> list[str]:
    """What each thread count of ``--decoder decoder`` ran by, and what that means for
    comparing them; ``rows`` are that decoder's, one text."""
    groups: dict[str, list[int]] = {}
    for r in sorted(rows, key=lambda r: r.threads):
        groups.setdefault(r.runs, []).append(r.threads)
    said = "; ".join(
        f"{', '.join(map(str, counts))} thread{'s' * (counts != [1])}: {runs}"
        for runs, counts in groups.items()
    )
    lines = [
        f"plans differ: --decoder {decoder} ran the plan measured for each thread count ({said})",
        "  so these speeds compare plans as much as thread counts: the thread count is not "
        "judged alone",
    ]
    precisions = sorted({r.precision for r in rows})
    if len(precisions) > 1:  # a precision asked for keeps every count on its engine
        one = " or ".join(f"--decoder {p}" for p in precisions)
        lines[-1] += f"; to compare thread counts at one precision, bench {one}"
    return lines


# What the table's columns are, printed above it.
TABLE_KEY = (
    "speed: seconds of audio a second of generate(); first audio: seconds to a stream's first "
    "chunk;",
    "peak MB: the process's peak memory; load s: loading the voice, not counting the plan;",
    "plan s: measuring the plan for that thread count (once per CPU and voice, then kept; -: kept)",
)


def table(rows: list[Row]) -> str:
    """The rows as aligned columns, one line each, with a header (:data:`TABLE_KEY` says
    what each column is)."""
    header = ("threads", "decoder", "text", "audio s", "speed", "first audio", "peak MB",
              "load s", "plan s")  # fmt: skip
    cells = [
        (
            str(r.threads),
            r.label,
            r.text,
            f"{r.audio_s:.2f}",
            f"{r.speed:.2f}x",
            f"{r.first_audio_s:.3f} s",
            "?" if r.peak_mb is None else f"{r.peak_mb:.0f}",
            f"{r.load_s:.2f}",
            f"{r.plan_measure_s:.0f}" if r.plan_measure_s else "-",
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    left = {1, 2}  # words left, numbers right

    def line(values: tuple[str, ...]) -> str:
        return "  ".join(
            v.ljust(w) if i in left else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    return "\n".join(line(c) for c in [header, *cells])


# A plan over the budget is worth pointing out when it decodes at least this much faster.
FASTER_WORTH = 1.1


def faster_over_budget(options: list[dict[str, Any]], budget_mb: int) -> list[dict[str, Any]]:
    """What a larger ``--memory-budget-mb`` would buy, from the options the plan was chosen
    among (the chosen first): the cheapest faster option and the fastest, each with the
    budget that admits it. A budget is a trade the user makes on purpose (where the CPU
    computes bfloat16 natively, a larger budget can buy much more speed: the AMX
    family's table in benchmarks/RESULTS.md), so bench says what the trade is rather than leaving
    it in the table."""
    if not options:
        return []
    chosen = options[0]["predicted_decode_s"]
    faster = [
        o for o in options[1:]
        if round(o["peak_mb"]) > budget_mb and o["predicted_decode_s"] * FASTER_WORTH <= chosen
    ]  # fmt: skip
    if not faster:
        return []
    picks = [min(faster, key=lambda o: (o["peak_mb"], o["predicted_decode_s"]))]
    fastest = min(faster, key=lambda o: (o["predicted_decode_s"], o["peak_mb"]))
    if fastest is not picks[0]:
        picks.append(fastest)
    return [
        {"memory_budget_mb": -(-o["peak_mb"] // 10) * 10, "decoder": o["decoder"],
         "decoding_speedup": round(chosen / o["predicted_decode_s"], 2), "peak_mb": o["peak_mb"]}
        for o in picks
    ]  # fmt: skip


def faster_over_budget_lines(offers: list[dict[str, Any]]) -> list[str]:
    """:func:`faster_over_budget`'s offers as lines under the plan's table."""
    return [
        f"  a larger budget decodes faster: --memory-budget-mb {o['memory_budget_mb']} runs "
        f"{o['decoder']} ({o['decoding_speedup']:.1f}x the decoding speed, ~{o['peak_mb']} MB peak)"
        for o in offers
    ]


def machine() -> dict[str, Any]:
    """The machine the numbers belong to."""
    from yomiage.runtime.engines.cpu import physical_cores

    return {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": physical_cores(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def cpu_model() -> str:
    """The CPU's name: /proc/cpuinfo's on Linux (``model name``, or an Arm board's
    ``Hardware``/``Model``), else what :mod:`platform` knows."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        info = ""
    for key in ("model name", "Hardware", "Model"):
        for line in info.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def report(rows: list[Row], recommendation: Recommendation, **about: Any) -> dict[str, Any]:
    """The ``--json`` object: ``about`` (version, machine, voice, ...), rows, recommendation."""
    out = dict(about)
    out["rows"] = [{**asdict(r), "precision": r.precision} for r in rows]
    out["recommendation"] = {**asdict(recommendation), "lines": list(recommendation.lines)}
    return out
