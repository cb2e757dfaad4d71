"""A process of its own that compiles one graph with OpenVINO into the compiled-graph
cache (``python -m yomiage.plan_child.compile JSON``), so that the voice's process
that asked (:mod:`yomiage.runtime.engines.compile_ahead`) maps the blob instead of
holding what compiling holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from yomiage.lifeline import die_with_parent_from_environment


def main(argv: list[str]) -> int:
    die_with_parent_from_environment()
    from yomiage.runtime.engines.placement import OPENVINO, Placement
    from yomiage.runtime.engines.sessions import Sessions

    args = json.loads(argv[1])
    sessions = Sessions(args["threads"], cache_dir=Path(args["cache_dir"]), openvino=True,
                        compile_ahead=False)  # fmt: skip
    asked = Placement(OPENVINO.name, args["precision"])
    graph = sessions.open(Path(args["path"]), asked, sha256=args["sha256"],
                          frame_mask=bool(args["frame_mask"]))  # fmt: skip
    if graph.placement != asked:
        print(f"OpenVINO did not compile {Path(args['path']).name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
