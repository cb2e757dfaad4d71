"""Graphs the cache holds made from a bundle's (a decoder in another layout, a flow with
bfloat16 weights): each made once, in a child process, and checked before each use.

The rewrite is export code with the ``onnx`` package, which a serving process never
imports (+12 MB resident) and which reads the graph's weights once more, hence the
child (``python -m yomiage.plan_child.<program>``, :mod:`yomiage.plan_child.made`).
Each made folder records the sha256 of its files as made
(:func:`~yomiage.runtime.integrity.record_made`): one whose files are no longer so is
removed and made again (a decoder with flipped weights loaded and spoke noise on
every start).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from yomiage.lifeline import child_environment
from yomiage.progress import report_progress
from yomiage.runtime.integrity import NOT_RECORDED, unlike_made

log = logging.getLogger(__name__)

MAKE_TIMEOUT_S = 600.0


def kept(graph: Path, files: Iterable[str]) -> bool:
    """Whether ``graph``'s folder holds ``files`` as they were made; a folder that does not
    is removed (logged), to be made again."""
    if not graph.is_file():
        return False
    unlike = unlike_made(graph.parent, files)
    if not unlike:
        return True
    name, why = next(iter(unlike.items()))
    level = logging.INFO if why == NOT_RECORDED else logging.WARNING
    log.log(level, "%s: %s; it is made again", graph.parent / name, why)
    shutil.rmtree(graph.parent, ignore_errors=True)
    return False


def make_in_child(program: str, args: Sequence[str], what: str, error: type[Exception]) -> None:
    """Run ``python -m <program> ARGS`` to make a graph (``what``, shown as progress);
    ``error`` with the child's last line of stderr, or the reason it could not run."""
    report_progress(what)
    command = [sys.executable, "-m", program, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAKE_TIMEOUT_S,
                              check=False, env=child_environment())  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"cannot finish {what}: {exc}") from exc
    if done.returncode != 0:
        raise error((done.stderr.strip().splitlines() or ["no output"])[-1])


def check_made(graph: Path, files: Iterable[str], error: type[Exception]) -> None:
    """``error`` where the folder just made for ``graph`` is not as made: a damaged one
    that could not be removed (a read-only cache)."""
    unlike = unlike_made(graph.parent, files)
    if unlike:
        name, why = next(iter(unlike.items()))
        raise error(f"{graph.parent / name}: {why}, and it cannot be made again")
