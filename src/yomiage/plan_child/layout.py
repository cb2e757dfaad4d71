"""The child process that makes a decoder in another layout of its stages
(``python -m yomiage.plan_child.layout DECODER FOLDER LAYOUT``), for
:class:`~yomiage.runtime.decoder_layouts.DecoderLayouts`: the rewrite is export code
(:mod:`yomiage.export.decoder_layout`, with the ``onnx`` package), which the runtime
stands below and a serving process never loads.
"""

from __future__ import annotations

import sys
from pathlib import Path

from yomiage.lifeline import die_with_parent_from_environment
from yomiage.plan_child.made import publish
from yomiage.plan_child.source_graph import load_graph
from yomiage.runtime.decoder_layouts import MADE_FILES, LayoutError


def make_layout(decoder: Path, folder: Path, layout: int) -> bool:
    """Write ``decoder`` with its stages of ``layout`` channels or more 2-D into
    ``folder`` (``decoder.onnx`` and its weights beside it, as in a bundle), whole or not
    at all (:func:`~yomiage.plan_child.made.publish`). False, and nothing written, where
    ``decoder`` has that layout already. LayoutError naming the cache folder if it
    cannot be made or written."""
    from yomiage.export.decoder_layout import relayout, two_d_from

    try:
        model = load_graph(decoder)
        if (two_d_from(model) or 0) == layout:
            return False
        relayout(model, layout)
        publish(model, folder, "decoder.onnx", MADE_FILES)
    except Exception as exc:  # onnx's and protobuf's own errors, OSError, ValueError
        raise LayoutError(f"cannot make {decoder.name} with stages from {layout} channels "
                          f"2-D in {folder.parent}: {exc}") from exc  # fmt: skip
    return True


def main(argv: list[str]) -> int:
    """The child: ``DECODER FOLDER LAYOUT``; a LayoutError's message on stderr, exit 1."""
    die_with_parent_from_environment()  # nothing to make for once its parent is gone
    decoder, folder, layout = Path(argv[0]), Path(argv[1]), int(argv[2])
    try:
        make_layout(decoder, folder, layout)
    except LayoutError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
