"""The ``yomiage`` command line: the parser, logging, and one line per error.

Each subcommand lives in a module of this package with a ``register``
function. Logging is configured here and only here, never at import.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import re
import sys
from collections.abc import Sequence
from typing import NoReturn, cast

from yomiage._version import __version__
from yomiage.errors import YomiageError, install_hint

USAGE_ERROR = 1  # docs/cli.md: every error, a usage error too, exits 1
_CHOICE = re.compile(r"invalid choice: '?([^' ]*)'? \(choose from (.*)\)")


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's error form: the (sub)command's usage, one line
    ``yomiage COMMAND: message`` with a "did you mean" where a name is close, exit 1.

    Subparsers are made with the parent's class, so every level answers this way.
    """

    def error(self, message: str) -> NoReturn:
        found = _CHOICE.search(message)
        if found:
            choices = [c.strip().strip("'") for c in found.group(2).split(",")]
            message += _did_you_mean(found.group(1), choices)
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: {message}\n")

    def unrecognized(self, extras: list[str]) -> NoReturn:
        """Arguments no parser took, reported by the command they were given to."""
        options = [o for action in self._actions for o in action.option_strings]
        hint = next(
            (h for e in extras if e.startswith("-") and (h := _did_you_mean(e, options))), ""
        )
        self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")


def _did_you_mean(given: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(given.split("=", 1)[0], known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Parser:
    """The deepest (sub)command parser that ``args`` went through (``dict add``: add's)."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = subs and getattr(args, subs[0].dest or "", None)
        if not chosen or chosen not in subs[0].choices:
            return cast(Parser, parser)  # argparse makes subparsers of the parent's class
        parser = subs[0].choices[chosen]


def _message(exc: Exception) -> str:
    """The error's one line; an OS error names its file in words, not ``[Errno 2]``."""
    if isinstance(exc, OSError) and not isinstance(exc, YomiageError) and exc.filename:
        return f"{exc.filename}: {(exc.strerror or str(exc)).lower()}"
    return str(exc)


def build_parser() -> Parser:
    parser = Parser(
        prog="yomiage", description="Japanese text-to-speech for Style-Bert-VITS2 JP-Extra voices."
    )
    parser.add_argument("--version", action="version", version=f"yomiage {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from yomiage.cli import batch, bench, convert, generate, serve, sources, text, vvpp

    for command in (generate, batch, serve, text, convert, sources, bench, vvpp):
        command.register(sub)

    dev = sub.add_parser(
        "dev",
        help="developer tools: synthetic voices for tests and benchmarks",
        epilog="examples:\n  yomiage dev make-voice /tmp/voice --size full --seed 0\n"
        "  yomiage dev make-bert /tmp/bert --size tiny",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from yomiage.devtools.synthetic import add_commands

    tools = dev.add_subparsers(dest="tool", metavar="TOOL", required=True)
    add_commands(cast("argparse._SubParsersAction[argparse.ArgumentParser]", tools))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        _command_parser(parser, args).unrecognized(extras)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "quiet", False):
        # Downloads, first-use conversions and voice installs take minutes: say what
        # happens by default; and when a server takes the user dictionary's new words.
        for name in (
            "yomiage.sources",
            "yomiage.converted",
            "yomiage.aivmx",
            "yomiage.server.voicevox.aivm_routes",
            "yomiage.text.frontend",
        ):
            logging.getLogger(name).setLevel(min(level, logging.INFO))
    try:
        return int(args.func(args))
    except BrokenPipeError:  # the reader went away (`| head`): not an error
        return 0
    except (YomiageError, ValueError, OSError) as exc:
        print(f"yomiage {args.command}: {_message(exc)}", file=sys.stderr)
        return 1
    except ImportError as exc:
        print(
            f"yomiage {args.command}: {exc}; install the extra it needs, "
            f"e.g. {install_hint('torch')}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
