"""``yomiage g2p`` and ``yomiage dict``: what a voice is fed, and the user's words."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator

from yomiage.cli.engine_options import add_encoding_argument, add_reading_argument
from yomiage.errors import YomiageError
from yomiage.text.user_word import DEFAULT_PRIORITY, DEFAULT_WORD_TYPE, WORD_TYPES

EXAMPLES_G2P = """examples:
  yomiage g2p --json "円周率は3.14、成功率は50%です。"
  echo "GitHubでJSONを公開。" | yomiage g2p --json -
  yomiage g2p - --encoding cp932 < shift_jis.txt
"""
EXAMPLES_DICT = """examples:
  yomiage dict add 担々麺 タンタンメン --accent 3
  yomiage dict list
  yomiage dict remove 担々麺
  yomiage dict add 担々麺 タンタンメン --user-dict ./words.json

The words live in one JSON file (default: the per-user one; $YOMIAGE_USER_DICT
or --user-dict choose another), at most 10,000 words. A running server that
uses the same file picks up changes on its next request.
"""
USER_DICT_HELP = "user dictionary JSON (default: the per-user one)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    g2p = sub.add_parser(
        "g2p",
        help="show the phonemes a voice would be fed",
        epilog=EXAMPLES_G2P,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g2p.add_argument("text", nargs="+", help="text to read; '-' reads one text per line from stdin")
    g2p.add_argument("--json", action="store_true", help="one JSON object per input, one per line")
    add_encoding_argument(g2p, "stdin")
    add_reading_argument(g2p)
    g2p.add_argument(
        "--user-dict", metavar="PATH", help="user dictionary JSON (default: the per-user one)"
    )
    g2p.set_defaults(func=run_g2p)

    dct = sub.add_parser(
        "dict",
        help="manage the user dictionary",
        epilog=EXAMPLES_DICT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dct.add_argument("--user-dict", metavar="PATH", help=USER_DICT_HELP)
    actions = dct.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add or replace a word")
    _user_dict_argument(add)
    add.add_argument("surface", help="the word as written, e.g. 担々麺")
    add.add_argument("reading", help="its reading in katakana, e.g. タンタンメン")
    add.add_argument(
        "--accent", type=int, default=None, help="mora after which pitch falls (0: flat)"
    )
    add.add_argument(
        "--priority", type=int, default=DEFAULT_PRIORITY, help="0-10, higher wins more often"
    )
    add.add_argument("--type", default=DEFAULT_WORD_TYPE, choices=list(WORD_TYPES))
    lst = actions.add_parser("list", help="list the words")
    lst.add_argument("--json", action="store_true")
    _user_dict_argument(lst)
    rm = actions.add_parser("remove", help="remove a word")
    rm.add_argument("surface")
    _user_dict_argument(rm)
    dct.set_defaults(func=run_dict)


def _user_dict_argument(parser: argparse.ArgumentParser) -> None:
    """``--user-dict`` after the action too (``dict add W R --user-dict X``), as
    ``generate`` takes it; SUPPRESS keeps one given before the action."""
    parser.add_argument("--user-dict", metavar="PATH", default=argparse.SUPPRESS,
                        help=USER_DICT_HELP)  # fmt: skip


def _texts(args: list[str], encoding: str | None) -> Iterator[str]:
    """Each text given; for '-', each line of stdin as it comes, decoded strictly
    (a line that is not text in ``encoding`` stops it, naming the likely one)."""
    from yomiage.text_input import lines

    for text in args:
        if text == "-":
            for _, line in lines(sys.stdin.buffer, encoding, where="stdin"):
                line = line.rstrip("\r\n")
                if line.strip():
                    yield line
        else:
            yield text


def run_g2p(args: argparse.Namespace) -> int:
    from yomiage.text import Frontend, default_user_dictionary_path

    frontend = Frontend(args.user_dict or default_user_dictionary_path(), reading=args.reading)
    status = 0
    for text in _texts(args.text, args.encoding):
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


def run_dict(args: argparse.Namespace) -> int:
    from yomiage.text import Frontend, UserDictionary, default_user_dictionary_path

    path = args.user_dict or default_user_dictionary_path()
    dictionary = UserDictionary(path)
    if args.action in ("add", "remove"):
        # Through a frontend, so a word is compiled (and checked) before it is saved.
        frontend = Frontend(dictionary)
        if args.action == "add":
            word = frontend.add_word(
                args.surface, args.reading, args.accent, args.priority, args.type
            )
            print(f"added {word.surface} = {word.reading} (accent {word.accent}) to {path}")
        else:
            removed = frontend.remove_word(args.surface)
            print(f"removed {removed.surface} from {path}")
        return 0
    if dictionary.problem:  # no words to list is not the same as none in the file
        print(f"yomiage dict: {dictionary.problem}", file=sys.stderr)
        return 1
    words = dictionary.words
    # The file on stderr, so stdout stays the words alone (for scripts and --json).
    count = f"{len(words)} word{'s' * (len(words) != 1)}" if words else "no words"
    print(f"{count} in {path}", file=sys.stderr)
    if args.json:
        print(json.dumps([w.__dict__ for w in words], ensure_ascii=False))
        return 0
    for w in words:
        print(f"{w.surface}\t{w.reading}\taccent={w.accent}\tpriority={w.priority}\t{w.word_type}")
    for entry in dictionary.skipped:
        print(f"yomiage dict: skipped {entry.surface or entry.entry!r}: {entry.reason}",
              file=sys.stderr)  # fmt: skip
    return 0
