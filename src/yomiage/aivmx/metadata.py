"""An AIVMX file's metadata without reading its graph.

An AIVMX voice is one ONNX model of ~250 MB whose manifest lives in the model's
``metadata_props``. Naming a voice after its manifest (``--model voice.aivmx``)
should not cost parsing the whole file, so this walks the protobuf's top-level
fields and reads only field 14 (``metadata_props``: key 1, value 2), seeking over
the rest (the graph is one length-delimited field). No onnx import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO

METADATA_PROPS = 14  # ModelProto.metadata_props
MAX_ENTRY_BYTES = 64 << 20  # a metadata entry (style vectors in base64 are ~1 MB)
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


class MetadataError(ValueError):
    """The file is not a protobuf message of the shape an ONNX model has."""


class EntryTooLargeError(MetadataError):
    """A metadata entry passes :data:`MAX_ENTRY_BYTES`: such a file is never listed, so
    nothing may install or load it either (:func:`~yomiage.aivmx.reader.read_aivmx`)."""


def read_metadata(path: Path) -> dict[str, str]:
    """``metadata_props`` of the ONNX model at ``path`` (MetadataError if damaged)."""
    with path.open("rb") as stream:
        size = stream.seek(0, 2)
        stream.seek(0)
        props: dict[str, str] = {}
        while stream.tell() < size:
            field, wire = divmod(_varint(stream), 8)
            if wire == _VARINT:
                _varint(stream)
            elif wire in (_FIXED64, _FIXED32):
                stream.seek(8 if wire == _FIXED64 else 4, 1)
            elif wire == _LENGTH:
                length = _varint(stream)
                if stream.tell() + length > size:
                    raise MetadataError("a field runs past the end of the file (cut short?)")
                if field != METADATA_PROPS:
                    stream.seek(length, 1)
                    continue
                if length > MAX_ENTRY_BYTES:
                    raise EntryTooLargeError(
                        f"a metadata entry of {length:,} bytes; an AIVMX file's entries may "
                        f"hold at most {MAX_ENTRY_BYTES:,} bytes ({MAX_ENTRY_BYTES >> 20} MiB)"
                    )
                key, value = _entry(stream.read(length))
                props[key] = value
            else:
                raise MetadataError(f"wire type {wire} at byte {stream.tell()}: not an ONNX model")
        return props


def strict_json(text: str) -> Any:
    """``text`` parsed as JSON that can be sent on: Python's parser also takes ``NaN``,
    ``Infinity`` and escaped lone surrogates (``"\\ud800"``), which no UTF-8 JSON answer
    can carry (a manifest holding one would fail every listing)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not a JSON value")

    value = json.loads(text, parse_constant=refuse)
    _check_strings(value)
    return value


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")  # at C speed: icons and samples are megabytes of base64
            except UnicodeEncodeError:
                raise ValueError("a string holds a lone surrogate (not UTF-8)") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def manifest_name(path: Path) -> str | None:
    """The ``name`` in an AIVMX file's manifest; None where it cannot be read."""
    try:
        manifest = strict_json(read_metadata(path).get("aivm_manifest", "null"))
    except (OSError, ValueError):
        return None
    name = manifest.get("name") if isinstance(manifest, dict) else None
    return name if isinstance(name, str) else None


def _varint(stream: BinaryIO) -> int:
    value = shift = 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise MetadataError("the file ends inside a field (cut short?)")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
        if shift > 63:
            raise MetadataError("a malformed number: not an ONNX model")


def _entry(data: bytes) -> tuple[str, str]:
    """A ``StringStringEntryProto``: key (1) and value (2), both strings."""
    import io

    stream = io.BytesIO(data)
    found = {1: "", 2: ""}
    while stream.tell() < len(data):
        field, wire = divmod(_varint(stream), 8)
        if wire != _LENGTH:
            raise MetadataError("a metadata entry that is not two strings")
        length = _varint(stream)
        raw = stream.read(length)
        if len(raw) != length:
            raise MetadataError("a metadata entry cut short")
        if field in found:
            try:
                found[field] = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MetadataError("a metadata entry that is not UTF-8") from exc
    return found[1], found[2]
