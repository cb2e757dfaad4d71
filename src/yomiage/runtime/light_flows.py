"""A voice's flow with its weights kept in bfloat16 (arithmetic still float32), made once
per voice for a plan that needs the memory (:mod:`yomiage.export.bf16_weights`).

ONNX Runtime reads every weight of the flow on every call, so the float32 flow's
157 MB (full-size voice) stay resident; in bfloat16 they take half. A plan takes
this flow only where its memory budget needs it and the request allows a rounding of
the weights (``auto``; never ``fp32``): the plan reports it as the flow on
``onnxruntime bf16``. Kept in ``<cache>/flows/<the bundle's flow files' sha256>-bf16w/``
with ``saving.json``, the resident MB it saves, and checked before each use as every
made graph is (:mod:`yomiage.runtime.made_graphs`).
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from yomiage.json_file import read_json_object
from yomiage.runtime.made_graphs import check_made, kept, make_in_child

log = logging.getLogger(__name__)

LIGHT_FLOW_CHILD = "yomiage.plan_child.light_flow"  # its arguments: FLOW FOLDER
MADE_FILES = ("flow.onnx", "flow.onnx.data", "saving.json")
SAVING = "saving.json"


class LightFlowError(RuntimeError):
    """A flow with bfloat16 weights could not be made or kept (the float32 flow runs)."""


@dataclass(frozen=True)
class LightFlow:
    """The made flow and what it saves resident against the bundle's: half its weights'
    bytes, less the largest weight widened to float32 while it is used."""

    graph: Path
    saving_mb: float


class LightFlows:
    """The flows made with bfloat16 weights, under one folder of the cache."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, key: str) -> Path:
        return self.root / f"{key}-bf16w"

    def flow(self, flow: Path, key: str) -> LightFlow:
        """``flow`` (its bundle's files named by ``key``) with bfloat16 weights: the kept
        one, made now if it is not kept yet. LightFlowError if it cannot be made, written
        or read."""
        graph = self.folder(key) / "flow.onnx"
        if not kept(graph, MADE_FILES):
            started = time.perf_counter()
            what = f"making {flow.name} with bfloat16 weights (once) to fit the memory budget"
            make_in_child(LIGHT_FLOW_CHILD, [str(flow), str(graph.parent)], what, LightFlowError)
            check_made(graph, MADE_FILES, LightFlowError)
            log.info("made %s (%.1f s)", graph, time.perf_counter() - started)
        try:
            saving = float(read_json_object(graph.parent / SAVING)["saving_mb"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LightFlowError(f"cannot read {graph.parent / SAVING}: {exc}") from exc
        return LightFlow(graph, saving)

    def discard(self, graph: Path) -> None:
        """Remove a flow :meth:`flow` made (its folder); anything else is left alone."""
        if graph.parent.parent == self.root:
            shutil.rmtree(graph.parent, ignore_errors=True)
