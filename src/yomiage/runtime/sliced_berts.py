"""The BERT graph with its relative-position tables cut to the positions each call
reads (:mod:`yomiage.export.bert_positions`), made once per BERT graph and kept.

The same features bit for bit, from less work on short sentences (a q8 call of 5 tokens
~2x faster, 40 tokens 1.4-1.6x, 300 tokens the same; 510 tokens, more than a request's
calls ever hold, 5-7% slower) and fewer pages of the tables read (the full-size voice's
peak 20-45 MB lower): measured with ``benchmarks/bert_positions.py``,
benchmarks/RESULTS.md (the Xeon with AMX).

Only the graph changes, not its weights: the cache keeps the rewritten graph alone
(~190 KB for the full-size BERT, in ``<cache>/berts/<the graph file's sha256>/``) and
ONNX Runtime reads the weights from the BERT's own folder
(:meth:`~yomiage.runtime.engines.sessions.Sessions.open`'s ``weights_dir``). Every
BERT loaded so benefits, whenever and by whatever it was converted. A graph without
DeBERTa's tables is recorded as such (``sliced.json``) and runs as it is. Made in a
child process, as the cache's other graphs are (:mod:`yomiage.runtime.made_graphs`
says why); checked before each use.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from pathlib import Path

from yomiage.json_file import read_json_object
from yomiage.runtime.made_graphs import check_made, kept, make_in_child

log = logging.getLogger(__name__)

SLICED_BERT_CHILD = "yomiage.plan_child.sliced_bert"  # its arguments: GRAPH FOLDER
GRAPH = "bert.onnx"
RECORD = "sliced.json"  # {"tables": how many were sliced}; 0: the graph runs as it is
MADE_FILES = (GRAPH, RECORD)
# What the rewrite names the nodes it adds: a graph that has them is sliced already.
SPAN_PREFIX = "positions_span_"
# A graph file larger than this holds its weights inside (another exporter's, such as
# HayaKoe's): rewritten, the cache would hold a copy of them all. It runs as it is.
MAX_GRAPH_BYTES = 16 * 2**20


class SlicedBertError(RuntimeError):
    """The sliced graph could not be made or kept (the BERT's own graph runs)."""


class SlicedBerts:
    """BERT graphs with sliced position tables, under one folder of the cache."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def graph(self, bert: Path) -> Path | None:
        """The graph to run for the BERT graph ``bert``: the kept sliced one, made now if
        need be; None where ``bert`` is sliced already, has no tables to slice or holds
        its weights inside (none of which takes a child process to tell). SlicedBertError
        if it cannot be made, written or read; OSError if ``bert`` cannot be read."""
        if bert.stat().st_size > MAX_GRAPH_BYTES:
            return None
        graph = bert.read_bytes()
        if SPAN_PREFIX.encode() in graph or b"Tile" not in graph:
            return None
        folder = self.root / hashlib.sha256(graph).hexdigest()
        tables = self._kept(folder)
        if tables is None:
            started = time.perf_counter()
            what = f"cutting {bert.name}'s position tables to what each call reads (once)"
            make_in_child(SLICED_BERT_CHILD, [str(bert), str(folder)], what, SlicedBertError)
            check_made(folder / RECORD, _made_files(folder), SlicedBertError)
            tables = _tables(folder / RECORD)
            log.info("made %s (%.1f s)", folder, time.perf_counter() - started)
        return folder / GRAPH if tables else None

    def _kept(self, folder: Path) -> int | None:
        """The tables sliced in ``folder`` as kept; None where it is not kept whole (it is
        removed, to be made again)."""
        if kept(folder / RECORD, _made_files(folder)):
            tables = _tables(folder / RECORD)
            if not tables or (folder / GRAPH).is_file():
                return tables
        shutil.rmtree(folder, ignore_errors=True)  # what is left of it (a graph, recorded)
        return None


def _made_files(folder: Path) -> tuple[str, ...]:
    """What a folder holds as made: the graph and its record, or the record alone."""
    return MADE_FILES if (folder / GRAPH).is_file() else (RECORD,)


def _tables(record: Path) -> int:
    try:
        return int(read_json_object(record)["tables"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SlicedBertError(f"cannot read {record}: {exc}") from exc
