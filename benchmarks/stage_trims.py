"""What dropping a window's padding between decoder stages buys (runtime/stage_trims.py).

Run: .venv/bin/python benchmarks/stage_trims.py BUNDLE [--pairs 9] [--rounds 3]
     [--texts short,medium,long] [--threads 2]

BUNDLE is a full-size bundle converted with trims (``decoder_stages`` in voice.json),
its BERT in ``BUNDLE/bert``. Two measurements:

1. the decoder alone, ONNX Runtime float32: each window kind a request makes (a
   stream's first window, padded after only; full windows padded on both sides),
   called untrimmed and trimmed in alternation on one session, ``--pairs`` times;
   with ``--engine openvino``, OpenVINO (``--precision``, bf16 by default) at each
   length of its window schedules, whole and with the balanced trims it is fed
   (``StageTrims.balanced``: those of a window padded on both sides);
2. end to end with the defaults: a copy of the bundle without ``decoder_stages``
   (what a bundle converted before the trims does) against the bundle, each run a
   fresh process, the two alternating for ``--rounds`` rounds; per text, the median
   over rounds of each process's fastest of three ``generate`` times (after a warm-up)
   and of three times to the first chunk of ``stream``. The copy shares the bundle's
   plan (same graph sizes), so only the trims differ.

The audio of the two is compared too: trims must not change a sample.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS = HERE.parent.parent / "shared" / "peers"

WORKER = """
import json, sys, time, hashlib
import numpy as np
sys.path.insert(0, sys.argv[4])
from bench_peers import TEXTS
from yomiage import TTS
bundle, bert, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
tts = TTS(threads=threads, bert_source=bert).load("v", source=bundle).prepare()
sp = tts.speakers["v"]
kw = dict(style="Neutral", sdp_ratio=0.2, noise=0.0, noise_w=0.0, seed=0)
out = {}
for key in sys.argv[5].split(","):
    first = sp.generate(TEXTS[key], **kw)
    walls, ttfas = [], []
    for _ in range(3):  # the fastest of three: other work on the machine only adds time
        start = time.perf_counter(); sp.generate(TEXTS[key], **kw)
        walls.append(time.perf_counter() - start)
        start = time.perf_counter(); chunks = iter(sp.stream(TEXTS[key], **kw)); next(chunks)
        ttfas.append(time.perf_counter() - start)
        for _ in chunks:
            pass
    wall, ttfa = min(walls), min(ttfas)
    digest = hashlib.sha256(np.round(first.samples, 6).tobytes()).hexdigest()[:12]
    out[key] = {"wall_s": wall, "ttfa_s": ttfa, "audio_s": len(first.samples) / first.sample_rate,
                "audio": digest}
