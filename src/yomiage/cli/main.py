"""The ``yomiage`` command line: the parser, logging, and one line per error.

Each subcommand lives in a module of this package with a ``register``
function. Logging is configured here and only here, never at import.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from yomiage._version import __version__
from yomiage.errors import YomiageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yomiage", description="Japanese text-to-speech for Style-Bert-VITS2 JP-Extra voices."
    )
    parser.add_argument("--version", action="version", version=f"yomiage {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from yomiage.cli import batch, convert, generate, serve, sources, text

    for command in (generate, batch, serve, text, convert, sources):
        command.register(sub)

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
    if not getattr(args, "quiet", False):
        # Downloads and first-use conversions take minutes: say what happens by default.
        for name in ("yomiage.sources", "yomiage.artifacts"):
            logging.getLogger(name).setLevel(min(level, logging.INFO))
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
