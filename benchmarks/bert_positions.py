"""The BERT with its position tables whole against sliced to each call's positions
(:mod:`yomiage.export.bert_positions`): the same features, time and memory per call.

Run: .venv/bin/python benchmarks/bert_positions.py BERT_DIR [--precision q8]
     [--calls 1x5 1x20 1x40 1x120 2x60 4x200 1x300 1x510] [--threads 2] [--rounds 9]

BERT_DIR is a bundle's ``bert/`` folder. The sliced graph is made here, in memory, and
runs with the folder's weights, as a voice runs the one the cache keeps. For each call
(``BATCHxTOKENS``, seeded token ids, the second and later sentences half padding) the
two graphs' features are compared (identical or the largest difference), then calls
alternate between them for ``--rounds`` rounds and the median and fastest of each are
printed (interference on a shared machine only adds time). Memory: each graph in a
fresh process, its resident high-water mark after its calls in the order given.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

CALLS = ["1x5", "1x20", "1x40", "1x120", "2x60", "4x200", "1x300", "1x510"]
GRAPHS = {"fp32": "bert.onnx", "q8": "bert_q8.onnx", "q4": "bert_q4.onnx"}


def session(graph: Path, sliced: bool, threads: int) -> Any:
    import onnx

    from yomiage.export.bert_positions import slice_in
    from yomiage.runtime.engines.onnx_session import load_session, session_options

    if not sliced:
        return load_session(graph, session_options(threads))
    model = onnx.load(str(graph), load_external_data=False)
    if not slice_in(model.graph):
        raise SystemExit(f"{graph} has no position tables to slice")
    made = Path("/tmp") / f"bert_positions_{graph.stat().st_ino}.onnx"
    made.write_bytes(model.SerializeToString())
    try:
        return load_session(made, session_options(threads), weights_dir=graph.parent)
    finally:
        made.unlink()


def feeds(call: str, seed: int) -> dict[str, np.ndarray]:
    batch, tokens = (int(x) for x in call.split("x"))
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, tokens), np.int64)
    mask[1:, tokens // 2 :] = 0
    return {"input_ids": rng.integers(5, 20000, (batch, tokens)).astype(np.int64),
            "attention_mask": mask}  # fmt: skip


def hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_child(graph: Path, sliced: bool, threads: int, calls: list[str]) -> None:
    s = session(graph, sliced, threads)
    loaded = hwm_mb()
    for i, call in enumerate(calls):
        s.run(None, feeds(call, i))
    print(json.dumps({"loaded_mb": loaded, "hwm_mb": hwm_mb()}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bert_dir", type=Path)
    p.add_argument("--precision", default="q8", choices=sorted(GRAPHS))
    p.add_argument("--calls", nargs="+", default=CALLS)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--memory-child", choices=["whole", "sliced"], help=argparse.SUPPRESS)
    args = p.parse_args()
    graph = args.bert_dir / GRAPHS[args.precision]
    if args.memory_child:
        memory_child(graph, args.memory_child == "sliced", args.threads, args.calls)
        return
    import platform

    print(f"{graph}, {args.threads} threads, {platform.processor() or platform.machine()}")
    whole, sliced = session(graph, False, args.threads), session(graph, True, args.threads)
    print("| call | features | whole ms (median / fastest) | sliced ms | whole / sliced |")
    print("| --- | --- | --- | --- | --- |")
    for i, call in enumerate(args.calls):
        f = feeds(call, i)
        a, b = whole.run(None, f)[0], sliced.run(None, f)[0]
        same = "identical" if np.array_equal(a, b) else f"differ by {np.abs(a - b).max():.3g}"
        times: dict[str, list[float]] = {"whole": [], "sliced": []}
        for _ in range(args.rounds):
            for name, s in (("whole", whole), ("sliced", sliced)):
                started = time.perf_counter()
                s.run(None, f)
                times[name].append(1000 * (time.perf_counter() - started))
        w, s_ = np.median(times["whole"]), np.median(times["sliced"])
        print(f"| {call} | {same} | {w:.1f} / {min(times['whole']):.1f} | "
              f"{s_:.1f} / {min(times['sliced']):.1f} | {w / s_:.2f}x |", flush=True)  # fmt: skip
    for kind in ("whole", "sliced"):
        out = subprocess.run(
            [sys.executable, __file__, str(args.bert_dir), "--precision", args.precision,
             "--threads", str(args.threads), "--memory-child", kind, "--calls", *args.calls],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        figures = json.loads(out.strip().splitlines()[-1])
        print(f"{kind}: loaded {figures['loaded_mb']:.0f} MB, "
              f"high-water mark after the calls {figures['hwm_mb']:.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
