"""Two exports of one graph side by side: the same output, time and working memory.

Run: .venv/bin/python benchmarks/graph_ab.py BEFORE.onnx AFTER.onnx [--lengths 146 495 1024]
     [--threads 2] [--rounds 4]

For a change to how a float-input graph (the flow, the decoder) is written that must leave
its output alone: both graphs get the same seeded inputs at each length (every
dynamic axis set to it, 0.7-scaled normal floats; integer inputs keep their
defaults), the largest difference of their outputs is printed, then calls alternate
between them for ``--rounds`` rounds and the fastest call of each is kept
(interference on a shared machine only adds time).
Memory: each graph in its own fresh process, the resident high-water mark added by
its calls at the lengths in increasing order.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

import numpy as np


def session(path: str, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def feeds(s: Any, length: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for i in s.get_inputs():
        if i.type != "tensor(float)":
            continue  # an optional integer input (the decoder's trims) keeps its default
        shape = [d if isinstance(d, int) else length for d in i.shape]
        out[i.name] = (rng.standard_normal(shape) * 0.7).astype(np.float32)
    return out


def high_water_mb() -> float:
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("VmHWM"))
    return int(line.split()[1]) / 1024


def child(path: str, lengths: list[int], threads: int) -> None:
    s = session(path, threads)
    before, added = high_water_mb(), {}
    for n in sorted(lengths):
        s.run(None, feeds(s, n, n))
        added[n] = round(high_water_mb() - before, 1)
    print(json.dumps(added))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--lengths", type=int, nargs="+", default=[146, 495, 1024])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.before, args.lengths, args.threads)
        return
    graphs = {
        "before": session(args.before, args.threads),
        "after": session(args.after, args.threads),
    }
    print("| length | before ms | after ms | after / before | max abs difference |")
    print("| --- | --- | --- | --- | --- |")
    for n in args.lengths:
        inputs = feeds(graphs["before"], n, n)
        outputs = {k: s.run(None, inputs)[0] for k, s in graphs.items()}
        diff = float(np.abs(outputs["before"] - outputs["after"]).max())
        best = {k: float("inf") for k in graphs}
        for _ in range(args.rounds):
            for k, s in graphs.items():
                start = time.perf_counter()
                s.run(None, inputs)
                best[k] = min(best[k], time.perf_counter() - start)
        ratio = best["after"] / best["before"]
        print(f"| {n} | {best['before'] * 1000:.0f} | {best['after'] * 1000:.0f} | "
              f"{ratio:.2f} | {diff:.3g} |")  # fmt: skip
    for k in ("before", "after"):
        path = getattr(args, k)
        command = [sys.executable, __file__, path, path, "--child", "--threads",
                   str(args.threads), "--lengths", *map(str, args.lengths)]  # fmt: skip
        added = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        print(f"{k}: MB added after each length (fresh process): {added.strip()}")


if __name__ == "__main__":
    main()
