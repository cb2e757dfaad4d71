"""The one line per voice that ``-v`` shows: which engine, precision and threads run it.

A user comparing speeds (OpenVINO bf16 against ONNX Runtime, or a thread count)
needs to see what actually loaded, not what was asked for: the text comes from
the loaded voice's own ``runtime`` (what :mod:`yomiage.runtime.engines.placement`
chose, after any fallback).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger("yomiage.cli")


def readable(runtime: str) -> str:
    """``runtime`` with the engines' proper names (``onnxruntime`` -> ``ONNX Runtime``)."""
    from yomiage.runtime.engines.placement import ENGINES

    titles: dict[str, str] = {e.name: e.title for e in ENGINES.values()}
    for name, shown in {**titles, "torch": "PyTorch"}.items():
        runtime = runtime.replace(name, shown)
    return runtime


def voice_runtime_lines(
    runtimes: Mapping[str, str], threads: int | None, bert_precision: str | None = None
) -> list[str]:
    """``voice NAME: RUNTIME, BERT PRECISION, N threads`` for each voice (``threads``
    None: the default, one per physical core, unless the voice's plan measured
    another count faster: its runtime then says so)."""
    from yomiage.runtime.engines.cpu import physical_cores

    count = threads or physical_cores()
    said = f"{count} thread{'s' * (count != 1)}" + ("" if threads else " (one per core)")
    bert = f"BERT {bert_precision}" if bert_precision else "BERT"
    lines = []
    for name, runtime in runtimes.items():
        if "thread" in runtime:  # the voice's own count: the BERT's is the backend's
            tail = f"{bert} on {said}"
        else:
            tail = f"{bert}, {said}" if bert_precision else said
        lines.append(f"voice {name}: {readable(runtime)}, {tail}")
    return lines


def log_voice_runtimes(
    runtimes: Mapping[str, str], threads: int | None, bert_precision: str | None = None
) -> None:
    """Log :func:`voice_runtime_lines` at INFO (shown by ``-v``)."""
    for line in voice_runtime_lines(runtimes, threads, bert_precision):
        log.info("%s", line)
