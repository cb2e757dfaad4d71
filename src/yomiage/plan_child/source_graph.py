"""Reading the graph a made one is made from (a bundle's decoder or flow), its weights
with it.

``onnx.load`` refuses weights in a file with more than one hard link (onnx >= 1.19:
"a potential hardlink attack"), which is how a user who deduplicates files, or a
backup tool, may well have left a bundle. ONNX Runtime maps that same file to run the
voice, so reading it here trusts it no further; the checks that matter stay: the
weights' file is a plain file named inside the graph's own folder, not a link, and
each tensor's bytes lie within it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any


class SourceGraphError(ValueError):
    """The graph's weights cannot be read from where it says they are."""


def load_graph(path: Path) -> Any:
    """The ONNX model at ``path`` with every tensor kept outside it read in. OSError
    and onnx's own errors as they come; SourceGraphError naming the tensor and the
    file where a tensor's weights are not where they may be read."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    opened: dict[str, Any] = {}
    try:
        for tensor in _tensors(model.graph):
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                continue
            info = {entry.key: entry.value for entry in tensor.external_data}
            name = info.get("location", "")
            data = opened.get(name)
            if data is None:
                data = opened[name] = _weights_file(path.parent, name, tensor.name).open("rb")
            tensor.raw_data = _read(data, info, tensor.name)
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
    finally:
        for handle in opened.values():
            handle.close()
    return model


def _weights_file(folder: Path, location: str, tensor: str) -> Path:
    relative = PurePosixPath(location)
    if not location or relative.is_absolute() or ".." in relative.parts:
        raise SourceGraphError(
            f"tensor {tensor!r} keeps its weights in {location!r}, not a file in {folder}"
        )
    path = folder / relative
    if path.is_symlink() or not path.is_file():
        raise SourceGraphError(
            f"tensor {tensor!r} keeps its weights in {path}, which is not a plain file"
        )
    return path


def _read(data: Any, info: dict[str, str], tensor: str) -> bytes:
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else -1
    except ValueError as exc:
        raise SourceGraphError(f"tensor {tensor!r}: its weights' place is unreadable") from exc
    if offset < 0:
        raise SourceGraphError(f"tensor {tensor!r}: its weights start at offset {offset}")
    data.seek(offset)
    raw: bytes = data.read(length)
    if length >= 0 and len(raw) != length:
        raise SourceGraphError(
            f"tensor {tensor!r}: {length} bytes at offset {offset} run past the end of {data.name}"
        )
    return raw


def _tensors(graph: Any) -> Iterator[Any]:
    """Every tensor of ``graph``: its initializers and the tensors in its nodes'
    attributes (Constant's value), in subgraphs too."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _tensors(subgraph)
