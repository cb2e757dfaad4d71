"""Which of the decoder's stages should run as 2-D convolutions (``export/decoder_layout.py``)?

Run: .venv/bin/python benchmarks/decoder_layout.py BUNDLE [--frames 23 62 286] [--pairs 7]
     [--threads 2]

BUNDLE's ``decoder.onnx`` must still be 1-D: a bundle converted before the rewrite, e.g.
``/tmp/full-bundle3`` of RESULTS.md. From it this writes, in a temporary folder, one
variant per threshold: stages of at least 16, 32, 64 or 128 channels in 2-D (the
full-size voice's stages have 256, 128, 64, 32 and 16). Each variant is called against the
1-D graph in alternation on ONNX Runtime with the engine's session options, ``--pairs``
times at each length (seeded inputs, trims at their zero default), and the median times,
their ratio and the largest difference of the samples are printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

THRESHOLDS = (16, 32, 64, 128)


def variants(decoder: Path, folder: Path) -> dict[int, Path]:
    import onnx

    from yomiage.export.decoder_layout import stages_as_2d

    out = {}
    for threshold in THRESHOLDS:
        model = onnx.load(str(decoder))  # weights in memory: each variant gets its own file
        if any(t.name.startswith("/stages_2d/") for t in model.graph.initializer):
            raise SystemExit(f"{decoder} is 2-D already: give a bundle converted before it")
        convs = stages_as_2d(model, min_channels=threshold)
        path = folder / f"decoder_{threshold}.onnx"
        onnx.save(model, str(path), save_as_external_data=True, location=f"{path.name}.data")
        print(f"stages of >= {threshold} channels: {convs} convolutions in 2-D", flush=True)
        out[threshold] = path
    return out


def session(path: Path, threads: int) -> Any:
    from yomiage.runtime.engines.onnx_session import load_session, session_options

    return load_session(path, session_options(threads))


def feeds(frames: int, inputs: frozenset[str]) -> dict[str, np.ndarray]:
    """``inputs``: the graph's, which name the speaker as ``g`` or (speaker tables) ``sid``."""
    rng = np.random.default_rng(frames)
    out = {"z": (rng.standard_normal((1, 192, frames)) * 0.7).astype(np.float32)}
    if "g" in inputs:
        out["g"] = (rng.standard_normal((1, 512, 1)) * 0.7).astype(np.float32)
    else:
        out["sid"] = np.zeros(1, np.int64)
    return out


def timed(s: Any, inputs: dict[str, np.ndarray]) -> float:
    start = time.perf_counter()
    s.run(None, inputs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--frames", type=int, nargs="+", default=[23, 62, 286])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import onnxruntime as ort

    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} logical "
        f"CPUs, ONNX Runtime {ort.__version__}, {args.threads} threads"
    )
    with tempfile.TemporaryDirectory() as tmp:
        paths = variants(args.bundle / "decoder.onnx", Path(tmp))
        plain = session(args.bundle / "decoder.onnx", args.threads)
        print("| 2-D from | frames | 1-D ms | 2-D ms | speed-up | max difference |")
        print("| --- | --- | --- | --- | --- | --- |")
        for threshold, path in paths.items():
            rewritten = session(path, args.threads)
            for frames in args.frames:
                inputs = feeds(frames, frozenset(i.name for i in plain.get_inputs()))
                expected = plain.run(None, inputs)[0]
                diff = float(np.abs(rewritten.run(None, inputs)[0] - expected).max())
                before, after = [], []
                for _ in range(args.pairs):
                    before.append(timed(plain, inputs))
                    after.append(timed(rewritten, inputs))
                b, a = statistics.median(before), statistics.median(after)
                print(
                    f"| {threshold} channels | {frames} | {b * 1e3:.0f} | {a * 1e3:.0f} | "
                    f"{b / a:.2f}x | {diff:.1e} |",
                    flush=True,
                )
            del rewritten


if __name__ == "__main__":
    main()
