"""Make the small voices the test suite runs on without torch and without ../shared.

Run (needs the [torch] extra; the output is committed, so only when the
formats change): .venv/bin/python tools/make_test_voices.py

Writes, from seeded random models in the tiny sizes (`yomiage dev make-voice
--size tiny --seed 0`, `make-bert --size tiny --seed 0`):

* ``tests/data/voices/tiny/``: a yomiage voice bundle with its BERT in
  ``bert/`` (the q8 graph only, the one the engine uses by default), as
  ``yomiage convert`` makes it;
* ``tests/data/voices/hayakoe/``: the same voice in HayaKoe's speaker layout
  (``config.json``, ``style_vectors.npy``, ``synthesizer.onnx``,
  ``duration_predictor.onnx``); tests put the bundle's BERT beside it.

The graphs are the real architecture at tiny widths (about 2.5 MB of float32
weights per copy); the audio is noise. Deterministic for a torch version.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "voices"


def _only_q8(bert: Path) -> None:
    """Drop the float32 BERT graph (tests use q8) and say so in bert.json."""
    manifest = json.loads((bert / "bert.json").read_text("utf-8"))
    for name in [n for n in manifest["files"] if n.split(".")[0] == "bert"]:
        (bert / name).unlink()
        del manifest["files"][name]
    manifest["graphs"] = {p: g for p, g in manifest["graphs"].items() if p != "fp32"}
    (bert / "bert.json").write_text(json.dumps(manifest, indent=1), "utf-8")


def main() -> int:
    import torch

    from yomiage.devtools.bert_writer import make_bert
    from yomiage.devtools.voice_writer import make_voice
    from yomiage.export.convert import convert_bert, convert_voice
    from yomiage.export.whole import export_duration_predictor, export_whole
    from yomiage.model import load_voice

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        voice = make_voice(
            work / "voice", "tiny", 0, name="tiny", n_speakers=2, styles=("Neutral", "Happy", "Sad")
        )
        # The speakers of the reference fixture voice, so tests read the same on both.
        config = json.loads((voice / "config.json").read_text("utf-8"))
        config["data"]["spk2id"] = {"spk_a": 0, "spk_b": 1}
        (voice / "config.json").write_text(json.dumps(config, indent=2), "utf-8")
        bert = make_bert(work / "bert", "tiny", 0)
        bundle = OUT / "tiny"
        if bundle.exists():
            shutil.rmtree(bundle)
        convert_voice(voice, bundle)
        convert_bert(bert, bundle / "bert", quantize="q8")
        _only_q8(bundle / "bert")
        speaker = OUT / "hayakoe"
        if speaker.exists():
            shutil.rmtree(speaker)
        speaker.mkdir(parents=True)
        for name in ("config.json", "style_vectors.npy"):
            shutil.copy(voice / name, speaker / name)
        model = load_voice(voice, torch.device("cpu")).model
        export_whole(model, speaker / "synthesizer.onnx")
        export_duration_predictor(model, speaker / "duration_predictor.onnx")
    total = 0
    for path in sorted(OUT.rglob("*")):
        if path.is_file():
            total += path.stat().st_size
            print(f"{path.relative_to(ROOT)}  {path.stat().st_size:,} bytes")
    print(f"total {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
