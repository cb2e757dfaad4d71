"""The child process that cuts a BERT graph's position tables to what each call reads
(``python -m yomiage.plan_child.sliced_bert GRAPH FOLDER``), for
:class:`~yomiage.runtime.sliced_berts.SlicedBerts` (:mod:`yomiage.runtime.made_graphs`
says why in a child)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from yomiage.atomic import write_atomic
from yomiage.lifeline import die_with_parent_from_environment
from yomiage.plan_child.made import publish
from yomiage.runtime.sliced_berts import GRAPH, MADE_FILES, RECORD, SlicedBertError


def make_sliced_bert(graph: Path, folder: Path) -> int:
    """Write ``graph`` (its weights not read) with its position tables sliced into
    ``folder`` as ``bert.onnx``, its weights still referred to by their file names,
    with ``sliced.json``; or ``sliced.json`` alone where there is nothing to slice.
    Whole or not at all; the number of tables sliced. SlicedBertError naming the
    cache folder if it cannot be made or written."""
    import onnx

    from yomiage.export.bert_positions import slice_in

    try:
        model = onnx.load(str(graph), load_external_data=False)
        tables = slice_in(model.graph)
        record = {RECORD: json.dumps({"tables": tables})}
        if tables:
            publish(model, folder, GRAPH, MADE_FILES, extra=record, save=_graph_alone)
        else:
            publish(None, folder, None, (RECORD,), extra=record)
    except Exception as exc:  # onnx's and protobuf's own errors, OSError, ValueError
        raise SlicedBertError(f"cannot slice {graph.name}'s position tables in "
                              f"{folder.parent}: {exc}") from exc  # fmt: skip
    return tables


def _graph_alone(model: Any, path: Path) -> None:
    """The graph's own bytes; its weights stay where they are (in the BERT's folder)."""
    write_atomic(path, model.SerializeToString())


def main(argv: list[str]) -> int:
    """The child: ``GRAPH FOLDER``; a SlicedBertError's message on stderr, exit 1."""
    die_with_parent_from_environment()
    try:
        make_sliced_bert(Path(argv[0]), Path(argv[1]))
    except SlicedBertError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
