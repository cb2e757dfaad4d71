"""``yomiage bench``: on this machine and this voice, which thread count and decoder
precision to run.

Each configuration runs in a fresh process (:mod:`yomiage.cli.bench_worker`), so
its load time and peak memory are what a user's own program would see. Before
them one more process loads the voice once, so the first measured configuration
does not pay for a download, a conversion or a cold disk cache. Progress goes
to stderr, a line as each configuration starts, as each step ends and as yomiage
warns (each step of measuring a plan: minutes, the first time a thread count
runs here); the table, each configuration's plan and what they imply (or
``--json``) go to stdout (:mod:`yomiage.cli.bench_summary`). The load average is
read around each configuration, since other work on the cores makes any timing
meaningless (:mod:`yomiage.cli.bench_load`).
"""

from __future__ import annotations

import argparse
import json
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yomiage.cli.engine_options import add_engine_arguments, engine_spec
from yomiage.errors import YomiageError
from yomiage.runtime.plan.request import DECODER_PRECISIONS

if TYPE_CHECKING:
    from yomiage.cli.bench_plans import Configuration
    from yomiage.cli.bench_report import Row
    from yomiage.cli.bench_worker import BenchJob

# About 1.5 s and 10 s of speech: a bot's reply, and a paragraph of a book
# (Natsume Soseki, "I Am a Cat", in the public domain).
SHORT_TEXT = "こんにちは、今日はいい天気ですね。"
LONG_TEXT = (
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
    "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。"
)
DEFAULT_THREADS = "1,2,all"
# Fewer timed runs than this and one slow run (another process on the cores) decides
# the median: a busy 2-core machine measured 45.6x, 11.5x and 18.5x in three single runs.
FIRM_REPEAT = 3
DEFAULT_DECODERS = ("auto", "fp32")
WORKER = "yomiage.cli.bench_worker"

EXAMPLES = """examples:
  yomiage bench --voice jvnv-F1-jp
  yomiage bench --model ./my-voice --threads 1,2,4,8 --decoder auto,fp32,int8
  yomiage bench --model ./my-voice --quick --json | jq .recommendation
"""


