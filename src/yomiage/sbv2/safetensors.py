"""Read a safetensors file one tensor at a time, with numpy only.

``safetensors.load_file`` maps the whole file and libraries then copy it
(a float16 BERT cast to float32 briefly costs file + float32 copy + more).
Reading tensor by tensor with plain file reads keeps the peak at the final
size plus one tensor, and needs neither torch nor the safetensors package.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Container, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yomiage.errors import ModelLoadError

_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # widened to float32 below
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_MAX_HEADER = 100 * 1024 * 1024


def read_header(path: Path) -> tuple[dict[str, dict[str, object]], int]:
    """The tensor table of ``path`` and the byte offset where tensor data starts."""
    try:
        with path.open("rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ModelLoadError(f"{path} is too short to be a safetensors file")
            (size,) = struct.unpack("<Q", raw)
            if size > _MAX_HEADER:
                raise ModelLoadError(f"{path}: implausible safetensors header size {size}")
            header = json.loads(f.read(size))
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{path} not found") from exc
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not a readable safetensors file: {exc}") from exc
    if not isinstance(header, dict):
        raise ModelLoadError(f"{path}: safetensors header is not an object")
    header.pop("__metadata__", None)
    return header, 8 + size


def iter_tensors(
    path: Path, *, skip: Container[str] = (), float32: bool = True
) -> Iterator[tuple[str, npt.NDArray[np.generic]]]:
    """Yield ``(name, array)`` in file order; floats become float32 when ``float32``.

    A truncated file or a table that points outside the file is a
    :class:`ModelLoadError` naming the file and the tensor.
    """
    header, start = read_header(path)
    file_size = path.stat().st_size
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])  # type: ignore[index]
    with path.open("rb") as f:
        for name, info in entries:
            if name in skip:
                continue
            try:
                dtype = _DTYPES[str(info["dtype"])]
                shape = tuple(int(d) for d in info["shape"])  # type: ignore[attr-defined]
                begin, end = (int(x) for x in info["data_offsets"])  # type: ignore[attr-defined]
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelLoadError(f"{path}: bad table entry for {name}: {exc}") from exc
            count = int(np.prod(shape, dtype=np.int64))
            if end - begin != count * dtype.itemsize or start + end > file_size:
                raise ModelLoadError(
                    f"{path}: tensor {name} lies outside the file (truncated download?)"
                )
            f.seek(start + begin)
            array = np.fromfile(f, dtype=dtype, count=count).reshape(shape)
            if info["dtype"] == "BF16":
                array = (array.astype(np.uint32) << 16).view(np.float32)
            elif float32 and array.dtype.kind == "f" and array.dtype != np.float32:
                array = array.astype(np.float32)
            yield name, array
