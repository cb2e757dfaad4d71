"""Where one request's time goes, graph by graph (issue 24).

Run: .venv/bin/python benchmarks/stage_profile.py BUNDLE [--text medium] [--decoder auto]
     [--threads 2] [--gap 0.05]

BUNDLE is a full-size bundle (``yomiage convert``); texts are the peers' (``../shared/peers``).
Every graph call (ONNX Runtime or OpenVINO) is timed by wrapping the runtime's graph classes.
Two measurements in one fresh process, after a warm-up:

1. ``generate``: total milliseconds per graph, its calls, and the frames it computed;
2. ``stream`` three times back to back, then three times ``--gap`` seconds apart: the time
   to the first chunk and each call before it, which shows what threads still busy from
   the previous request cost the next one.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SETTINGS: dict[str, Any] = {"style": "Neutral", "sdp_ratio": 0.2, "noise": 0.0, "noise_w": 0.0}


class Recorder:
    """Wraps the graph classes' ``run`` and keeps (graph, frames, ms, ms since mark)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float, float]] = []
        self.mark = time.perf_counter()

    def wrap(self, cls: Any) -> None:
        original = cls.run
        recorder = self

        def run(graph: Any, feeds: Any) -> Any:
            start = time.perf_counter()
            out = original(graph, feeds)
            end = time.perf_counter()
            path = getattr(graph, "path", None)
            if path is None:
                session = getattr(graph, "session", None)
                path = getattr(session, "_model_path", "?")
            frames = next((v.shape[-1] for v in feeds.values()
                           if getattr(v, "ndim", 0) == 3), 0)  # fmt: skip
            recorder.calls.append(
                (Path(str(path)).name, frames, 1000 * (end - start), 1000 * (end - recorder.mark))
            )
            return out

        cls.run = run

    def reset(self) -> None:
        self.calls.clear()
        self.mark = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--text", default="medium")
    parser.add_argument("--decoder", default="auto")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gap", type=float, default=0.05)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent.parent / "shared" / "peers"))
    from bench_peers import TEXTS  # type: ignore[import-not-found]

    from yomiage import TTS
    from yomiage.runtime.engines import sessions

    recorder = Recorder()
    recorder.wrap(sessions.OrtGraph)
    recorder.wrap(sessions.OpenVinoGraph)
    tts = TTS(threads=args.threads, decoder_precision=args.decoder)
    speaker = tts.load("voice", source=f"file://{args.bundle}").prepare().speakers["voice"]
    text = TEXTS[args.text]
    speaker.generate(text, **SETTINGS)

    recorder.reset()
    start = time.perf_counter()
    audio = speaker.generate(text, **SETTINGS)
    wall = time.perf_counter() - start
    print(f"{args.text}, decoder {args.decoder}, {args.threads} threads: generate {wall:.3f} s "
          f"for {audio.duration:.2f} s of audio")  # fmt: skip
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0, 0])
    for graph, frames, ms, _ in recorder.calls:
        totals[graph][0] += ms
        totals[graph][1] += 1
        totals[graph][2] += frames
    print("| graph | ms | calls | frames |\n| --- | --- | --- | --- |")
    for graph, (ms, calls, frames) in totals.items():
        print(f"| {graph} | {ms:.1f} | {calls:.0f} | {frames:.0f} |")
    print(f"| outside the graphs | {1000 * wall - sum(t[0] for t in totals.values()):.1f} | | |")

    print("\nfirst audio of stream(): calls before it (graph frames: ms)")
    for gap in (0.0, args.gap):
        for _ in range(3):
            recorder.reset()
            chunks = iter(speaker.stream(text, **SETTINGS))
            next(chunks)
            first = time.perf_counter() - recorder.mark
            calls = ", ".join(f"{g} {f}: {ms:.0f}" for g, f, ms, _ in recorder.calls)
            print(f"gap {gap:.3f} s: first audio {first:.3f} s ({calls})")
            for _ in chunks:
                pass
            time.sleep(gap)
    tts.close()


if __name__ == "__main__":
    main()
