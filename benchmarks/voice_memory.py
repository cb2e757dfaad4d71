"""What each extra voice costs in peak memory (issue 24: each extra voice <= +250 MB).

Run: .venv/bin/python benchmarks/voice_memory.py BUNDLE [--voices 3] [--decoder auto]
[--memory-budget-mb MB]

BUNDLE is a full-size bundle with its BERT in ``BUNDLE/bert`` (``yomiage convert
... --bert ... --quantize q8``; ../shared/peers/README.md makes one). The bundle is
copied (without its BERT) to N folders, each copy's last 4,096 weights of each graph
nudged by a millionth (its manifest's sha256 made anew), so that no two share a file by
path or by content: what the cache makes from a graph (a decoder in another layout, a
flow with bfloat16 weights, OpenVINO's compiled blob) is named by its content, and
copies alike would share one mapped file, as two voices never do. For N = 1..voices, a
fresh process loads N of them, generates one paragraph with each, and reports its peak
RSS (VmHWM); the table gives each extra voice's cost against N - 1. Run it twice:
the first run compiles and makes what the copies need (in child processes, not counted).
``--memory-budget-mb`` is the engine's: a lower one than the default rules out the plans
above it, so that two bundles whose measured plans differ compare on the same one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

TEXT = (
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
    "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。"
)

WORKER = """
import json, sys
from yomiage import TTS
bundle, copies, decoder, text = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
budget = json.loads(sys.argv[5])
tts = TTS(device="cpu", threads=2, bert_source=bundle + "/bert", decoder_precision=decoder,
          **({"memory_budget_mb": budget} if budget else {}))
for k, folder in enumerate(copies):
    tts.load(f"v{k}", source=f"file://{folder}")
tts.prepare()
for k in range(len(copies)):
    tts.speakers[f"v{k}"].generate(text, noise=0.0, noise_w=0.0)
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"voices": len(copies), "peak_mb": peak / 1024}))
"""


def _nudge(folder: Path, k: int) -> None:
    """The copy ``k`` made a voice of its own: each graph's last weights scaled by
    1 + (k + 1) * 1e-6 (inaudible), its manifest's sha256 of them made anew."""
    manifest = json.loads((folder / "voice.json").read_text("utf-8"))
    for data in sorted(folder.glob("*.onnx.data")):
        weights = np.memmap(data, dtype=np.float32, mode="r+")
        weights[-4096:] *= np.float32(1 + (k + 1) * 1e-6)
        weights.flush()
        del weights
        manifest["files"][data.name] = hashlib.sha256(data.read_bytes()).hexdigest()
    (folder / "voice.json").write_text(json.dumps(manifest, ensure_ascii=False), "utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--voices", type=int, default=3)
    parser.add_argument("--decoder", default="auto")
    parser.add_argument("--memory-budget-mb", type=int, default=None, metavar="MB")
    args = parser.parse_args()
    if not (args.bundle / "bert").is_dir():
        raise SystemExit(f"{args.bundle} has no bert/ folder: convert it with --bert")
    with tempfile.TemporaryDirectory(prefix="voice-memory-") as tmp:
        copies = []
        for k in range(args.voices):
            folder = Path(tmp) / f"voice{k}"
            shutil.copytree(args.bundle, folder, ignore=shutil.ignore_patterns("bert"))
            _nudge(folder, k)
            copies.append(str(folder))
        rows = []
        for n in range(1, args.voices + 1):
            print(f"{n} voice(s)...", file=sys.stderr, flush=True)
            out = subprocess.run(
                [sys.executable, "-c", WORKER, str(args.bundle), json.dumps(copies[:n]),
                 args.decoder, TEXT, json.dumps(args.memory_budget_mb)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, Python {platform.python_version()}")
    budget = f", memory_budget_mb={args.memory_budget_mb}" if args.memory_budget_mb else ""
    print(f"decoder_precision={args.decoder!r}{budget}\n")
    print("| voices | peak RSS MB | this voice costs |")
    print("| --- | --- | --- |")
    for prev, row in zip([None, *rows], rows, strict=False):
        extra = f"+{row['peak_mb'] - prev['peak_mb']:.0f} MB" if prev else ""
        print(f"| {row['voices']} | {row['peak_mb']:.0f} | {extra} |")


if __name__ == "__main__":
    main()
