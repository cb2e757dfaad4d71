"""Each graph of a bundle on each engine: the measurements behind runtime/engines/placement.py.

Run: .venv/bin/python benchmarks/engines.py [--bundle DIR] [--repeats 3]

For every (graph, engine) pair, in a fresh process: load time, the median of 5
runs after 2 warm-ups at one realistic size, and the memory the process gained
by loading and by running. Graphs: the encoder (with the duration predictors, 200
tokens), the flow (650 frames, a 7.5 s sentence), the decoder (a 286-frame padded
window, the runtime's largest) and the q8 BERT (100 tokens); engines: ONNX Runtime
float32, OpenVINO float32 and, for the flow and the decoder, OpenVINO bfloat16.
The bundle defaults to ``benchmarks/.cache/bundle-full-0`` (``benchmarks/backends.py``
makes it).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
THREADS = 2
PAIRS = [
    ("encoder", "onnxruntime f32", 200),
    ("encoder", "openvino f32", 200),
    ("flow", "onnxruntime f32", 650),
    ("flow", "openvino f32", 650),
    ("flow", "openvino bf16", 650),
    ("decoder", "onnxruntime f32", 286),
    ("decoder", "openvino f32", 286),
    ("decoder", "openvino bf16", 286),
    ("bert_q8", "onnxruntime f32", 100),
    ("bert_q8", "openvino f32", 100),
]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def feeds_for(graph: str, size: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    normal = rng.standard_normal
    if graph in ("decoder", "flow"):
        latent = "z" if graph == "decoder" else "z_p"
        # g for a bundle made before speaker tables, sid for one with them
        speaker = {"g": normal((1, 512, 1), np.float32), "sid": np.zeros(1, np.int64)}
        return {latent: normal((1, 192, size), np.float32), **speaker}
    if graph == "encoder":
        return {
            "phone_ids": rng.integers(1, 100, (1, size)),
            "tone_ids": rng.integers(6, 8, (1, size)),
            "language_ids": np.ones((1, size), np.int64),
            "bert": normal((1, 1024, size), np.float32),
            "style": normal((1, 256), np.float32),
            "sid": np.array([0]),
            "sdp_noise": normal((1, 2, size), np.float32),
            "sdp_ratio": np.array([0.2], np.float32),
            "length_scale": np.array([1.0], np.float32),
        }
    ids = rng.integers(5, 1000, (1, size))
    return {"input_ids": ids, "attention_mask": np.ones((1, size), np.int64)}


def child(bundle: Path, graph: str, engine_precision: str, size: int) -> dict[str, float]:
    from yomiage.runtime.engines.placement import Placement
    from yomiage.runtime.engines.sessions import Sessions

    engine, precision = engine_precision.split()
    path = bundle / "bert" / "bert_q8.onnx" if graph == "bert_q8" else bundle / f"{graph}.onnx"
    feeds = feeds_for(graph, size)
    base = rss_mb()
    start = time.perf_counter()
    placement = Placement(engine, precision)  # type: ignore[arg-type]
    session = Sessions(THREADS, openvino=engine == "openvino").open(path, placement)
    if session.placement != placement:
        raise SystemExit(f"{graph} did not load on {engine_precision}")
    load = time.perf_counter() - start
    loaded = rss_mb()
    for _ in range(2):
        session.run(feeds)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        session.run(feeds)
        times.append(time.perf_counter() - t)
    return {
        "ms": 1000 * statistics.median(times),
        "load": load,
        "rss_load": loaded - base,
        "rss_run": rss_mb() - loaded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=HERE / ".cache" / "bundle-full-0")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        graph, engine, size = args.child
        print(json.dumps(child(args.bundle, graph, engine, int(size))))
        return
    runs: dict[tuple[str, str], list[dict[str, float]]] = {(g, e): [] for g, e, _ in PAIRS}
    for _ in range(args.repeats):  # interleaved rounds, a fresh process each
        for graph, engine, size in PAIRS:
            cmd = [sys.executable, __file__, "--bundle", str(args.bundle), "--child", graph,
                   engine, str(size)]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(f"{graph} on {engine} failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
                continue
            runs[graph, engine].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"machine: {platform.machine()}, {THREADS} threads; bundle {args.bundle.resolve()}; "
          f"median of {args.repeats} fresh processes")  # fmt: skip
    print()
    print("| graph | size | engine | ms | vs ONNX Runtime | load s | MB after load | MB running |")
    print("| --- " * 8 + "|")
    for graph, engine, size in PAIRS:
        rows = runs[graph, engine]
        if not rows:
            print(f"| {graph} | {size} | {engine} | failed | | | | |")
            continue
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        base_rows = runs[graph, "onnxruntime f32"]
        base = statistics.median(r["ms"] for r in base_rows) if base_rows else float("nan")
        print(f"| {graph} | {size} | {engine} | {m['ms']:.1f} | {base / m['ms']:.2f}x "
              f"| {m['load']:.2f} | {m['rss_load']:.0f} | {m['rss_run']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
