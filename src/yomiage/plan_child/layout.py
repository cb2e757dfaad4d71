"""The child process that makes a decoder in another layout of its stages
(``python -m yomiage.plan_child.layout DECODER FOLDER LAYOUT``), for
:class:`~yomiage.runtime.decoder_layouts.DecoderLayouts`: the rewrite is export code
(:mod:`yomiage.export.decoder_layout`, with the ``onnx`` package), which the runtime
stands below and a serving process never loads.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from yomiage.lifeline import die_with_parent_from_environment
from yomiage.runtime.decoder_layouts import MADE_FILES, LayoutError
from yomiage.runtime.integrity import record_made


def make_layout(decoder: Path, folder: Path, layout: int) -> bool:
    """Write ``decoder`` with its stages of ``layout`` channels or more 2-D into
    ``folder`` (``decoder.onnx`` and its weights beside it in ``decoder.onnx.data``, as
    in a bundle, so ONNX Runtime maps them rather than copying them: +50 MB resident
    on the full-size voice with the weights inside the graph's file). False, and
    nothing written, where ``decoder`` has that layout already. Whole or not at all:
    made in a temporary folder beside ``folder``, then renamed. LayoutError naming the
    cache folder if it cannot be made or written."""
    import onnx

    from yomiage.export.decoder_layout import relayout, two_d_from

    root = folder.parent
    made: Path | None = None
    try:
        model = onnx.load(str(decoder))
        if (two_d_from(model) or 0) == layout:
            return False
        relayout(model, layout)
        root.mkdir(parents=True, exist_ok=True)
        made = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=root))
        _save(model, made / "decoder.onnx")
        record_made(made, MADE_FILES)  # checked before each use (runtime/integrity.py)
        for path in (made, *made.iterdir()):  # as the rest of the cache: not private
            path.chmod(0o755 if path.is_dir() else 0o644)
        try:
            made.rename(folder)
        except OSError:
            if not (folder / "decoder.onnx").is_file():  # not another process first
                raise
    except Exception as exc:  # onnx's and protobuf's own errors, OSError, ValueError
        raise LayoutError(f"cannot make {decoder.name} with stages from {layout} channels "
                          f"2-D in {root}: {exc}") from exc  # fmt: skip
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    return True


def _save(model: Any, path: Path) -> None:
    import onnx

    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=f"{path.name}.data", size_threshold=1024)  # fmt: skip


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
