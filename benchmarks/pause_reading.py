"""Pauses from the sentences' own BERT features against SBV2's second whole-text pass (issue 24).

Run: .venv/bin/python benchmarks/pause_reading.py BUNDLE [--texts 200] [--threads 2]

BUNDLE is a full-size bundle (``yomiage convert``). Two measurements:

1. The difference: JSUT sentences (``../shared/fixtures/jsut/``) joined two to four at a
   time into paragraphs, each streamed with both ways of predicting the pauses (same
   engine, same process: the audio of each sentence is the same either way, so only the
   gaps can differ); the gap before every sentence after the first is compared, in
   frames of the voice's hop.
2. The time: the peers' medium, long and xlong texts generated in a fresh process per
   way (median of 3 after a warm-up), so the saved second BERT pass shows end to end.
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

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared"
SETTINGS: dict[str, Any] = {"sdp_ratio": 0.2, "noise": 0.0, "noise_w": 0.0, "seed": 0}


def _engine(bundle: Path, threads: int, exact: bool) -> Any:
    from yomiage import TTS

    tts = TTS(threads=threads).load("voice", source=f"file://{bundle}").prepare()
    # The engine picks the exact way only with reading="sbv2"; here both ways read
    # the text the same (natural) way, so the one switch is set on its pipeline.
    tts._pipeline.exact_pauses = exact
    return tts


def _gaps(speaker: Any, text: str, hop: int) -> list[float]:
    """Frames of silence inserted before each sentence after the first."""
    gaps = []
    seen = set()
    for chunk in speaker.stream(text, **SETTINGS):
        if chunk.sentence in seen or chunk.sentence == 0:
            continue
        seen.add(chunk.sentence)
        start = chunk.timings.phonemes[0].start * chunk.sample_rate
        gaps.append((start - chunk.offset) / hop)
    return gaps


def _paragraphs(count: int) -> list[str]:
    sentences = [s["text"] for s in json.loads(
        (SHARED / "fixtures" / "jsut" / "basic5000_0001-2500.json").read_text())]  # fmt: skip
    out, i = [], 0
    while len(out) < count and i + 4 <= len(sentences):
        size = 2 + len(out) % 3
        out.append("".join(sentences[i : i + size]))
        i += size
    return out


def difference(bundle: Path, threads: int, count: int) -> None:
    joined_tts = _engine(bundle, threads, exact=False)
    exact_tts = _engine(bundle, threads, exact=True)
    joined, exact = joined_tts.speakers["voice"], exact_tts.speakers["voice"]
    hop = 512
    deltas: list[float] = []
    for text in _paragraphs(count):
        a, b = _gaps(joined, text, hop), _gaps(exact, text, hop)
        if len(a) == len(b):
            deltas.extend(x - y for x, y in zip(a, b, strict=True))
    absolute = sorted(abs(d) for d in deltas)
    n = len(absolute)
    print(f"{count} paragraphs, {n} pauses compared (frames of {hop} samples)")
    print("| same | within 1 frame | within 2 | mean abs | 95th pct | max |")
    print("| --- | --- | --- | --- | --- | --- |")
    same = sum(d < 1e-9 for d in absolute) / n
    one = sum(d <= 1 for d in absolute) / n
    two = sum(d <= 2 for d in absolute) / n
    print(f"| {same:.1%} | {one:.1%} | {two:.1%} | {statistics.fmean(absolute):.2f} | "
          f"{absolute[int(0.95 * (n - 1))]:.1f} | {absolute[-1]:.1f} |")  # fmt: skip


def timing_worker(bundle: Path, threads: int, exact: bool, key: str) -> None:
    sys.path.insert(0, str(SHARED / "peers"))
    from bench_peers import TEXTS  # type: ignore[import-not-found]

    speaker = _engine(bundle, threads, exact).speakers["voice"]
    speaker.generate(TEXTS[key], **SETTINGS)
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        audio = speaker.generate(TEXTS[key], **SETTINGS)
        walls.append(time.perf_counter() - start)
    print(json.dumps({"wall": statistics.median(walls), "audio": audio.duration}))


def timing(bundle: Path, threads: int) -> None:
    print("| text | whole-text BERT again (exact) | sentences' features joined | saved |")
    print("| --- | --- | --- | --- |")
    for key in ("medium", "long", "xlong"):
        walls = {}
        for exact in (True, False):
            out = subprocess.run(
                [sys.executable, __file__, str(bundle), "--threads", str(threads),
                 "--worker", key, *(["--exact"] if exact else [])],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            walls[exact] = json.loads(out.strip().splitlines()[-1])["wall"]
        saved = 1 - walls[False] / walls[True]
        print(f"| {key} | {walls[True]:.3f} s | {walls[False]:.3f} s | {saved:.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--exact", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        timing_worker(args.bundle, args.threads, args.exact, args.worker)
        return
    print(f"{platform.processor() or platform.machine()}, {args.threads} threads, {args.bundle}")
    difference(args.bundle, args.threads, args.texts)
    print()
    timing(args.bundle, args.threads)


if __name__ == "__main__":
    main()
