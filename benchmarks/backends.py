"""Backends side by side on full-size synthetic models: PyTorch FP32 (baseline),
then ONNX Runtime with FP32, q8 and q4 BERT (voice graphs FP32), and q8 BERT with
the opt-in int8 decoder.

Run: .venv/bin/python benchmarks/backends.py [--threads 2] [--window 128]

Needs the models of benchmarks/torch_stages.py and their bundle:
    yomiage convert benchmarks/.cache/voice-full-0 benchmarks/.cache/bundle-full-0 \\
        --bert benchmarks/.cache/bert-full-0 --quantize q8,q4
and, for onnx-q8-int8dec, the same voice converted with ``--decoder int8`` into
benchmarks/.cache/bundle-full-0-int8 (calibrated with the full-size BERT).
Each (configuration, text) runs in a fresh process: load (timed), one warm-up
sentence, then the text once. Time to first audio is when the first decoder
window of the first sentence is ready (ONNX only: the torch backend decodes
whole sentences). Ratios are against the PyTorch run of the same text in this run.
The stage columns split the wall time (frontend, BERT, encoder + durations,
flow + decoder); the decoder's achieved GFLOP/s (its multiply-adds counted from
the layer shapes) is set against float32 matrix multiply measured here with
numpy at the start of the run.
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
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_stages import CACHE, TEXTS  # noqa: E402

CONFIGS = ("torch-fp32", "onnx-fp32", "onnx-q8", "onnx-q4", "onnx-q8-int8dec")


def decoder_gflop_per_frame(voice_config: Path) -> float:
    """Floating-point operations (2 per multiply-add) of the generator per frame."""
    from yomiage.sbv2.config import load_config

    m = load_config(voice_config).model
    macs = m.inter_channels * m.upsample_initial_channel * 7  # conv_pre
    samples, ch = 1, m.upsample_initial_channel
    for rate, kernel in zip(m.upsample_rates, m.upsample_kernel_sizes, strict=True):
        macs += ch * (ch // 2) * kernel * samples  # transposed conv, per input sample
        samples, ch = samples * rate, ch // 2
        convs_per_dilation = 2 if m.resblock == "1" else 1
        for k, dilations in zip(m.resblock_kernel_sizes, m.resblock_dilation_sizes, strict=True):
            macs += ch * ch * k * len(dilations) * convs_per_dilation * samples
    macs += ch * 7 * samples  # conv_post
    return 2 * macs / 1e9


def sgemm_gflops(threads: int) -> float:
    """numpy float32 2048x2048 matrix multiply, best of 5, in a fresh process."""
    code = (
        "import time, numpy as np\n"
        "a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)\n"
        "a @ a\nbest = 1e9\n"
        "for _ in range(5):\n"
        "    t = time.perf_counter(); a @ a; best = min(best, time.perf_counter() - t)\n"
        "print(2 * 2048**3 / best / 1e9)\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return float(out.stdout.strip())


def child(config: str, text_id: str, threads: int, window: int) -> dict[str, float]:
    t0 = time.perf_counter()
    from yomiage.options import SynthesisOptions
    from yomiage.runtime.chunking import Windowing
    from yomiage.text import Frontend, UserDictionary

    frontend = Frontend(UserDictionary(None))
    if config.startswith("torch"):
        from yomiage.runtime.torch_backend import TorchBackend

        backend: Any = TorchBackend(CACHE / "bert-full-0", threads=threads)
        voice: Any = backend.load_voice(CACHE / "voice-full-0")
    else:
        from yomiage.runtime.onnx_backend import OnnxBackend
        from yomiage.runtime.plan.request import PlanRequest

        bundle = CACHE / "bundle-full-0"
        precision = config.split("-")[1]
        int8 = config.endswith("int8dec")
        backend = OnnxBackend(
            bundle / "bert",
            precision=precision,
            threads=threads,
            plan_request=PlanRequest(
                "int8" if int8 else "fp32", windowing=Windowing(window_frames=window)
            ),
        )
        voice = backend.load_voice(CACHE / "bundle-full-0-int8" if int8 else bundle)
    load = time.perf_counter() - t0
    b = backend
    options = SynthesisOptions(seed=0)

    def run(text: str) -> dict[str, float]:
        start = time.perf_counter()
        first = None
        sentences = [frontend.g2p(s) for s in frontend.split_sentences(text) if s.strip()]
        t_frontend = time.perf_counter()
        rng = b.new_rng(0)
        features = b.bert_features(sentences)
        t_bert = time.perf_counter()
        encoded = voice.encode(sentences, features, options, rng)
        t_encode = time.perf_counter()
        samples = frames = 0
        for e in encoded:
            frames += e.n_frames
            for piece in voice.decode_windows(e, options, rng):
                first = first or time.perf_counter() - start
                samples += len(piece)
        end = time.perf_counter()
        return {
            "wall": end - start,
            "first": first or end - start,
            "audio": samples / 44100,
            "frontend": t_frontend - start,
            "bert": t_bert - t_frontend,
            "encode": t_encode - t_bert,
            "decode": end - t_encode,
            "frames": frames,
        }

    run("ウォームアップです。")
    result = run(TEXTS[text_id])
    result["load"] = load
    result["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--texts", default=",".join(TEXTS))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.threads, args.window)))
        return
    sgemm = sgemm_gflops(args.threads)
    gflop_frame = decoder_gflop_per_frame(CACHE / "voice-full-0" / "config.json")
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
    print(
        f"numpy sgemm: {sgemm:.0f} GFLOP/s; decoder: {gflop_frame:.3f} GFLOP per frame "
        f"({gflop_frame * 44100 / 512:.1f} GFLOP per second of audio)"
    )
    print()
    print(
        "| config | text | audio s | wall s | speed factor | vs torch | first audio s "
        "| load s | peak RSS MB | frontend s | BERT s | encoder s | flow+decoder s "
        "| decoder GFLOP/s (% of sgemm) |"
    )
    print("| --- " * 14 + "|")
    for text_id in args.texts.split(","):
        base = results.get(("torch-fp32", text_id))
        for config in args.configs.split(","):
            r = results[config, text_id]
            speed = r["audio"] / r["wall"]
            ratio = f"{speed / (base['audio'] / base['wall']):.2f}x" if base else "-"
            rate = r["frames"] * gflop_frame / r["decode"]
            print(
                f"| {config} | {text_id} | {r['audio']:.2f} | {r['wall']:.2f} | {speed:.2f}x "
                f"| {ratio} | {r['first']:.2f} | {r['load']:.1f} | {r['rss']:.0f} "
                f"| {r['frontend']:.3f} | {r['bert']:.3f} | {r['encode']:.3f} "
                f"| {r['decode']:.2f} | {rate:.0f} ({100 * rate / sgemm:.0f}%) |"
            )


if __name__ == "__main__":
    main()
