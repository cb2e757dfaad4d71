"""The CUDA path against the CPU paths, through the public API, in one run.

Run: python benchmarks/cuda.py [--threads N] [--texts short,medium] [--configs cuda,torch-cpu]

Models: the full-size synthetic SBV2 voice and DeBERTa-v2-large-shaped BERT of
benchmarks/torch_stages.py (made once under benchmarks/.cache), and for the ONNX
configuration their bundle (benchmarks/.cache/bundle-full-0, made here with
``yomiage convert --quantize q8`` if it is missing). ``--size tiny`` runs the
same program on the tiny synthetic models (a smoke test on any machine).

Configurations, each (configuration, text) in a fresh process:

* ``torch-cpu``: ``TTS(device="cpu", backend="torch")``, float32 (the baseline
  of the ratios);
* ``onnx-cpu``: ``TTS(device="cpu")`` on the bundle, q8 BERT, float32 decoder
  on ONNX Runtime (``decoder_precision="fp32"``);
* ``cuda``: ``TTS(device="cuda")`` as the library sets it up (since
  2026-11-23 the backend turns cuDNN's TF32 off; the RESULTS.md table of that
  day measured the code before, with PyTorch's default TF32 convolutions);
* ``cuda-strict``: the same with ``torch.backends.cudnn.allow_tf32 = False``
  set after ``prepare()`` (true float32 convolutions whatever the library does);
* ``cuda-compile``: ``prepare(compile=True)`` (``torch.compile`` of the BERT;
  the synthesizer stays eager). The processes share one fresh Inductor cache
  folder, so the first text's process compiles from scratch and the later ones
  find the compiled kernels on disk.

On the H100 machine of 2026-11-23 the whole run took about 12 minutes (most of
it the compile configuration and PyTorch's 12-17 s imports and loads); split it
with ``--configs`` and ``--texts`` where a call's time is limited.

Each process: import + ``prepare()`` (timed as "prepare"), the text once cold
(the first call: CUDA kernels load, compile runs), then ``--repeats`` warm
streams (median wall; first chunk = from the call to the first chunk), then the
text once with noise off, whose audio is compared with ``torch-cpu``'s (SNR;
the same function on another device, so only rounding differs). Also, per
device, BERT alone on the xlong text's sentences: one batched call against one
call per sentence. Prints Markdown for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_stages import CACHE, TEXTS  # noqa: E402

CONFIGS = ("torch-cpu", "onnx-cpu", "cuda", "cuda-strict", "cuda-compile")
BASELINE = "torch-cpu"


def models(size: str) -> tuple[Path, Path, Path]:
    """The SBV2 voice, its BERT and their ONNX bundle, made once under the cache."""
    from yomiage.devtools.synthetic import make_bert, make_voice

    voice, bert = CACHE / f"voice-{size}-0", CACHE / f"bert-{size}-0"
    bundle = CACHE / f"bundle-{size}-0"
    if not (voice / "config.json").exists():
        make_voice(voice, size, 0)
    if not (bert / "config.json").exists():
        make_bert(bert, size, 0)
    return voice, bert, bundle


def make_bundle(voice: Path, bert: Path, bundle: Path) -> None:
    if (bundle / "voice.json").exists() and (bundle / "bert" / "bert_q8.onnx").exists():
        return
    cmd = [sys.executable, "-m", "yomiage", "convert", str(voice), str(bundle)]
    subprocess.run([*cmd, "--bert", str(bert), "--quantize", "q8"], check=True)


def _engine(config: str, size: str, threads: int) -> Any:
    from yomiage import TTS

    voice, bert, bundle = models(size)
    if config == "onnx-cpu":
        tts = TTS(threads=threads, bert_source=bundle / "bert", decoder_precision="fp32")
        return tts.load("v", source=bundle).prepare()
    device = "cpu" if config == "torch-cpu" else "cuda"
    tts = TTS(device=device, backend="torch", bert_source=bert, threads=threads)
    return tts.load("v", source=voice).prepare(compile=config == "cuda-compile")


def child_text(config: str, text_id: str, size: str, threads: int, repeats: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    torch: Any = None
    if config != "onnx-cpu":
        import torch
    tts = _engine(config, size, threads)
    if config == "cuda-strict":
        torch.backends.cudnn.allow_tf32 = False  # read at every convolution
    speaker = tts.speakers["v"]
    prepare = time.perf_counter() - t0
    on_gpu = config.startswith("cuda")

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    def stream(**options: Any) -> dict[str, Any]:
        sync()
        start = time.perf_counter()
        first = None
        pieces = []
        for chunk in speaker.stream(TEXTS[text_id], **options):
            first = first if first is not None else time.perf_counter() - start
            pieces.append(chunk.samples)
        wall = time.perf_counter() - start
        samples = np.concatenate(pieces)
        return {"first": first or wall, "wall": wall, "samples": samples}

    cold = stream(seed=0)
    warm = [stream(seed=0) for _ in range(repeats)]
    quiet = stream(seed=0, noise=0.0, noise_w=0.0)
    out_dir = Path(os.environ["YOMIAGE_BENCH_OUT"])
    np.save(out_dir / f"{config}-{text_id}.npy", quiet["samples"])
    result: dict[str, Any] = {
        "prepare": prepare,
        "cold_first": cold["first"],
        "cold_wall": cold["wall"],
        "first": statistics.median(w["first"] for w in warm),
        "wall": statistics.median(w["wall"] for w in warm),
        "audio": len(warm[0]["samples"]) / speaker.sample_rate,
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "runtime": speaker.runtime,
        "torch_threads": torch.get_num_threads() if torch is not None else None,
    }
    if on_gpu:
        result["gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
        result["gpu_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
    if config == "cuda-compile":
        try:
            from torch._dynamo.utils import counters

            result["graphs"] = int(counters["stats"]["unique_graphs"])
        except Exception:  # private API: the count is a bonus
            result["graphs"] = None
    return result


def child_bert(device: str, size: str, threads: int, repeats: int) -> dict[str, Any]:
    """BERT alone on the xlong text's sentences: batched against one by one, and
    on CUDA the same after torch.compile."""
    import torch

    from yomiage.runtime.torch_backend import TorchBackend
    from yomiage.text import Frontend, UserDictionary

    _, bert, _ = models(size)
    frontend = Frontend(UserDictionary(None))
    sentences = [frontend.g2p(s) for s in frontend.split_sentences(TEXTS["xlong"]) if s.strip()]
    backend = TorchBackend(bert, device=device, threads=threads)

    def timed(fn: Any) -> float:
        times = []
        for _ in range(repeats + 1):  # the first is a warm-up
            if device == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return statistics.median(times[1:])

    def batched() -> None:
        backend.bert_features(sentences)

    def one_by_one() -> None:
        for s in sentences:
            backend.bert_features([s])

    result = {
        "sentences": len(sentences),
        "tokens": [len(s.bert_text) + 2 for s in sentences],
        "batched": timed(batched),
        "one_by_one": timed(one_by_one),
    }
    if device == "cuda":
        t = time.perf_counter()
        backend.compile()
        batched()
        one_by_one()
        torch.cuda.synchronize()
        result["compile_s"] = time.perf_counter() - t
        result["compiled_batched"] = timed(batched)
        result["compiled_one_by_one"] = timed(one_by_one)
    return result


def _child(args: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--child", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        print(f"{' '.join(args)} failed:\n{proc.stderr.strip()[-2000:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{' '.join(args[:2])}: {json.dumps(result)}", file=sys.stderr, flush=True)
    return result


def snr_db(reference: np.ndarray, other: np.ndarray) -> str:
    if len(reference) != len(other):
        return f"lengths differ ({len(other)} vs {len(reference)})"
    noise = float(np.sum((reference.astype(np.float64) - other) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    return "exact" if noise == 0 else f"{10 * np.log10(signal / noise):.1f}"


def describe_machine(threads: int) -> str:
    parts = [f"{platform.machine()}, {os.cpu_count()} logical CPUs"]
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        parts.append(model)
    except (OSError, StopIteration):
        pass
    from yomiage.runtime.engines.cpu import physical_cores

    parts.append(f"{physical_cores()} physical cores seen, {threads} threads")
    parts.append(f"Python {platform.python_version()}")
    try:
        import onnxruntime
        import torch

        parts.append(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}")
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            parts.append(
                f"GPU {p.name} ({p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs),"
                f" CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
            )
    except ImportError:
        pass
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="default: physical cores")
    parser.add_argument("--size", choices=["full", "tiny"], default="full")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--texts", default=",".join(TEXTS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-bert", action="store_true", help="skip the BERT batching rows")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads is None:
        from yomiage.runtime.engines.cpu import physical_cores

        args.threads = physical_cores()
    if args.child:
        kind, *rest = args.child
        if kind == "bert":
            result = child_bert(rest[0], args.size, args.threads, args.repeats)
        else:
            result = child_text(kind, rest[0], args.size, args.threads, args.repeats)
        print(json.dumps(result))
        return

    configs = args.configs.split(",")
    texts = args.texts.split(",")
    voice, bert, bundle = models(args.size)
    if "onnx-cpu" in configs:
        make_bundle(voice, bert, bundle)
    out = Path(tempfile.mkdtemp(prefix="yomiage-cuda-bench-"))
    env = dict(os.environ, YOMIAGE_BENCH_OUT=str(out))
    env["TORCHINDUCTOR_CACHE_DIR"] = str(out / "inductor")  # fresh: the first compile is cold
    common = ["--size", args.size, "--threads", str(args.threads), "--repeats", str(args.repeats)]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for text_id in texts:
        for config in configs:
            r = _child([config, text_id, *common], env)
            if r is not None:
                rows[config, text_id] = r
    print(f"machine: {describe_machine(args.threads)}")
    print(f"models: {args.size}-size synthetic voice and BERT; warm = median of {args.repeats}")
    print()
    print(
        "| config | text | audio s | prepare s | cold: first chunk s, wall s | first chunk s "
        "| wall s | speed factor | vs torch-cpu | SNR vs torch-cpu dB | peak RSS MB "
        "| GPU peak MB |"
    )
    print("| --- " * 12 + "|")
    for text_id in texts:
        base = rows.get((BASELINE, text_id))
        for config in configs:
            r = rows.get((config, text_id))
            if r is None:
                print(f"| {config} | {text_id} | failed |" + " |" * 9)
                continue
            speed = r["audio"] / r["wall"]
            ratio = f"{speed / (base['audio'] / base['wall']):.2f}x" if base else "-"
            snr = "-"
            if base and config != BASELINE:
                ref = np.load(out / f"{BASELINE}-{text_id}.npy")
                snr = snr_db(ref, np.load(out / f"{config}-{text_id}.npy"))
            gpu = f"{r['gpu_mb']:.0f}" if "gpu_mb" in r else "-"
            print(
                f"| {config} | {text_id} | {r['audio']:.2f} | {r['prepare']:.1f} "
                f"| {r['cold_first']:.3f}, {r['cold_wall']:.2f} | {r['first']:.3f} "
                f"| {r['wall']:.3f} | {speed:.1f}x | {ratio} | {snr} | {r['rss']:.0f} | {gpu} |"
            )
    print()
    print("runtimes: " + ", ".join(sorted({f"{c}: {r['runtime']}" for (c, _), r in rows.items()})))
    graphs = [r.get("graphs") for (c, _), r in rows.items() if c == "cuda-compile"]
    if graphs:
        print(f"cuda-compile: Dynamo graphs compiled per process: {graphs}")
    if args.no_bert:
        return
    print()
    print("| BERT on | sentences (tokens) | batched s | one by one s | batching gain "
          "| compiled: batched s, one by one s (compile s) |")  # fmt: skip
    print("| --- " * 6 + "|")
    devices = ["cpu"] + (["cuda"] if any(c.startswith("cuda") for c in configs) else [])
    for device in devices:
        b = _child(["bert", device, *common], env)
        if b is None:
            continue
        compiled = "-"
        if "compile_s" in b:
            compiled = (
                f"{b['compiled_batched']:.4f}, {b['compiled_one_by_one']:.4f} "
                f"({b['compile_s']:.1f})"
            )
        print(
            f"| {device} | {b['sentences']} ({', '.join(map(str, b['tokens']))}) "
            f"| {b['batched']:.4f} | {b['one_by_one']:.4f} "
            f"| {b['one_by_one'] / b['batched']:.2f}x | {compiled} |"
        )


if __name__ == "__main__":
    main()
