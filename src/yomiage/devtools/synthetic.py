"""Seeded synthetic SBV2 JP-Extra voices and DeBERTa-v2 folders.

Tests and benchmarks need voice folders that look exactly like real ones: the
same ``config.json`` sections, the same state-dict keys and shapes (training-only
tensors and the legacy weight-norm names included), a style-vector table, and for
benchmarks the real full size. Trained weights cannot be downloaded here, so
:func:`make_voice` and :func:`make_bert` write random ones from a seed, with the
same seed always giving byte-identical files.

The random weights are not noise for its own sake: they are scaled so that a
voice behaves like a real one where tests and benchmarks can tell the
difference. Activations keep unit scale through every layer, the decoder output
is neither silent nor clipped by its ``tanh``, and both duration predictors give
about :data:`TARGET_FRAMES_PER_TOKEN` frames per token (a realistic speaking
rate), so the number of frames, and with it the cost of the flow and the
decoder, is realistic.

This module is the public face and the command line; the work is done by
:mod:`~yomiage.devtools.sizes` (the two sizes, shared widths and checks),
:mod:`~yomiage.devtools.voice_config` (``config.json``),
:mod:`~yomiage.devtools.voice_spec` and :mod:`~yomiage.devtools.voice_plan`
(every tensor's key, shape and init), :mod:`~yomiage.devtools.voice_writer`
(drawing, decoder calibration, style vectors, :func:`make_voice`) and
:mod:`~yomiage.devtools.bert_writer` (:func:`make_bert`).

The voice writer needs only ``numpy`` and ``safetensors``; the BERT writer needs
``torch`` and ``transformers`` (the ``yomiage[torch]`` extra). Both are imported
when called, never at import time.

Run ``python -m yomiage.devtools.synthetic make-voice OUT --size tiny --seed 0``
or ``... make-bert OUT --size full --seed 0``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from yomiage.devtools.bert_writer import bert_config, make_bert, vocab_characters
from yomiage.devtools.sizes import BERT_DIM, SIZES, STYLE_DIM, Size
from yomiage.devtools.voice_config import voice_config
from yomiage.devtools.voice_plan import TARGET_FRAMES_PER_TOKEN, plan_voice
from yomiage.devtools.voice_writer import make_voice

__all__ = [
    "BERT_DIM",
    "SIZES",
    "STYLE_DIM",
    "TARGET_FRAMES_PER_TOKEN",
    "Size",
    "add_commands",
    "bert_config",
    "main",
    "make_bert",
    "make_voice",
    "plan_voice",
    "vocab_characters",
    "voice_config",
]


# --------------------------------------------------------------------------------------
# Command line


def _describe(folder: Path) -> list[str]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return [f"  {p.name}  {p.stat().st_size:,} bytes" for p in files]


def _cmd_make_voice(args: argparse.Namespace) -> int:
    styles = [s.strip() for s in str(args.styles).split(",") if s.strip()]
    folder = make_voice(
        Path(args.out),
        args.size,
        args.seed,
        name=args.name,
        n_speakers=args.n_speakers,
        styles=styles,
        frames_per_token=args.frames_per_token,
    )
    print(f"wrote {args.size} voice {args.name!r} (seed {args.seed}) to {folder}")
    print("\n".join(_describe(folder)))
    return 0


def _cmd_make_bert(args: argparse.Namespace) -> int:
    folder = make_bert(Path(args.out), args.size, args.seed)
    print(f"wrote {args.size} DeBERTa-v2 (seed {args.seed}) to {folder}")
    print("\n".join(_describe(folder)))
    return 0


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``make-voice`` and ``make-bert`` to a parser, for ``yomiage dev``.

    Each sets ``func`` to a callable taking the parsed namespace and returning an
    exit status.
    """
    voice = subparsers.add_parser(
        "make-voice",
        help="write a seeded random SBV2 JP-Extra voice folder",
        description="Write config.json, <name>_e1_s100.safetensors and style_vectors.npy.",
    )
    voice.add_argument("out", help="output folder (created if missing)")
    voice.add_argument("--size", choices=SIZES, default="tiny")
    voice.add_argument("--seed", type=int, default=0)
    voice.add_argument("--name", default="synthetic", help="model name and file stem")
    voice.add_argument("--n-speakers", type=int, default=1)
    voice.add_argument(
        "--styles",
        default="Neutral,Happy,Sad,Angry",
        help="comma-separated style names; the first gets the mean vector",
    )
    voice.add_argument(
        "--frames-per-token",
        type=float,
        default=TARGET_FRAMES_PER_TOKEN,
        help="median token duration in frames before ceil (default %(default)s)",
    )
    voice.set_defaults(func=_cmd_make_voice)

    bert = subparsers.add_parser(
        "make-bert",
        help="write a seeded random DeBERTa-v2 folder with tokenizer files",
        description="Write config.json, model.safetensors and the tokenizer files.",
    )
    bert.add_argument("out", help="output folder (created if missing)")
    bert.add_argument("--size", choices=SIZES, default="tiny")
    bert.add_argument("--seed", type=int, default=0)
    bert.set_defaults(func=_cmd_make_bert)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m yomiage.devtools.synthetic``."""
    parser = argparse.ArgumentParser(
        prog="python -m yomiage.devtools.synthetic",
        description="Write synthetic SBV2 voices and DeBERTa models for tests and benchmarks.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_commands(subparsers)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, ImportError, OSError) as exc:
        parser.exit(2, f"error: {exc}\n")


if __name__ == "__main__":
    raise SystemExit(main())
