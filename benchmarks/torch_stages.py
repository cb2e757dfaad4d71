"""PyTorch backend, stage by stage, on a full-size synthetic voice.

Run: .venv/bin/python benchmarks/torch_stages.py [--threads 2] [--device cpu]

The full-size synthetic SBV2 voice and DeBERTa-v2-large-shaped BERT are made
once (seeded) under benchmarks/.cache. Each text then runs in a fresh Python
process (freed memory is reused inside a process and would hide peak RSS):
load, one warm-up sentence, then the text twice: the table shows the second
(warm) run split into frontend, BERT (one batch for all sentences), encoder +
durations and flow + decoder, and the first call's total (PyTorch pays extra
the first time it meets a tensor size).
Prints a Markdown table for benchmarks/RESULTS.md.
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
CACHE = HERE / ".cache"

# Texts sized to give about 1.7, 7.6, 10.9 and 38.5 s of audio with the synthetic
# voice (3 frames per token, about 0.13 s per mora), the lengths of the reference
# measurements quoted in the issues.
TEXTS = {
    "short": "こんにちは、いい天気ですね。",
    "medium": (
        "駅前の小さな喫茶店で、古い友人と偶然再会して、懐かしい学生時代の話に花を咲かせました。"
    ),
    "long": (
        "人工知能の技術が急速に発展するにつれて、私たちの働き方は大きく変わりつつあります。"
        "明日の会議では、この問題について詳しく話し合う予定です。"
    ),
    "xlong": (
        "私たちが子どもの頃に毎日のように遊んでいた近所の公園は、数年前に大規模な再開発が行われた結果、"
        "今ではすっかり様子が変わってしまいました。"
        "それでも、夕方になると子どもたちの笑い声が聞こえてきて、なんだか懐かしい気持ちになります。"
        "山の頂上にたどり着いたとき、眼下に広がる雲海と朝日に照らされた遠くの山々の美しさに、"
        "私たちはしばらく言葉を失って、ただ立ち尽くしていました。"
        "気象庁によりますと、台風十号は明日の朝にも九州南部に上陸するおそれがあります。"
        "警察は、現場の防犯カメラの映像を詳しく調べています。"
    ),
}


def ensure_models() -> tuple[Path, Path]:
    from yomiage.devtools.synthetic import make_bert, make_voice

    voice, bert = CACHE / "voice-full-0", CACHE / "bert-full-0"
    if not (voice / "config.json").exists():
        make_voice(voice, "full", 0)
    if not (bert / "config.json").exists():
        make_bert(bert, "full", 0)
    return voice, bert


def child(text_id: str, voice_dir: Path, bert_dir: Path, threads: int, device: str) -> dict:
    t0 = time.perf_counter()
    import torch

    from yomiage.options import SynthesisOptions
    from yomiage.runtime.torch_backend import TorchBackend
    from yomiage.text import Frontend, UserDictionary

    torch.set_num_threads(threads)
    frontend = Frontend(UserDictionary(None))
    backend = TorchBackend(bert_dir, device=device, threads=threads)
    voice = backend.load_voice(voice_dir)
    load = time.perf_counter() - t0
    options = SynthesisOptions(seed=0)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def synthesize(text: str) -> dict:
        times = {}
        t = time.perf_counter()
        sentences = [frontend.g2p(s) for s in frontend.split_sentences(text) if s.strip()]
        times["frontend"] = time.perf_counter() - t
        rng = backend.new_rng(options.seed)
        t = time.perf_counter()
        features = backend.bert_features(sentences)
        sync()
        times["bert"] = time.perf_counter() - t
        t = time.perf_counter()
        encoded = voice.encode(sentences, features, options, rng)
        sync()
        times["encode"] = time.perf_counter() - t
        t = time.perf_counter()
        samples = sum(len(voice.decode(e, options, rng)) for e in encoded)
        times["decode"] = time.perf_counter() - t
        times["audio"] = samples / voice.info.sample_rate
        times["sentences"] = len(sentences)
        return times

    synthesize("ウォームアップです。")
    first = synthesize(TEXTS[text_id])
    result = synthesize(TEXTS[text_id])
    result["first_total"] = sum(first[k] for k in ("frontend", "bert", "encode", "decode"))
    result["load"] = load
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    parser.add_argument("--texts", default=",".join(TEXTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.child:
        voice, bert = CACHE / "voice-full-0", CACHE / "bert-full-0"
        print(json.dumps(child(args.child, voice, bert, args.threads, args.device)))
        return

    ensure_models()
    rows = []
    for text_id in args.texts.split(","):
        cmd = [sys.executable, __file__, "--child", text_id, "--threads", str(args.threads)]
        cmd += ["--device", args.device]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rows.append((text_id, json.loads(out.stdout.strip().splitlines()[-1])))

    import torch

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python "
        f"{platform.python_version()}, torch {torch.__version__}, device {args.device}, "
        f"{args.threads} intra-op threads"
    )
    print()
    print(
        "| text | sentences | audio s | frontend s | BERT s | encoder+durations s "
        "| flow+decoder s | total s | speed factor | first call: total s, speed "
        "| load s | peak RSS MB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for text_id, r in rows:
        total = r["frontend"] + r["bert"] + r["encode"] + r["decode"]
        print(
            f"| {text_id} | {r['sentences']} | {r['audio']:.2f} | {r['frontend']:.3f} "
            f"| {r['bert']:.3f} | {r['encode']:.3f} | {r['decode']:.3f} | {total:.2f} "
            f"| {r['audio'] / total:.2f}x "
            f"| {r['first_total']:.2f}, {r['audio'] / r['first_total']:.2f}x "
            f"| {r['load']:.1f} | {r['peak_rss_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
