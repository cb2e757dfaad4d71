"""``yomiage batch``: many texts (chapters, a JSONL corpus) to one audio file each.

Resumable: an item whose audio is already in OUTDIR, made from the same text,
voice and options, is skipped, so an interrupted job is finished by running
the same command again. Worker processes each load the voices once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from yomiage.audio.formats import FORMATS as AUDIO_FORMATS
from yomiage.cli.engine_options import (
    add_encoding_argument,
    add_engine_arguments,
    add_synthesis_arguments,
    engine_spec,
    option_fields,
)

if TYPE_CHECKING:
    from yomiage.batch import ItemPool

EXAMPLES = """examples:
  yomiage batch book/ch*.txt --model ./my-voice -o audio/ --format flac
  yomiage batch aozora/*.txt --encoding cp932 --voice jvnv-F1-jp -o audio/   # Shift_JIS
  yomiage batch corpus.jsonl --voice jvnv-F1-jp --voice jvnv-M1-jp -o out/ --jobs 2
  yomiage batch book/*.txt --model hf://owner/repo/voice -o /shared/audio --ray auto --jobs 16
  (corpus.jsonl: one {"id": "...", "text": "...", "voice"?: "...", "options"?: {...}} per line;
   "options": {"speed": 0.9} makes an item 10% shorter, faster: speed is a length scale)

An item has at most 200,000 characters (about 8 hours of speech); split longer texts.
"""
FORMATS = tuple(f for f in AUDIO_FORMATS if f != "pcm")  # headerless samples: not a file to keep
INTERRUPTED = 130  # exit status after Ctrl-C (128 + SIGINT), as the other commands
TERMINATED = 143  # after SIGTERM (128 + SIGTERM), as a shell reports a process it ended
CLOSE_SECONDS = 10.0  # how long an interrupted job waits for its killed workers' pool


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "batch",
        help="read many texts aloud, one audio file each (resumable)",
        description="Read text files (one item each) or JSONL files (one item per line) "
        "aloud into OUTDIR/<id>.<format>.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help=".txt files and .jsonl files")
    add_encoding_argument(p, "every input")
    p.add_argument("-o", "--output-dir", required=True, metavar="OUTDIR", help="where audio goes")
    p.add_argument("--format", choices=FORMATS, default="wav", help="audio format (default wav)")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="worker processes, each with its own engine (default 1; threads are shared out)",
    )
    p.add_argument(
        "--retries", type=int, default=1, metavar="N", help="retries of a failed item (default 1)"
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the --jobs workers as actors on a Ray cluster: ADDRESS (auto, "
        "ray://head:10001), or a new local one when left out (needs yomiage[ray])",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    p.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more logging"
    )
    add_engine_arguments(p, many=True)
    add_synthesis_arguments(p)
    p.set_defaults(func=run)


def job_options(args: argparse.Namespace) -> dict[str, Any]:
    """The synthesis flags given, as SynthesisOptions fields (checked by the workers)."""
    from yomiage.options import SynthesisOptions

    fields = option_fields(args)
    if "speaker_id" in fields:
        if not str(fields["speaker_id"]).isdigit():
            raise ValueError("--speaker-id takes the speaker's number in a batch")
        fields["speaker_id"] = int(fields["speaker_id"])
    SynthesisOptions.from_fields(fields)  # ranges checked before any worker starts
    return fields


def run(args: argparse.Namespace) -> int:
    from yomiage.batch import (
        BatchSpec,
        OutputFolder,
        ProcessItemPool,
        read_items,
        run_job,
    )
    from yomiage.cli.batch_progress import BatchProgress
    from yomiage.runtime.engines.cpu import physical_cores

    if args.jobs < 1 or args.retries < 0:
        raise ValueError("--jobs must be at least 1 and --retries at least 0")
    items = read_items(args.inputs, args.encoding)
    threads = args.threads or max(1, physical_cores() // args.jobs)
    spec = BatchSpec(engine_spec(args, threads=threads), fmt=args.format, options=job_options(args))
    if args.ray is not None:
        from yomiage.batch.on_ray import import_ray

        import_ray()  # says which extra to install before anything else happens
    outputs = OutputFolder(args.output_dir, args.format)
    progress = BatchProgress(len(items), quiet=args.quiet, tty=sys.stderr.isatty())
    if not args.quiet:
        print(
            f"yomiage batch: {len(items)} items into {outputs.root} "
            f"({args.jobs} worker(s) x {threads} thread(s); loading the voices first)",
            file=sys.stderr,
        )
    if args.ray is not None:
        from yomiage.batch.on_ray import RayItemPool

        pool: ItemPool = RayItemPool(spec, args.jobs, args.ray or None)
    else:
        pool = ProcessItemPool(spec, args.jobs, on_progress=progress.item_progress)
    try:
        with _sigterm_interrupts():
            summary = run_job(items, outputs, spec, pool, retries=args.retries, on_event=progress)
    except KeyboardInterrupt as stop:
        progress.close()
        print("yomiage batch: interrupted; run again to resume", file=sys.stderr)
        code = TERMINATED if isinstance(stop, Terminated) else INTERRUPTED
        _close_at_once(pool, code)
        return code
    except BaseException:
        progress.close()
        pool.close()
        raise
    progress.close()
    pool.close()
    progress.report(summary)
    return 1 if summary.failed else 0


def _close_at_once(pool: ItemPool, code: int) -> None:
    """Kill the workers; if the pool's own shutdown does not end within
    :data:`CLOSE_SECONDS`, leave the process now with ``code``. A worker killed
    mid-write can leave a multiprocessing lock held for good, and waiting on it
    would hang an interrupted job; every item made is already in its final place."""
    closer = threading.Thread(target=pool.close, kwargs={"now": True}, daemon=True)
    closer.start()
    closer.join(CLOSE_SECONDS)
    if closer.is_alive():
        sys.stderr.flush()
        os._exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is (a second one while stopping stops at once)."""


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread, so a job stopped by a
    service manager or ``kill`` stops as Ctrl-C stops it: workers killed, the
    message printed, every item already made kept."""

    def stop(signum: int, frame: object) -> None:
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
