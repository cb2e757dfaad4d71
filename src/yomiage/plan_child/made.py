"""Writing a graph the cache keeps made (:mod:`yomiage.runtime.made_graphs`): whole or
not at all, with the record of its files that each use checks."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from yomiage.runtime.integrity import record_made


def save_graph(model: Any, path: Path) -> None:
    """``model`` to ``path`` with its weights beside it in ``<name>.data``, as in a bundle,
    so ONNX Runtime maps them rather than copying them (+50 MB resident on the full-size
    decoder with the weights inside the graph's file)."""
    import onnx

    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=f"{path.name}.data", size_threshold=1024)  # fmt: skip


def publish(
    model: Any,
    folder: Path,
    graph_name: str | None,
    files: Iterable[str],
    extra: Mapping[str, str] | None = None,
    save: Callable[[Any, Path], None] | None = None,
) -> None:
    """``model`` saved as ``folder/graph_name`` by ``save`` (by default :func:`save_graph`,
    its weights beside it; ``graph_name`` None: no graph), with ``extra`` (text files by
    name) beside it, made in a temporary folder beside ``folder``, recorded, then
    renamed into place: a process that stops midway leaves no half folder. Another
    process that made it first wins. OSError and onnx's own errors as they come."""
    root = folder.parent
    root.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=root))
    try:
        if graph_name is not None:
            (save or save_graph)(model, made / graph_name)
        for name, text in (extra or {}).items():
            (made / name).write_text(text, encoding="utf-8")
        record_made(made, files)  # checked before each use (runtime/integrity.py)
        for path in (made, *made.iterdir()):  # as the rest of the cache: not private
            path.chmod(0o755 if path.is_dir() else 0o644)
        try:
            made.rename(folder)
        except OSError:
            if not folder.is_dir():  # not another process first
                raise
    finally:
        shutil.rmtree(made, ignore_errors=True)
