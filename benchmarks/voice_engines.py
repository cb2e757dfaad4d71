"""Which engine decodes each voice faster: the measurements behind the per-voice rule
of ``runtime/engines/placement.py`` (issue 22 item 14).

Run: .venv/bin/python benchmarks/voice_engines.py [--full DIR] [--repeats 3]

Two parts, every configuration in a fresh process, interleaved rounds, medians:

* decoder: each voice's ``decoder.onnx`` on ONNX Runtime float32 and on OpenVINO
  bfloat16, through :class:`yomiage.runtime.engines.sessions.Sessions` as the runtime opens
  it: load s, ms per frame over a padded 128- and 286-frame window (2 warm-ups,
  median of 5), memory the process gained;
* end to end, for the voices with a BERT of their own (the committed tiny voice):
  ``TTS(...).load(...).prepare()``, one warm-up, then a two-sentence text: speed
  factor (audio s / wall s) and peak RSS, for ``decoder_precision`` fp32 on ONNX
  Runtime (``YOMIAGE_OPENVINO=0``), bf16 forced, and the default (``auto``).

``--full`` is a full-size bundle (``yomiage dev make-voice --size full V`` then
``yomiage convert V DIR --quantize none``); without it only the tiny voice runs.
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
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "data" / "voices" / "tiny"
THREADS = 2
WINDOWS = (128, 286)
TEXT = "今日はいい天気ですね。散歩に行きましょう、公園の桜がきれいに咲いています。"
DECODERS = ("onnxruntime f32", "openvino bf16")
END_TO_END = {"ort fp32 (YOMIAGE_OPENVINO=0)": ("fp32", "0"), "openvino bf16": ("bf16", "1"),
              "default (auto)": ("auto", "1")}  # fmt: skip


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def decoder_child(bundle: Path, engine_precision: str) -> dict[str, float]:
    from yomiage.runtime.engines.placement import Placement
    from yomiage.runtime.engines.sessions import Sessions, probe_speaker

    engine, precision = engine_precision.split()
    placement = Placement(engine, precision)  # type: ignore[arg-type]
    base = rss_mb()
    start = time.perf_counter()
    session = Sessions(THREADS, openvino=engine == "openvino").open(
        bundle / "decoder.onnx", placement
    )
    if session.placement != placement:
        raise SystemExit(f"the decoder did not load on {engine_precision}")
    out: dict[str, float] = {"load": time.perf_counter() - start}
    rng = np.random.default_rng(0)
    channels = session.input_shape("z")[1]
    assert isinstance(channels, int)
    speaker = probe_speaker(session, rng)
    for frames in WINDOWS:
        feeds = {"z": rng.standard_normal((1, channels, frames), np.float32), **speaker}
        for _ in range(2):
            session.run(feeds)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            session.run(feeds)
            times.append(time.perf_counter() - t)
        out[f"ms_{frames}"] = 1000 * statistics.median(times) / frames
    out["rss"] = rss_mb() - base
    return out


def api_child(bundle: Path, precision: str) -> dict[str, float]:
    from yomiage import TTS

    tts = TTS(threads=THREADS, decoder_precision=precision, bert_source=bundle / "bert")
    tts.load("voice", source=bundle).prepare()
    speaker = tts.speakers["voice"]
    speaker.generate("こんにちは。", seed=0)
    start = time.perf_counter()
    audio = speaker.generate(TEXT, seed=0)
    wall = time.perf_counter() - start
    seconds = len(audio.samples) / audio.sample_rate
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"speed": seconds / wall, "peak": peak, "runtime": speaker.runtime}  # type: ignore[dict-item]


def run_child(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--child", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        print(f"{args} failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--full", type=Path, help="a full-size bundle")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, bundle, config = args.child
        child = decoder_child if kind == "decoder" else api_child
        print(json.dumps(child(Path(bundle), config)))
        return
    voices = {"tiny": TINY, **({"full": args.full} if args.full else {})}
    decoders: dict[tuple[str, str], list[dict[str, Any]]] = {}
    apis: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.repeats):
        for voice, bundle in voices.items():
            for config in DECODERS:
                row = run_child(["decoder", str(bundle), config])
                decoders.setdefault((voice, config), []).extend([row] if row else [])
        for label, (precision, openvino) in END_TO_END.items():
            env = {**os.environ, "YOMIAGE_OPENVINO": openvino}
            row = run_child(["api", str(TINY), precision], env)
            apis.setdefault(label, []).extend([row] if row else [])
    print(f"machine: {platform.machine()}, {THREADS} threads; median of {args.repeats} "
          "fresh processes")  # fmt: skip
    print()
    print("| voice | decoder weights MB | engine | load s | ms/frame @128 | ms/frame @286 | MB |")
    print("| --- " * 7 + "|")
    for (voice, config), rows in decoders.items():
        if not rows:
            continue
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        bundle = voices[voice]
        weights = sum(p.stat().st_size for p in bundle.glob("decoder.onnx*")) / 1e6
        print(f"| {voice} | {weights:.1f} | {config} | {m['load']:.2f} | {m['ms_128']:.3f} "
              f"| {m['ms_286']:.3f} | {m['rss']:.0f} |")  # fmt: skip
    print()
    print("| tiny voice, end to end | runs on | speed factor | peak RSS MB |")
    print("| --- | --- | --- | --- |")
    for label, rows in apis.items():
        if rows:
            speed = statistics.median(r["speed"] for r in rows)
            peak = statistics.median(r["peak"] for r in rows)
            print(f"| {label} | {rows[0]['runtime']} | {speed:.2f}x | {peak:.0f} |")


if __name__ == "__main__":
    main()
