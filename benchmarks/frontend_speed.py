"""Frontend speed: `import yomiage` time and g2p time per sentence.

Run: .venv/bin/python benchmarks/frontend_speed.py [--repeat 5]

Each measurement of import time runs in a fresh interpreter. Sentences are the
153 reference sentences of ../shared/fixtures/g2p (or a built-in set without
them). Prints a Markdown table; paste it into benchmarks/RESULTS.md.
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
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "g2p" / "g2p_cases.json"
FALLBACK = ["今日はいい天気ですね。", "円周率は3.14です。", "GitHubでJSONを公開した。"] * 50


def import_seconds(module: str, runs: int) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    run = [sys.executable, "-c", code]
    samples = [
        float(subprocess.run(run, capture_output=True, text=True, check=True).stdout)
        for _ in range(runs)
    ]
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from yomiage.text import Frontend, UserDictionary

    texts = (
        [c["text"] for c in json.loads(FIXTURE.read_text("utf-8"))["cases"]]
        if FIXTURE.exists()
        else FALLBACK
    )
    t0 = time.perf_counter()
    frontend = Frontend(UserDictionary(None))
    construct = time.perf_counter() - t0
    t0 = time.perf_counter()
    for text in texts:  # first pass: loads e2k, fills caches
        frontend.g2p(text)
    first_pass = (time.perf_counter() - t0) / len(texts)
    per_sentence = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for text in texts:
            frontend.g2p(text)
        per_sentence.append((time.perf_counter() - t0) / len(texts))
    chars = sum(len(t) for t in texts) / len(texts)

    machine = platform.processor() or platform.machine()
    print(
        f"machine: {machine}, {os.cpu_count()} logical CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )
    rows = [
        ("`import yomiage` (fresh process, median of 5)", import_seconds("yomiage", 5), 0),
        (
            "`import yomiage.text` (fresh process, median of 5)",
            import_seconds("yomiage.text", 5),
            0,
        ),
        ("`Frontend()` construction", construct, 1),
        (
            f"g2p per sentence, first pass ({len(texts)} sentences, {chars:.0f} chars avg)",
            first_pass,
            3,
        ),
        (
            f"g2p per sentence, warm (median of {args.repeat} passes)",
            statistics.median(per_sentence),
            3,
        ),
    ]
    print("\n| measurement | value |\n| --- | --- |")
    for name, seconds, digits in rows:
        print(f"| {name} | {seconds * 1000:.{digits}f} ms |")


if __name__ == "__main__":
    main()
