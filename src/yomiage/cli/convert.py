"""``yomiage convert``: an SBV2 voice folder (and its BERT) to ONNX bundles (needs torch)."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

# Measured with /usr/bin/time on the full-size synthetic voice and BERT, 2 cores.
MEMORY_NOTE = (
    "A full-size voice converts in about 10 s with 1.2 GB of memory; its BERT takes "
    "another 80 s and needs about 6 GB of free memory at its peak (the export to ONNX)."
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    conv = sub.add_parser(
        "convert",
        help="convert an SBV2 voice folder or an AIVMX file (and a BERT) to ONNX bundles",
        description="Export an SBV2 JP-Extra voice folder (and its DeBERTa) to the ONNX bundles "
        "the CPU runtime loads, checked against PyTorch (needs yomiage[torch]); or cut an "
        "AivisSpeech AIVMX file into a bundle, checked against its own graph (no torch). "
        + MEMORY_NOTE,
        epilog="examples:\n  yomiage convert models/jvnv-F1-jp voices/jvnv-F1-jp "
        "--bert bert/deberta-v2-large-japanese-char-wwm\n"
        "  yomiage convert my-voice out --bert bert --quantize q4\n"
        "  yomiage convert voice.aivmx voices/voice",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    conv.add_argument(
        "sbv2_dir",
        metavar="SOURCE",
        help="SBV2 folder (config.json, *.safetensors, style_vectors.npy) or an .aivmx file",
    )
    conv.add_argument("out_dir", help="where the voice bundle goes (replaced if present)")
    conv.add_argument(
        "--bert", metavar="BERT_DIR", help="DeBERTa folder; its bundle goes to OUT_DIR/bert"
    )
    conv.add_argument("--tokenizer", metavar="DIR", help="tokenizer folder if not inside BERT_DIR")
    conv.add_argument("--decoder", choices=["fp32", "int8"], default="fp32",
                      help="also write an int8 decoder (opt-in: about 2x faster decoding, "
                           "error printed and kept in voice.json)")  # fmt: skip
    conv.add_argument("--quantize", choices=["q8", "q4", "q8,q4", "none"], default="q8",
                      metavar="q8|q4|q8,q4|none",
                      help="quantized BERT graphs besides float32 (default q8)")  # fmt: skip
    conv.add_argument("-q", "--quiet", action="store_true", help="print only the result")
    conv.set_defaults(func=run)


# How often a step that is still running says so (the BERT's export is silent for a minute).
HEARTBEAT_SECONDS = 10.0


class Heartbeat:
    """Progress lines ``[  12.3 s] step``, and while one step runs long, a line every
    ``every`` seconds saying it still runs: the BERT's export and quantization
    print nothing for a minute or more, which looked like a hang."""

    def __init__(self, write: Callable[[str], None], every: float = HEARTBEAT_SECONDS) -> None:
        self.write = write
        self.every = every
        self.started = time.perf_counter()
        self._step: tuple[str, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="convert-heartbeat", daemon=True)

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        with self._lock:
            self._step = (step, now)
            self.write(f"[{now - self.started:6.1f} s] {step}")

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            now = time.perf_counter()
            with self._lock:
                if self._step is not None and now - self._step[1] >= self.every / 2:
                    step, since = self._step
                    self.write(f"[{now - self.started:6.1f} s] ... still {step} "
                               f"({now - since:.0f} s so far)")  # fmt: skip

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.quiet:
        return _run(args, lambda step: None)
    with Heartbeat(_stderr_line) as progress:
        return _run(args, progress)


def _run(args: argparse.Namespace, progress: Callable[[str], None]) -> int:
    out = Path(args.out_dir)
    if Path(args.sbv2_dir).suffix.lower() == ".aivmx":
        if args.decoder == "int8":
            raise ValueError("--decoder int8 needs an SBV2 folder (PyTorch weights), not AIVMX")
        _convert_aivmx(Path(args.sbv2_dir), out, progress)
    else:
        _convert_sbv2(args, out, progress)
    if args.bert:
        from yomiage.export.convert import convert_bert

        tokenizer = Path(args.tokenizer) if args.tokenizer else None
        bert, errors = convert_bert(
            Path(args.bert),
            out / "bert",
            tokenizer_dir=tokenizer,
            quantize=args.quantize,
            progress=progress,
        )
        shown = ", ".join(f"{k} {v:.2g}" for k, v in errors.items())
        print(f"wrote BERT bundle {bert} (feature error vs PyTorch: {shown})")
    return 0


def _convert_aivmx(source: Path, out: Path, progress: Callable[[str], None]) -> None:
    from yomiage.aivmx import read_aivmx
    from yomiage.aivmx.bundle import write_bundle

    progress(f"reading {source}")
    voice = read_aivmx(source)
    bundle = write_bundle(voice, out, progress=progress)
    print(
        f"wrote voice bundle {bundle} from AIVMX {voice.name!r} {voice.version} "
        f"(licence: {_licence_line(voice.license)})"
    )


def _licence_line(text: str | None) -> str:
    if not text:
        return "none given in the file"
    first = text.strip().splitlines()[0]
    return first if len(first) <= 80 else first[:77] + "..."


def _convert_sbv2(args: argparse.Namespace, out: Path, progress: Callable[[str], None]) -> None:
    from yomiage.export.convert import convert_voice

    features = None
    if args.decoder == "int8" and args.bert:
        from yomiage.bert.torch_bert import TorchBert

        calibration_bert = TorchBert(
            Path(args.bert), Path(args.tokenizer) if args.tokenizer else None
        )
        features = calibration_bert.features
    bundle, parity = convert_voice(
        Path(args.sbv2_dir),
        out,
        decoder_int8=args.decoder == "int8",
        bert_features=features,
        progress=progress,
    )
    del features
    print(
        f"wrote voice bundle {bundle} (ONNX vs PyTorch: prior {parity.prior:.2g}, "
        f"flow {parity.flow:.2g}, audio {parity.audio:.2g}, durations equal)"
    )
    if args.decoder == "int8":
        from yomiage.runtime.bundle import read_manifest

        error = read_manifest(bundle).decoder_int8 or {}
        print(
            f"int8 decoder vs float32: {error.get('snr_db', float('nan')):.1f} dB SNR, "
            f"max abs {error.get('max_abs', float('nan')):.3g}"
        )
