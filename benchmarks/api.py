"""The public API end to end on the full-size synthetic voice (q8 BERT).

Run: .venv/bin/python benchmarks/api.py [--threads 2] [--decoder auto|fp32|bf16|int8]

Needs the bundles of benchmarks/backends.py (benchmarks/.cache/bundle-full-0 with
its BERT bundle inside; bundle-full-0-int8 for ``--decoder int8``). Each
measurement runs in a fresh process:

* per text: ``TTS(...).load(...).prepare()`` (timed), one warm-up call, then
  ``Speaker.stream(text)``: time to the first chunk, wall time, speed factor
  (audio s / wall s), peak RSS;
* concurrency: the same process runs the medium text 4 times one after the
  other (single-stream speed factor), then 4 threads generating it at once
  (aggregate speed factor = audio of all four / wall time, and each request's
  latency);
* voices: peak RSS with 1, 2 and 3 full-size voices loaded, each used once.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_stages import CACHE, TEXTS  # noqa: E402

BUNDLE = CACHE / "bundle-full-0"


def _engine(threads: int, decoder: str) -> tuple[object, float]:
    from yomiage import TTS

    start = time.perf_counter()
    voice = CACHE / "bundle-full-0-int8" if decoder == "int8" else BUNDLE
    tts = TTS(threads=threads, bert_source=BUNDLE / "bert", decoder_precision=decoder)
    tts.load("v", source=voice).prepare()
    return tts, time.perf_counter() - start


def child_text(text_id: str, threads: int, decoder: str, quick: bool) -> dict[str, float]:
    tts, load = _engine(threads, decoder)
    speaker = tts.speakers["v"]  # type: ignore[attr-defined]
    speaker.generate("ウォームアップです。", seed=0)
    start = time.perf_counter()
    first = None
    samples = 0
    for chunk in speaker.stream(TEXTS[text_id], seed=0, quick_start=quick):
        first = first if first is not None else time.perf_counter() - start
        samples += len(chunk.samples)
    wall = time.perf_counter() - start
    return {
        "load": load,
        "first": first or wall,
        "wall": wall,
        "audio": samples / speaker.sample_rate,
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child_concurrency(threads: int, decoder: str, requests: int = 4) -> dict[str, object]:
    tts, _ = _engine(threads, decoder)
    speaker = tts.speakers["v"]  # type: ignore[attr-defined]
    text = TEXTS["medium"]
    speaker.generate("ウォームアップです。", seed=0)
    start = time.perf_counter()
    audio = sum(speaker.generate(text, seed=i).duration for i in range(requests))
    sequential = audio / (time.perf_counter() - start)
    latencies: list[float] = [0.0] * requests
    errors: list[str] = []
    barrier = threading.Barrier(requests + 1)

    def run(i: int) -> None:
        barrier.wait()
        t0 = time.perf_counter()
        try:
            speaker.generate(text, seed=i)
        except Exception as exc:  # reported, not raised: the benchmark counts errors
            errors.append(repr(exc))
        latencies[i] = time.perf_counter() - t0

    workers = [threading.Thread(target=run, args=(i,)) for i in range(requests)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    return {
        "sequential": sequential,
        "aggregate": audio / wall,
        "latencies": sorted(latencies),
        "errors": errors,
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child_voices(threads: int, decoder: str, count: int) -> dict[str, object]:
    """Peak RSS with ``count`` voices loaded (the same bundle under several names:
    each gets its own sessions, as distinct voices would) and each used once."""
    from yomiage import TTS

    voice = CACHE / "bundle-full-0-int8" if decoder == "int8" else BUNDLE
    tts = TTS(threads=threads, bert_source=BUNDLE / "bert", decoder_precision=decoder)
    for i in range(count):
        tts.load(f"v{i}", source=voice)
    tts.prepare()
    for i in range(count):
        tts.speakers[f"v{i}"].generate(TEXTS["medium"], seed=i)
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return {
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "now": pages * os.sysconf("SC_PAGE_SIZE") / 2**20,
    }


def _child(args: list[str]) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--child", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--texts", default=",".join(TEXTS))
    parser.add_argument("--decoder", choices=["auto", "fp32", "bf16", "int8"], default="auto")
    parser.add_argument("--quick-start", action="store_true", help="stream with quick_start=True")
    parser.add_argument("--only-texts", action="store_true", help="skip voices and concurrency")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child[0] == "voices":
            print(json.dumps(child_voices(int(args.child[1]), args.child[2], int(args.child[3]))))
        elif args.child[0] == "concurrency":
            print(json.dumps(child_concurrency(int(args.child[1]), args.child[2])))
        else:
            quick = args.child[3] == "quick"
            print(json.dumps(child_text(args.child[0], int(args.child[1]), args.child[2], quick)))
        return
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python "
        f"{platform.python_version()}, {args.threads} intra-op threads, q8 BERT, "
        f"{args.decoder} decoder, quick_start={args.quick_start}"
    )
    print()
    print("| text | audio s | first chunk s | wall s | speed factor | prepare s | peak RSS MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for text_id in args.texts.split(","):
        r = _child([text_id, str(args.threads), args.decoder, "quick" if args.quick_start else "-"])
        a, w = float(r["audio"]), float(r["wall"])  # type: ignore[arg-type]
        print(
            f"| {text_id} | {a:.2f} | {r['first']:.3f} | {w:.2f} | {a / w:.2f}x "
            f"| {r['load']:.2f} | {r['rss']:.0f} |"
        )
    if args.only_texts:
        return
    voices = [_child(["voices", str(args.threads), args.decoder, str(n)]) for n in (1, 2, 3)]
    rss = [float(v["rss"]) for v in voices]  # type: ignore[arg-type]
    now = [float(v["now"]) for v in voices]  # type: ignore[arg-type]
    c = _child(["concurrency", str(args.threads), args.decoder])
    lat = ", ".join(f"{x:.2f}" for x in c["latencies"])  # type: ignore[attr-defined]
    agg, seq = float(c["aggregate"]), float(c["sequential"])  # type: ignore[arg-type]
    print()
    print(
        f"4 threads x medium text: aggregate {agg:.2f}x vs {seq:.2f}x one at a time "
        f"({100 * agg / seq:.0f}%), latencies {lat} s, errors {len(c['errors'])}, "  # type: ignore[arg-type]
        f"peak RSS {c['rss']:.0f} MB"
    )
    print(
        f"voices loaded and used once each (medium text), peak RSS: 1: {rss[0]:.0f} MB, "
        f"2: {rss[1]:.0f} MB (+{rss[1] - rss[0]:.0f}), "
        f"3: {rss[2]:.0f} MB (+{rss[2] - rss[1]:.0f}); "
        f"RSS afterwards: {now[0]:.0f}, {now[1]:.0f} (+{now[1] - now[0]:.0f}), "
        f"{now[2]:.0f} (+{now[2] - now[1]:.0f}) MB"
    )


if __name__ == "__main__":
    main()
