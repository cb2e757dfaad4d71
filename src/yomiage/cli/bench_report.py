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

from yomiage.runtime.cpu import THREADS_WORTH
from yomiage.runtime.plan import SPEED_WORTH_MEMORY

PRECISIONS = ("bf16", "int8", "fp32")  # as a loaded voice's runtime names them


@dataclass(frozen=True)
class Row:
    """One text read by one configuration; ``peak_mb`` and ``load_s`` are its process's."""

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


def resolved_precision(runtime: str) -> str | None:
    """``bf16``, ``int8`` or ``fp32`` from a voice's runtime text, None if it names none."""
    words = runtime.replace(",", " ").split()
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
    same = sorted((r for r in timed if r.decoder == best.decoder), key=lambda r: r.threads)
    enough = next(r for r in same if r.speed >= best.speed * (1 - THREADS_WORTH))
    auto = f" ({best.precision})" if best.decoder == "auto" else ""
    lines = [f"fastest: {best.flags}{auto}, {best.speed:.1f}x real time on the {speed_text} text"]
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
    )


def table(rows: list[Row]) -> str:
    """The rows as aligned columns, one line each, with a header."""
    header = ("threads", "decoder", "text", "audio s", "speed", "first audio", "peak MB", "load s")
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


def plan_table(options: list[dict[str, Any]]) -> str:
    """The alternatives a plan was chosen from (the chosen first): predicted seconds of
    decoding over the reference sentences, predicted peak memory, why one was passed over."""
    if not options:
        return "  (a fixed plan: nothing measured to compare)"
    fits = [o["predicted_decode_s"] for o in options if not o.get("refused")]
    fastest = min(fits, default=float("inf"))
    even = (f"  (the lightest of those within {SPEED_WORTH_MEMORY:.0%} of the fastest: "
            "as fast within what measuring can tell)")  # fmt: skip
    lines = []
    for i, o in enumerate(options):
        mark = "*" if i == 0 else " "
        why = f"  ({o['refused']})" if o.get("refused") else ""
        if i == 0 and not why and o["predicted_decode_s"] > fastest:
            why = even
        lines.append(f"  {mark} {o['decoder']}: {o['predicted_decode_s']:.2f} s, "
                     f"~{o['peak_mb']} MB{why}")  # fmt: skip
    return "\n".join(lines)


# A plan over the budget is worth pointing out when it decodes at least this much faster.
FASTER_WORTH = 1.1


def faster_over_budget(options: list[dict[str, Any]], budget_mb: int) -> list[dict[str, Any]]:
    """What a larger ``--memory-budget`` would buy, from the options the plan was chosen
    among (the chosen first): the cheapest faster option and the fastest, each with the
    budget that admits it. A budget is a trade the user makes on purpose (a machine with
    AMX decodes bfloat16 several times faster, for hundreds of MB more), so bench says
    what the trade is rather than leaving it in the table."""
    if not options:
        return []
    chosen = options[0]["predicted_decode_s"]
    faster = [
        o for o in options[1:]
        if o["peak_mb"] > budget_mb and o["predicted_decode_s"] * FASTER_WORTH <= chosen
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
        f"  a larger budget decodes faster: --memory-budget {o['memory_budget_mb']} runs "
        f"{o['decoder']} ({o['decoding_speedup']:.1f}x the decoding speed, ~{o['peak_mb']} MB peak)"
        for o in offers
    ]


def plan_threads(measured: list[list[float]]) -> str:
    """The thread counts the plan chose among, as one line."""
    counts = ", ".join(f"{int(count)}: {ms:.0f} ms" for count, ms in measured)
    return f"  threads, one full decoder window each: {counts}"


def machine() -> dict[str, Any]:
    """The machine the numbers belong to."""
    from yomiage.runtime.cpu import physical_cores

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
