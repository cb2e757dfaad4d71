"""The child process that makes a flow with bfloat16 weights
(``python -m yomiage.plan_child.light_flow FLOW FOLDER``), for
:class:`~yomiage.runtime.light_flows.LightFlows` (:mod:`yomiage.runtime.made_graphs`
says why in a child)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from yomiage.lifeline import die_with_parent_from_environment
from yomiage.plan_child.made import publish
from yomiage.plan_child.source_graph import load_graph
from yomiage.runtime.light_flows import MADE_FILES, SAVING, LightFlowError


def make_light_flow(flow: Path, folder: Path) -> float:
    """Write ``flow`` with its weights in bfloat16 into ``folder`` (``flow.onnx``, its
    weights beside it, and ``saving.json``), whole or not at all; the resident MB it
    saves. LightFlowError naming the cache folder if it cannot be made or written."""
    from yomiage.export.bf16_weights import store_weights_bf16

    try:
        model = load_graph(flow)
        narrowed = store_weights_bf16(model)
        if not narrowed.saved_bytes:
            raise ValueError("it has no float32 weights to store in bfloat16")
        saving_mb = (narrowed.saved_bytes - narrowed.widest_bytes) / 2**20
        extra = {SAVING: json.dumps({"saving_mb": round(saving_mb, 1)})}
        publish(model, folder, "flow.onnx", MADE_FILES, extra=extra)
    except Exception as exc:  # onnx's and protobuf's own errors, OSError, ValueError
        raise LightFlowError(f"cannot make {flow.name} with bfloat16 weights in "
                             f"{folder.parent}: {exc}") from exc  # fmt: skip
    return saving_mb


def main(argv: list[str]) -> int:
    """The child: ``FLOW FOLDER``; a LightFlowError's message on stderr, exit 1."""
    die_with_parent_from_environment()
    try:
        make_light_flow(Path(argv[0]), Path(argv[1]))
    except LightFlowError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
