"""Readings and accents against JSUT's hand-checked labels, with g2p time (issue 23).

Run: .venv/bin/python benchmarks/readings.py [--python-for pyopenjtalk-labels=PATH] [--json OUT]

Scores each configuration with ../shared/fixtures/jsut/score.py (2,498 JSUT BASIC5000
sentences: MER, sentences read right, tone, whole pitch pattern; see its README), then
times g2p on the same sentences: one warm-up pass, then the median of `--repeat` passes.
Both run in a fresh process per configuration. A configuration is one row of `CONFIGS`:
a yomiage reading is `Frontend(**kwargs)` (passed as YOMIAGE_FRONTEND_KWARGS, which
score.py reads); `pyopenjtalk-labels` scores whichever `pyopenjtalk` module a python given
with `--python-for` has (e.g. a venv with pyopenjtalk-plus) and is left out without one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
JSUT = REPO.parent / "shared" / "fixtures" / "jsut"
SCORER = JSUT / "score.py"
DATA = JSUT / "basic5000_0001-2500.json"


@dataclass(frozen=True)
class Config:
    """One row: `system` is score.py's SYSTEM; `kwargs` go to yomiage's Frontend."""

    label: str
    system: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    needs_python: bool = False  # scored only with --python-for LABEL=PATH


CONFIGS = [
    Config("yomiage (default)", "yomiage"),
    Config('yomiage reading="sbv2"', "yomiage", {"reading": "sbv2"}),
    Config("pyopenjtalk-labels", "pyopenjtalk-labels", needs_python=True),
]


def time_g2p(system: str, repeat: int) -> dict[str, float]:
    """Cold-start seconds and warm ms per sentence; runs in a fresh process (see main)."""
    texts = [item["text"] for item in json.loads(DATA.read_text("utf-8"))]
    g2p: Callable[[str], object]
    kwargs = json.loads(os.environ.get("YOMIAGE_FRONTEND_KWARGS", "{}"))
    if system == "yomiage":  # a cold start: the import and the construction
        t0 = time.perf_counter()
        from yomiage.text import Frontend

        g2p = Frontend(**kwargs).g2p
        setup = time.perf_counter() - t0
    else:  # pyopenjtalk loads its dictionary on the first call: import + one call
        t0 = time.perf_counter()
        import pyopenjtalk

        g2p = pyopenjtalk.extract_fullcontext
        g2p(texts[0])
        setup = time.perf_counter() - t0
    for text in texts:  # warm-up: per-word caches, lazily loaded readers
        g2p(text)
    passes = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for text in texts:
            g2p(text)
        passes.append((time.perf_counter() - t0) / len(texts) * 1000)
    return {"setup_s": setup, "g2p_ms": statistics.median(passes)}


def child(python: str, args: list[str], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON on the last line a fresh `python ARGS` prints."""
    env = {**os.environ, "YOMIAGE_FRONTEND_KWARGS": json.dumps(kwargs)}
    done = subprocess.run([python, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{python} {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def version(python: str, system: str) -> str:
    """What is scored: the distribution that provides the module in that python."""
    module = "yomiage" if system == "yomiage" else "pyopenjtalk"
    code = (
        "import importlib.metadata as m, sys; "
        f"d = m.packages_distributions().get({module!r}, [{module!r}])[0]; "
        "print(d, m.version(d))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text() if cpuinfo.exists() else ""
    models = [line.split(":", 1)[1].strip() for line in text.splitlines() if "model name" in line]
    cpu = models[0] if models else platform.processor() or platform.machine()
    commit = subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; yomiage at {commit or 'unknown'}"
    )


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| configuration | package | MER | sentences read right | tone | whole pitch pattern "
        "| g2p ms/sentence | import + Frontend() s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        setup = f"{r['setup_s']:.2f}" + ("" if r["system"] == "yomiage" else " *")
        lines.append(
            f"| {r['label']} | {r['version']} | {r['MER']:.2%} | {r['reading_acc']:.1%} "
            f"| {r['tone_acc']:.1%} | {r['accent_sentence_acc']:.1%} | {r['g2p_ms']:.2f} "
            f"| {setup} |"
        )
    if any(r["system"] != "yomiage" for r in rows):
        lines.append(
            "\n\\* `import pyopenjtalk` and its first call (it loads its dictionary then)."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-for", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes (median)")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    parser.add_argument("--time", metavar="SYSTEM", help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args()
    if not SCORER.exists() or not DATA.exists():
        print(f"needs the JSUT scorer and sentences: {JSUT} not found", file=sys.stderr)
        raise SystemExit(1)
    if args.time:
        print(json.dumps(time_g2p(args.time, args.repeat)))
        return
    pythons = dict(item.split("=", 1) for item in args.python_for)
    unknown = set(pythons) - {c.label for c in CONFIGS}
    if unknown:
        parser.error(f"--python-for: no configuration {sorted(unknown)}")
    rows = []
    for config in CONFIGS:
        python = pythons.get(config.label, "" if config.needs_python else sys.executable)
        if not python:
            print(f"skipped {config.label}: no --python-for {config.label}=PATH", file=sys.stderr)
            continue
        check = [python, "-c", "import pyopenjtalk"]
        if config.needs_python and subprocess.run(check, capture_output=True).returncode:
            print(f"skipped {config.label}: {python} cannot import pyopenjtalk", file=sys.stderr)
            continue
        score = child(python, [str(SCORER), config.system], config.kwargs)
        timing = child(
            python, [__file__, "--time", config.system, "--repeat", str(args.repeat)], config.kwargs
        )
        row = {"label": config.label, "version": version(python, config.system), "python": python}
        rows.append({**row, "system": config.system, **score, **timing})
        print(f"done: {config.label}", file=sys.stderr)
    print(f"machine: {machine()}\n")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