print(json.dumps(out))
"""


def _decoder_alone(
    bundle: Path, threads: int, pairs: int, engine: str = "onnxruntime", precision: str = "bf16"
) -> list[str]:
    import numpy as np

    from yomiage.runtime.bundle import read_manifest
    from yomiage.runtime.engines.onnx_session import session_options
    from yomiage.runtime.engines.placement import Placement
    from yomiage.runtime.engines.sessions import OrtGraph, Sessions, probe_speaker
    from yomiage.runtime.stage_trims import TRIM_INPUT

    manifest = read_manifest(bundle)
    trims = manifest.stage_trims
    if trims is None:
        raise SystemExit(f"{bundle} has no decoder_stages: convert it with this yomiage")
    context = manifest.receptive_field_frames
    decoder: Any = OrtGraph(bundle / "decoder.onnx", session_options(threads))
    kinds = [(f"first window, {f} frames", 0, f) for f in (8, 16, 32)]
    kinds += [(f"window of {f} frames", context, f) for f in (32, 64, 128, 256, 512)]
    if engine == "openvino":
        placement = Placement("openvino", precision)  # type: ignore[arg-type]
        decoder = Sessions(threads).open(bundle / "decoder.onnx", placement)
        if decoder.placement != placement or TRIM_INPUT not in decoder.input_names:
            raise SystemExit(f"OpenVINO {precision} cannot run this decoder with trims")
        kinds = [(f"window of {f} frames", context, f) for f in (32, 64, 128, 256)]
    rng = np.random.default_rng(0)
    speaker = probe_speaker(decoder, rng)
    rows = ["| window (padding before / after) | whole ms | trimmed ms | speed-up |",
            "| --- | --- | --- | --- |"]  # fmt: skip
    for name, before, frames in kinds:
        z = rng.standard_normal((1, manifest.inter_channels, before + frames + context),
                                dtype=np.float32) * np.float32(0.5)  # fmt: skip
        whole = {"z": z, **speaker}
        trimmed = {**whole, TRIM_INPUT: trims.amounts(before, context)[0]}
        decoder.run(whole), decoder.run(trimmed)
        a, b = [], []
        for _ in range(pairs):
            for feeds, times in ((whole, a), (trimmed, b)):
                start = time.perf_counter()
                decoder.run(feeds)
                times.append(1000 * (time.perf_counter() - start))
        ma, mb = statistics.median(a), statistics.median(b)
        rows.append(f"| {name} ({before} / {context}) | {ma:.0f} | {mb:.0f} | {ma / mb:.2f}x |")
    return rows


def _end_to_end(bundle: Path, threads: int, rounds: int, texts: str) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="stage-trims-") as tmp:
        whole = Path(tmp) / "whole"
        shutil.copytree(bundle, whole, ignore=shutil.ignore_patterns("bert"))
        manifest = json.loads((whole / "voice.json").read_text("utf-8"))
        manifest.pop("decoder_stages")
        (whole / "voice.json").write_text(json.dumps(manifest), "utf-8")
        runs: dict[str, list[dict[str, Any]]] = {"whole": [], "trimmed": []}
        for k in range(rounds):
            order = [("whole", whole), ("trimmed", bundle)]
            for name, folder in order if k % 2 == 0 else order[::-1]:
                print(f"round {k + 1}/{rounds}: {name}...", file=sys.stderr, flush=True)
                done = subprocess.run(
                    [sys.executable, "-c", WORKER, str(folder), str(bundle / "bert"),
                     str(threads), str(PEERS), texts],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = ["| text | generate s: whole / trimmed (speed-up) | first audio s: whole / trimmed "
            "| same audio |", "| --- | --- | --- | --- |"]  # fmt: skip
    for key in texts.split(","):

        def median(name: str, field: str, key: str = key) -> float:
            return statistics.median(r[key][field] for r in runs[name])

        same = {r[key]["audio"] for r in runs["whole"] + runs["trimmed"]}
        ww, wt = median("whole", "wall_s"), median("trimmed", "wall_s")
        rows.append(
            f"| {key} ({runs['whole'][0][key]['audio_s']:.1f} s) | {ww:.2f} / {wt:.2f} "
            f"({ww / wt:.2f}x) | {median('whole', 'ttfa_s'):.2f} / "
            f"{median('trimmed', 'ttfa_s'):.2f} | {'yes' if len(same) == 1 else 'NO'} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", default="short,medium,long")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engine", choices=("onnxruntime", "openvino"), default="onnxruntime")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    args = parser.parse_args()
    if not (PEERS / "bench_peers.py").is_file():
        raise SystemExit(f"the peers' texts are not at {PEERS}")
    print(f"machine: {platform.processor() or platform.machine()}, {args.threads} threads\n")
    rows = _decoder_alone(args.bundle, args.threads, args.pairs, args.engine, args.precision)
    print("\n".join(rows) + "\n", flush=True)
    if args.rounds:
        print("\n".join(_end_to_end(args.bundle, args.threads, args.rounds, args.texts)))


if __name__ == "__main__":
    main()
