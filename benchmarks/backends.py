"""Backends side by side on full-size synthetic models: PyTorch FP32 (baseline),
ONNX Runtime with FP32 BERT, and ONNX Runtime with q8 BERT.

Run: .venv/bin/python benchmarks/backends.py [--threads 2] [--window 64]

Needs the models of benchmarks/torch_stages.py and their bundle:
    yomiage convert benchmarks/.cache/voice-full-0 benchmarks/.cache/bundle-full-0 \\
        --bert benchmarks/.cache/bert-full-0
Each (configuration, text) runs in a fresh process: load (timed), one warm-up
sentence, then the text once. Time to first audio is when the first decoder
window of the first sentence is ready (ONNX only: the torch backend decodes
whole sentences). Ratios are against the PyTorch run of the same text in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_stages import CACHE, TEXTS  # noqa: E402

CONFIGS = ("torch-fp32", "onnx-fp32", "onnx-q8")


def child(config: str, text_id: str, threads: int, window: int) -> dict[str, float]:
    t0 = time.perf_counter()
    from yomiage.runtime import SynthesisOptions
    from yomiage.text import Frontend, UserDictionary

    frontend = Frontend(UserDictionary(None))
    if config.startswith("torch"):
        from yomiage.runtime.torch_backend import TorchBackend

        backend: object = TorchBackend(CACHE / "bert-full-0", threads=threads)
        backend.add_voice("v", CACHE / "voice-full-0")  # type: ignore[attr-defined]
    else:
        from yomiage.runtime.onnx_backend import OnnxBackend

        bundle = CACHE / "bundle-full-0"
        precision = config.split("-")[1]
        backend = OnnxBackend(
            bundle / "bert", precision=precision, threads=threads, window_frames=window
        )
        backend.add_voice("v", bundle)  # type: ignore[attr-defined]
    load = time.perf_counter() - t0
    b: object = backend
    options = SynthesisOptions(seed=0)

    def run(text: str) -> dict[str, float]:
        start = time.perf_counter()
        first = None
        sentences = [frontend.g2p(s) for s in frontend.split_sentences(text) if s.strip()]
        rng = b.new_rng(0)  # type: ignore[attr-defined]
        encoded = b.encode("v", sentences, options, rng)  # type: ignore[attr-defined]
        samples = 0
        for e in encoded:
            if hasattr(b, "decode_windows"):
                for piece in b.decode_windows("v", e, options, rng):
                    first = first or time.perf_counter() - start
                    samples += len(piece)
            else:
                samples += len(b.decode("v", e, options, rng))  # type: ignore[attr-defined]
                first = first or time.perf_counter() - start
        wall = time.perf_counter() - start
        return {"wall": wall, "first": first or wall, "audio": samples / 44100}

    run("ウォームアップです。")
    result = run(TEXTS[text_id])
    result["load"] = load
    result["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--texts", default=",".join(TEXTS))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.threads, args.window)))
        return
    results: dict[tuple[str, str], dict[str, float]] = {}
    for text_id in args.texts.split(","):
        for config in args.configs.split(","):
            cmd = [sys.executable, __file__, "--child", config, text_id]
            cmd += ["--threads", str(args.threads), "--window", str(args.window)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            results[config, text_id] = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python "
        f"{platform.python_version()}, {args.threads} threads, decoder window {args.window} frames"
    )
    print()
    print(
        "| config | text | audio s | wall s | speed factor | vs torch | first audio s "
        "| load s | peak RSS MB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for text_id in args.texts.split(","):
        base = results.get(("torch-fp32", text_id))
        for config in args.configs.split(","):
            r = results[config, text_id]
            speed = r["audio"] / r["wall"]
            ratio = f"{speed / (base['audio'] / base['wall']):.2f}x" if base else "-"
            print(
                f"| {config} | {text_id} | {r['audio']:.2f} | {r['wall']:.2f} | {speed:.2f}x "
                f"| {ratio} | {r['first']:.2f} | {r['load']:.1f} | {r['rss']:.0f} |"
            )


if __name__ == "__main__":
    main()
