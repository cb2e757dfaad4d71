"""An AIVMX voice against the bundle converted from the same SBV2 voice: same speed?

Run: .venv/bin/python benchmarks/aivmx.py --aivmx FULL.aivmx --bundle BUNDLE [--bert DIR]

FULL.aivmx: ``../shared/peers/make_aivmx.py`` of the peers' full-size synthetic voice;
BUNDLE: ``yomiage convert`` of the same voice (``../shared/peers/README.md``), whose
``bert/`` both use unless ``--bert`` is given. First the one-time cut of the AIVMX
file into the cache is timed (a fresh cache), then each (voice, text) runs in a fresh
process, alternating, ``--repeats`` times: load, one warm-up, the median of three
``generate`` calls, the first chunk of ``stream``, peak RSS. Defaults of the engine
(decoder bf16 on OpenVINO where the CPU has it); ``--decoder fp32`` for float32.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_stages import TEXTS  # noqa: E402

THREADS = 2


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(source: str, text_id: str, bert: str, cache: str, decoder: str) -> dict[str, Any]:
    from yomiage import TTS

    started = time.perf_counter()
    tts = TTS(threads=THREADS, cache_dir=cache, bert_source=bert, decoder_precision=decoder)
    speaker = tts.load("v", source=source).prepare().speakers["v"]
    load = time.perf_counter() - started
    text = TEXTS[text_id]
    audio = speaker.generate(text, seed=0)  # warm-up
    walls = []
    for _ in range(3):
        t = time.perf_counter()
        speaker.generate(text, seed=0)
        walls.append(time.perf_counter() - t)
    t = time.perf_counter()
    chunks = speaker.stream(text, seed=0)
    next(chunks)
    first = time.perf_counter() - t
    chunks.close()
    return {"load": load, "audio": audio.duration, "wall": statistics.median(walls),
            "first": first, "rss": peak_rss_mb(), "runtime": speaker.runtime}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--aivmx", type=Path, required=True)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--bert", type=Path, help="BERT folder (default: BUNDLE/bert)")
    parser.add_argument("--texts", default="short,medium,long")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--decoder", default="auto")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    bert = str(args.bert or args.bundle / "bert")
    cache = tempfile.mkdtemp(prefix="yomiage-aivmx-bench-")

    def run(source: str, text: str) -> dict[str, Any]:
        cmd = [sys.executable, __file__, "--aivmx", str(args.aivmx), "--bundle", str(args.bundle),
               "--child", source, text, bert, cache, args.decoder]  # fmt: skip
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return dict(json.loads(out.strip().splitlines()[-1]))

    print(f"machine: {platform.machine()} {platform.processor()}, {THREADS} threads, "
          f"decoder {args.decoder}")  # fmt: skip
    texts = args.texts.split(",")
    cold = run(str(args.aivmx), texts[0])
    print(f"first load of the AIVMX file (cut into the cache): {cold['load']:.1f} s; "
          f"later loads: see the table")  # fmt: skip
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.repeats):
        for text in texts:
            for kind, source in (("bundle", str(args.bundle)), ("aivmx", str(args.aivmx))):
                results.setdefault((kind, text), []).append(run(source, text))
    print()
    print("| text | audio s | speed x real time: bundle / AIVMX (ratio) | first audio s "
          "| load s | peak RSS MB |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for text in texts:
        b, a = (results[(k, text)] for k in ("bundle", "aivmx"))

        def med(rows: list[dict[str, Any]], key: str) -> float:
            return statistics.median(r[key] for r in rows)

        speed_b = med(b, "audio") / med(b, "wall")
        speed_a = med(a, "audio") / med(a, "wall")
        print(f"| {text} | {med(b, 'audio'):.2f} / {med(a, 'audio'):.2f} | {speed_b:.2f} / "
              f"{speed_a:.2f} ({speed_a / speed_b:.2f}x) | {med(b, 'first'):.2f} / "
              f"{med(a, 'first'):.2f} | {med(b, 'load'):.2f} / {med(a, 'load'):.2f} | "
              f"{med(b, 'rss'):.0f} / {med(a, 'rss'):.0f} |")  # fmt: skip
    print(f"\nruntime: {results[('aivmx', texts[0])][0]['runtime']}")


if __name__ == "__main__":
    main()