class BenchError(YomiageError):
    """A configuration could not be measured: its worker reported an error or died."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench",
        help="measure speed, first audio, memory and load time per thread count",
        description="Measure a voice on this machine for each thread count and decoder "
        "precision, each in a fresh process, and say which to run.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        conflict_handler="resolve",  # --threads and --decoder take lists here
    )
    add_engine_arguments(p, many=False)
    p.add_argument(
        "--threads",
        type=thread_list,
        default=thread_list(DEFAULT_THREADS),
        metavar="LIST",
        help=f"thread counts to compare, e.g. 1,2,4 ('all': one per physical core; "
        f"default {DEFAULT_THREADS})",
    )
    p.add_argument(
        "--decoder",
        type=decoder_list,
        default=DEFAULT_DECODERS,
        metavar="LIST",
        help=f"decoder precisions to compare, from {','.join(DECODER_PRECISIONS)} "
        f"(default {','.join(DEFAULT_DECODERS)}; one that auto already loads is measured once)",
    )
    p.add_argument(
        "--repeat",
        type=positive,
        default=3,
        metavar="N",
        help="timed runs per text after one warm-up; the median counts (default 3)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="the short text only (still --repeat runs each): a fast check",
    )
    texts = p.add_mutually_exclusive_group()
    texts.add_argument("--text", help="read this text instead of the short and long ones")
    texts.add_argument("--text-file", metavar="PATH", help="read this file's text instead")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=run)


def thread_list(value: str) -> tuple[int | str, ...]:
    """``1,2,all`` as ``(1, 2, "all")``; ArgumentTypeError for anything else."""
    out: list[int | str] = []
    for part in value.split(","):
        part = part.strip().lower()
        if part == "all":
            out.append(part)
            continue
        number = int(part) if part.isdigit() else 0
        if number < 1:
            raise argparse.ArgumentTypeError(
                f"thread counts are positive numbers or 'all', e.g. 1,2,all; not {part!r}"
            )
        out.append(number)
    return tuple(out)


def decoder_list(value: str) -> tuple[str, ...]:
    """``auto,fp32`` as a tuple of decoder precisions; ArgumentTypeError naming the known."""
    out = tuple(part.strip().lower() for part in value.split(","))
    for part in out:
        if part not in DECODER_PRECISIONS:
            raise argparse.ArgumentTypeError(
                f"decoder precisions are {', '.join(DECODER_PRECISIONS)}; not {part!r}"
            )
    return tuple(dict.fromkeys(out))


def positive(value: str) -> int:
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"a positive number, not {value!r}")
    return int(value)


def thread_counts(asked: tuple[int | str, ...], cores: int) -> tuple[int, ...]:
    """The thread counts to measure, ``all`` as ``cores``, each once, smallest first."""
    return tuple(sorted({cores if n == "all" else int(n) for n in asked}))


def texts_to_read(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    if args.text_file is not None:
        try:
            text = Path(args.text_file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"cannot read {args.text_file}: no such file") from None
    else:
        text = args.text
    if text is not None:
        if not text.strip():
            raise ValueError("the text is empty")
        return (("given", text.strip()),)
    both = (("short", SHORT_TEXT), ("long", LONG_TEXT))
    return both[:1] if args.quick else both


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from yomiage._version import __version__
    from yomiage.cli import bench_report
    from yomiage.cli.bench_load import own_threads
    from yomiage.cli.bench_summary import Measured, configurations_json, summary
    from yomiage.cli.bench_worker import BenchJob

    texts = texts_to_read(args)
    repeat = args.repeat
    machine = bench_report.machine()
    threads = thread_counts(args.threads, machine["physical_cores"])
    decoders = list(args.decoder)
    base = engine_spec(argparse.Namespace(**{**vars(args), "threads": None, "decoder": "auto"}))
    # bench is where this machine's plan is measured, where none is kept yet: a load
    # elsewhere never waits for it (it takes the plan shipped for the CPU family).
    base = replace(base, measure_plan=True)
    if len(base.voices) != 1:
        raise ValueError("bench measures one voice: give --voice NAME or --model SOURCE, not both")
    base.declare().close()  # an unknown voice or device, before any process starts
    [(voice, source)] = base.voices

    say(f"bench: loading voice {voice} once (a first use downloads or converts it)…")
    default, _ = _measure(BenchJob(base, (), 0), "bench:", "loading the voice")
    auto_loads = bench_report.resolved_precision(default.runtime)
    notes = []
    if repeat < FIRM_REPEAT:
        notes.append(f"speeds from {_count(repeat, 'timed run')} per configuration: rough; "
                     f"--repeat {FIRM_REPEAT} or more for a firm recommendation")  # fmt: skip
    if "auto" in decoders and auto_loads in decoders:
        # The same engine twice: measure it once, under the name the user would type.
        decoders.remove(auto_loads)
        notes.append(f"decoder {auto_loads} is what auto loads here: measured once, as auto")
        say(f"bench: {notes[-1]}")
    pairs = [(count, decoder) for decoder in decoders for count in threads]
    runs = _count(repeat, "timed run")
    say(f"bench: {_count(len(pairs), 'configuration')}, each in a fresh process; "
        f"{_count(len(texts), 'text')}, {runs} each after a warm-up")  # fmt: skip

    rows: list[bench_report.Row] = []
    configs: list[Configuration] = []
    for index, (count, decoder) in enumerate(pairs, 1):
        job = BenchJob(replace(base, threads=count, decoder_precision=decoder), texts, repeat)
        config, measured = _measure(job, f"[{index}/{len(pairs)}]")
        configs.append(config)
        rows.extend(measured)
        cores = machine["logical_cores"] or 1
        own = own_threads([c.threads for c in configs], cores)[-1]
        why = config.load.disturbed(cores, own)
        if why:
            say(f"[{index}/{len(pairs)}]   the machine was busy: {why}; these timings are "
                "not reliable")  # fmt: skip

    found = Measured(tuple(rows), tuple(configs), default, tuple(notes), machine, repeat)
    recommendation = bench_report.recommend(rows)
    if args.json:
        about = {
            "yomiage": __version__,
            "machine": machine,
            "voice": voice,
            "source": source,
            "texts": dict(texts),
            "repeat": repeat,
            "threads": list(threads),
            "decoders": decoders,
            "notes": list(found.all_notes),
            "plan": default.plan or None,
            "plan_options": list(default.plan_options),
            "plan_threads": [list(t) for t in default.plan_threads],
            "plan_faster_over_budget": default.faster_over_budget,
            **configurations_json(found),
        }
        report = bench_report.report(rows, recommendation, **about)
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return 0
    print(summary(found, recommendation, version=__version__, voice=voice))
    return 0


def _measure(job: BenchJob, tag: str, name: str = "") -> tuple[Configuration, list[Row]]:
    """One configuration and its rows, one per text, saying each step on stderr as it
    ends and each warning as it comes (a plan measured for the first time takes minutes:
    its steps are shown), with the load average before and after it."""
    from yomiage.cli.bench_load import LoadReading, load_average
    from yomiage.cli.bench_plans import Configuration
    from yomiage.cli.bench_report import Row
    from yomiage.cli.runtime_info import readable

    count, decoder = job.spec.threads, job.spec.decoder_precision
    config = name or Configuration(count, decoder, "", 0.0).name
    if job.texts:
        say(f"{tag} {config}: loading…")
    before, started = load_average(), time.perf_counter()
    loaded: dict[str, Any] = {}
    peak_mb, measured = None, []
    for event in _events(job, config):
        if event["event"] == "log":
            say(f"{tag}   {time.perf_counter() - started:6.1f} s  {event.get('message')}")
        elif event["event"] == "loaded":
            loaded = event
            plan_s = event.get("plan_measure_s", 0.0)
            measuring = f" after measuring its plan for {plan_s:.1f} s" if plan_s else ""
            say(f"{tag}   loaded in {event['load_s']:.2f} s{measuring}: "
                f"{readable(event['runtime'])}")  # fmt: skip
        elif event["event"] == "measured":
            measured.append(event)
            say(f"{tag}   {event['text']} text: {event['speed']:.2f}x real time, "
                f"first audio {event['first_audio_s']:.3f} s")  # fmt: skip
        elif event["event"] == "done":
            peak_mb = event["peak_mb"]
    if job.texts:
        peak = "?" if peak_mb is None else f"{peak_mb:.0f} MB"
        say(f"{tag}   peak memory {peak}; done in {time.perf_counter() - started:.1f} s")
    result = Configuration.from_event(count, decoder, loaded, LoadReading(before, load_average()))
    return result, [
        Row(count or 0, decoder, result.runtime, m["text"], m["audio_s"], m["wall_s"],
            m["speed"], m["first_audio_s"], peak_mb, result.load_s, result.runs,
            result.plan_measure_s)
        for m in measured
    ]  # fmt: skip


def _events(job: Any, config: str) -> Iterator[dict[str, Any]]:
    """The worker's events for ``job``, as they come; BenchError naming ``config`` if it
    reports an error, dies, or ends without finishing."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        try:
            if process.stdin is None or process.stdout is None:
                raise BenchError(f"{config}: the worker process has no pipes")
            try:
                process.stdin.write(pickle.dumps(job))
                process.stdin.close()
            except BrokenPipeError:
                pass  # it died at once: its status and stderr say why, below
            done = False
            for raw in process.stdout:
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue  # a library's own print
                if not isinstance(event, dict) or "event" not in event:
                    continue
                if event["event"] == "error":
                    raise BenchError(f"{config}: {event.get('message')}")
                done = done or event["event"] == "done"
                yield event
            status = process.wait()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        if status != 0 or not done:
            errors.seek(0)
            raise BenchError(f"{config}: the worker {_how(status)}{_last_line(errors.read())}")


def _how(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}" if status else "ended before finishing"


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return f": {lines[-1]}" if lines else ""
