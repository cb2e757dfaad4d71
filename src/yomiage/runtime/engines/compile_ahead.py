"""OpenVINO's compiling of a cached graph done in a process of its own, before the voice's
process loads what it wrote.

A process that compiles a graph holds more at its peak than one that maps the compiled
blob: a voice whose plan puts the full-size decoder on OpenVINO peaked ~50 MB higher at
its first load than at every load after it, over its budget where the plan fitted it
(issue 48). The measuring compiles ahead so (``yomiage.plan_child.measure``); a voice that
takes a plan measured elsewhere (:mod:`yomiage.runtime.plan.priors`) does it here, once
per graph, OpenVINO version and cache: the program ``yomiage.plan_child.compile`` writes
the blob and its recorded sha256 (:mod:`yomiage.runtime.engines.compiled_cache`), and the
voice's process then loads that. Where it fails, the graph is compiled in-process as
before (logged).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

from yomiage.lifeline import child_environment
from yomiage.progress import report_progress

log = logging.getLogger(__name__)

# Far longer than compiling the full-size decoder takes on a slow, busy machine.
COMPILE_TIMEOUT_S = 600.0


def has_blob(folder: Path) -> bool:
    """Whether OpenVINO has written a compiled graph into ``folder``."""
    return any(folder.glob("*.blob"))


def compile_ahead(
    path: Path, precision: str, threads: int, folder: Path, *, frame_mask: bool
) -> bool:
    """Compile the graph at ``path`` for OpenVINO in ``precision`` into its cache
    ``folder`` (``<cache>/<OpenVINO version and form>/<graph sha256>``) in a child
    process; whether it did."""
    args = {"path": str(path), "precision": precision, "sha256": folder.name,
            "threads": threads, "cache_dir": str(folder.parents[1]),
            "frame_mask": frame_mask}  # fmt: skip
    command = [sys.executable, "-m", "yomiage.plan_child.compile", json.dumps(args)]
    report_progress(f"compiling {path.name} for OpenVINO ({precision}), once per machine")
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=COMPILE_TIMEOUT_S, env=child_environment())  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("compiling %s ahead failed (%s); it is compiled in this process", path.name,
                    exc)  # fmt: skip
        return False
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        log.warning("compiling %s ahead failed (%s); it is compiled in this process", path.name,
                    tail)  # fmt: skip
        return False
    return True
