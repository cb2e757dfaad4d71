"""How far q8 and q4 BERT move the features and the final audio from FP32 BERT.

Run: .venv/bin/python benchmarks/quantization_error.py

Two voices: the tiny fixture voice (its BERT converted here with q8 and q4
into benchmarks/.cache/bundle-tiny) and the full-size synthetic voice
(benchmarks/.cache/bundle-full-0, converted with ``--quantize q8,q4``). Noise
is off (noise = noise_w = 0) so the only difference is the BERT. For each
text: BERT feature error (max abs, and RMS relative to the features' RMS),
whether every token duration stayed the same, and when it did the audio's
max abs difference and SNR against the FP32-BERT audio. Random weights make
these upper bounds of a sort: a trained BERT's features are smoother, but we
cannot download one here.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_stages import CACHE, TEXTS  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "fixtures" / "sbv2_tiny"
TINY_TEXTS = {
    "short": "こんにちは。",
    "english": "今日はGoogleでAIの論文を読んだ。",
    "long": "駅前の小さな喫茶店で、古い友人と偶然再会して、学生時代の話に花を咲かせました。",
}


def tiny_bundle() -> Path:
    out = CACHE / "bundle-tiny"
    if not (out / "bert" / "bert_q4.onnx").exists():
        from yomiage.export.convert import convert_bert, convert_voice

        convert_voice(SHARED / "model", out)
        convert_bert(
            SHARED / "bert" / "model",
            out / "bert",
            tokenizer_dir=SHARED / "bert" / "tokenizer",
            quantize="q8,q4",
        )
    return out


def measure(bundle: Path, texts: dict[str, str]) -> list[str]:
    from yomiage.options import SynthesisOptions
    from yomiage.runtime.onnx_backend import OnnxBackend
    from yomiage.runtime.voice import decode
    from yomiage.text import Frontend, UserDictionary

    frontend = Frontend(UserDictionary(None))
    options = SynthesisOptions(noise=0.0, noise_w=0.0, seed=0)
    backends = {}
    for precision in ("fp32", "q8", "q4"):
        backends[precision] = OnnxBackend(bundle / "bert", precision=precision, threads=2)
    voice = backends["fp32"].load_voice(bundle)
    rows = []
    for text_id, text in texts.items():
        sentences = [frontend.g2p(s) for s in frontend.split_sentences(text) if s.strip()]
        ref_features = backends["fp32"].bert_features(sentences)
        ref_encoded = voice.encode(sentences, ref_features, options, np.random.default_rng(0))
        ref_audio = [decode(voice, e, options, np.random.default_rng(0)) for e in ref_encoded]
        for precision in ("q8", "q4"):
            b = backends[precision]
            features = b.bert_features(sentences)
            diff = np.concatenate(
                [(f - r).ravel() for f, r in zip(features, ref_features, strict=True)]
            )
            ref = np.concatenate([r.ravel() for r in ref_features])
            rel = math.sqrt(float((diff**2).mean()) / float((ref**2).mean()))
            encoded = voice.encode(sentences, features, options, np.random.default_rng(0))
            same = all(
                np.array_equal(e.durations, r.durations)
                for e, r in zip(encoded, ref_encoded, strict=True)
            )
            n_tokens = sum(len(r.durations) for r in ref_encoded)
            changed = sum(
                int((e.durations != r.durations).sum())
                if len(e.durations) == len(r.durations)
                else len(r.durations)
                for e, r in zip(encoded, ref_encoded, strict=True)
            )
            if same:
                audio = np.concatenate(
                    [decode(voice, e, options, np.random.default_rng(0)) for e in encoded]
                )
                reference = np.concatenate(ref_audio)
                err = audio - reference
                snr = 10 * math.log10(
                    float((reference**2).sum()) / max(float((err**2).sum()), 1e-30)
                )
                audio_cell = f"{float(np.abs(err).max()):.3g} | {snr:.1f}"
            else:
                audio_cell = "- | -"
            rows.append(
                f"| {bundle.name} | {text_id} | {precision} | {float(np.abs(diff).max()):.3g} "
                f"| {rel:.3f} | {changed}/{n_tokens} | {audio_cell} |"
            )
    frontend.close()
    return rows


def main() -> None:
    print(
        "| voice | text | BERT | feature max abs | feature RMS / RMS | durations changed "
        "| audio max abs | audio SNR dB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in measure(tiny_bundle(), TINY_TEXTS):
        print(row)
    for row in measure(CACHE / "bundle-full-0", {k: TEXTS[k] for k in ("short", "medium", "long")}):
        print(row)


if __name__ == "__main__":
    main()
