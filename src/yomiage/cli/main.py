"""The ``yomiage`` command line.

Logging is configured here and only here, never at import.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Sequence

from yomiage._version import __version__
from yomiage.errors import YomiageError

EXAMPLES_G2P = """examples:
  yomiage g2p --json "円周率は3.14、成功率は50%です。"
  echo "GitHubでJSONを公開。" | yomiage g2p --json -
"""
EXAMPLES_DICT = """examples:
  yomiage dict add 担々麺 タンタンメン --accent 3
  yomiage dict list
  yomiage dict remove 担々麺
"""


def _texts(args: list[str]) -> Iterator[str]:
    for text in args:
        if text == "-":
            for line in sys.stdin:
                line = line.rstrip("\r\n")
                if line.strip():
                    yield line
        else:
            yield text


def _cmd_g2p(args: argparse.Namespace) -> int:
    from yomiage.text import Frontend, default_user_dictionary_path

    frontend = Frontend(args.user_dict or default_user_dictionary_path())
    status = 0
    for text in _texts(args.text):
        try:
            p = frontend.g2p(text)
        except YomiageError as exc:
            print(f"yomiage g2p: {exc}", file=sys.stderr)
            status = 1
            continue
        if args.json:
            record = {
                "text": p.text,
                "bert_text": p.bert_text,
                "phones": list(p.phones),
                "tones": list(p.tones),
                "word2ph": list(p.word2ph),
            }
            print(json.dumps(record, ensure_ascii=False), flush=True)
        else:
            print(p.text)
            print(
                "  words:   "
                + " | ".join(f"{w}={r}" for w, r in zip(p.words, p.readings, strict=True))
            )
            print("  phones:  " + " ".join(p.phones))
            print("  tones:   " + " ".join(map(str, p.tones)))
            print("  word2ph: " + " ".join(map(str, p.word2ph)))
    return status


def _cmd_dict(args: argparse.Namespace) -> int:
    from yomiage.text import Frontend, UserDictionary, default_user_dictionary_path

    dictionary = UserDictionary(args.user_dict or default_user_dictionary_path())
    if args.action in ("add", "remove"):
        # Through a frontend, so a word is compiled (and checked) before it is saved.
        frontend = Frontend(dictionary)
        if args.action == "add":
            word = frontend.add_word(
                args.surface, args.reading, args.accent, args.priority, args.type
            )
            print(f"added {word.surface} = {word.reading} (accent {word.accent})")
        else:
            removed = frontend.remove_word(args.surface)
            print(f"removed {removed.surface}")
        return 0
    if args.json:
        print(json.dumps([w.__dict__ for w in dictionary.words], ensure_ascii=False))
        return 0
    for w in dictionary.words:
        print(f"{w.surface}\t{w.reading}\taccent={w.accent}\tpriority={w.priority}\t{w.word_type}")
    if dictionary.problem:
        print(f"yomiage dict: {dictionary.problem}", file=sys.stderr)
    for entry in dictionary.skipped:
        print(f"yomiage dict: skipped {entry.surface or entry.entry!r}: {entry.reason}",
              file=sys.stderr)  # fmt: skip
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from pathlib import Path

    from yomiage.export.convert import convert_bert, convert_voice

    out = Path(args.out_dir)
    features = None
    if args.decoder == "int8" and args.bert:
        from yomiage.bert.torch_bert import TorchBert

        calibration_bert = TorchBert(
            Path(args.bert), Path(args.tokenizer) if args.tokenizer else None
        )
        features = calibration_bert.features
    bundle, parity = convert_voice(
        Path(args.sbv2_dir), out, decoder_int8=args.decoder == "int8", bert_features=features
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
    if args.bert:
        tokenizer = Path(args.tokenizer) if args.tokenizer else None
        bert, errors = convert_bert(
            Path(args.bert), out / "bert", tokenizer_dir=tokenizer, quantize=args.quantize
        )
        shown = ", ".join(f"{k} {v:.2g}" for k, v in errors.items())
        print(f"wrote BERT bundle {bert} (feature error vs PyTorch: {shown})")
    return 0


def _cmd_download(args: argparse.Namespace) -> int:
    from yomiage.sources import download

    if not args.names and not args.bert:
        print("yomiage download: name at least one voice or source, or --bert", file=sys.stderr)
        return 2
    for path in download(args.names, bert=args.bert, format=args.format, cache_dir=args.cache_dir):
        print(path)
    return 0


def _cmd_voices(args: argparse.Namespace) -> int:
    from yomiage.sources import catalog, is_cached

    rows = []
    for name in catalog.names():
        entry = catalog.lookup(name)
        source = entry.source(args.format)
        cached = all(is_cached(s, cache_dir=args.cache_dir) for s in entry.sources(args.format))
        rows.append((entry, source, cached))
    if args.json:
        records = [
            {"name": e.name, "kind": e.kind, "license": e.license, "styles": list(e.styles),
             "source": src, "cached": cached}
            for e, src, cached in rows
        ]  # fmt: skip
        print(json.dumps(records, ensure_ascii=False))
        return 0
    width = max(len(e.name) for e, _, _ in rows)
    print(f"{'NAME':<{width}}  {'CACHE':<6}  {'LICENSE':<34}  SOURCE")
    for e, src, cached in rows:
        mark = "cached" if cached else "-"
        print(f"{e.name:<{width}}  {mark:<6}  {e.license:<34}  {src}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yomiage", description="Japanese text-to-speech for Style-Bert-VITS2 JP-Extra voices."
    )
    parser.add_argument("--version", action="version", version=f"yomiage {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from yomiage.cli import generate as cli_generate
    from yomiage.cli import serve as cli_serve

    cli_generate.register(sub)
    cli_serve.register(sub)

    g2p = sub.add_parser(
        "g2p",
        help="show the phonemes a voice would be fed",
        epilog=EXAMPLES_G2P,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g2p.add_argument("text", nargs="+", help="text to read; '-' reads one text per line from stdin")
    g2p.add_argument("--json", action="store_true", help="one JSON object per input, one per line")
    g2p.add_argument("--user-dict", metavar="PATH", help="user dictionary JSON (default: per user)")
    g2p.set_defaults(func=_cmd_g2p)

    dct = sub.add_parser(
        "dict",
        help="manage the user dictionary",
        epilog=EXAMPLES_DICT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dct.add_argument("--user-dict", metavar="PATH", help="user dictionary JSON (default: per user)")
    actions = dct.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add or replace a word")
    add.add_argument("surface", help="the word as written, e.g. 担々麺")
    add.add_argument("reading", help="its reading in katakana, e.g. タンタンメン")
    add.add_argument(
        "--accent", type=int, default=None, help="mora after which pitch falls (0: flat)"
    )
    add.add_argument("--priority", type=int, default=5, help="0-10, higher wins more often")
    add.add_argument(
        "--type",
        default="proper_noun",
        choices=["proper_noun", "common_noun", "verb", "adjective", "suffix"],
    )
    lst = actions.add_parser("list", help="list the words")
    lst.add_argument("--json", action="store_true")
    rm = actions.add_parser("remove", help="remove a word")
    rm.add_argument("surface")
    dct.set_defaults(func=_cmd_dict)

    conv = sub.add_parser(
        "convert",
        help="convert an SBV2 voice folder (and its BERT) to ONNX bundles (needs yomiage[torch])",
        epilog="examples:\n  yomiage convert models/jvnv-F1-jp voices/jvnv-F1-jp "
        "--bert bert/deberta-v2-large-japanese-char-wwm\n"
        "  yomiage convert my-voice out --bert bert --quantize q4",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    conv.add_argument("sbv2_dir", help="folder with config.json, *.safetensors, style_vectors.npy")
    conv.add_argument("out_dir", help="where the voice bundle goes (replaced if present)")
    conv.add_argument(
        "--bert", metavar="BERT_DIR", help="DeBERTa folder; its bundle goes to OUT_DIR/bert"
    )
    conv.add_argument("--tokenizer", metavar="DIR", help="tokenizer folder if not inside BERT_DIR")
    conv.add_argument("--decoder", choices=["fp32", "int8"], default="fp32",
                      help="also write an int8 decoder (opt-in: about 2x faster decoding, "
                           "error printed and kept in voice.json)")  # fmt: skip
    conv.add_argument("--quantize", choices=["q8", "q4", "q8,q4", "none"], default="q8",
                      help="quantized BERT graphs besides float32 (default q8)")  # fmt: skip
    conv.set_defaults(func=_cmd_convert)

    dl = sub.add_parser(
        "download",
        help="fill the cache with voices and the BERT for offline use (no loading)",
        epilog="examples:\n  yomiage download jvnv-F1-jp jvnv-M1-jp --bert\n"
        "  yomiage download hf://owner/repo/my-voice s3://bucket/voices/mine\n"
        "  YOMIAGE_CACHE=/opt/yomiage yomiage download jvnv-F1-jp --bert  # Docker build step",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dl.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="names from `yomiage voices`, hf:// or s3:// sources",
    )
    dl.add_argument("--bert", action="store_true", help="also the BERT")
    dl.add_argument(
        "--format",
        choices=["onnx", "sbv2"],
        default="onnx",
        help="for names: ready ONNX exports (default) or the SBV2 folders",
    )
    dl.add_argument("--cache-dir", metavar="DIR", help="cache root (default: $YOMIAGE_CACHE)")
    dl.set_defaults(func=_cmd_download)

    vc = sub.add_parser("voices", help="list the known voices, their licenses and sources")
    vc.epilog = "examples:\n  yomiage voices\n  yomiage voices --format sbv2 --json"
    vc.formatter_class = argparse.RawDescriptionHelpFormatter
    vc.add_argument("--format", choices=["onnx", "sbv2"], default="onnx",
                    help="which source to show and check in the cache")  # fmt: skip
    vc.add_argument("--cache-dir", metavar="DIR", help="cache root (default: $YOMIAGE_CACHE)")
    vc.add_argument("--json", action="store_true", help="one JSON list")
    vc.set_defaults(func=_cmd_voices)

    dev = sub.add_parser(
        "dev",
        help="developer tools: synthetic voices for tests and benchmarks",
        epilog="examples:\n  yomiage dev make-voice /tmp/voice --size full --seed 0\n"
        "  yomiage dev make-bert /tmp/bert --size tiny",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from yomiage.devtools.synthetic import add_commands

    add_commands(dev.add_subparsers(dest="tool", metavar="TOOL", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except BrokenPipeError:  # the reader went away (`| head`): not an error
        return 0
    except (YomiageError, ValueError, OSError) as exc:
        print(f"yomiage {args.command}: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:
        print(
            f"yomiage {args.command}: {exc}; install the extra it needs, "
            "e.g. pip install 'yomiage[torch]'",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
