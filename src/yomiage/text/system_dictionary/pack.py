"""The pack that carries yomiage's compiled OpenJTalk dictionaries in 17 MB, not 206.

Each compiled dictionary is a folder whose ``sys.dic`` (103 MB) is a header, a
double-array trie, a table of 16-byte tokens and the tokens' feature strings.
Compressed as they are (xz -9), two such folders take 32 MB; the pack takes 16.9
by compressing like with like, and the second dictionary against the first:

- each trie rewritten into small numbers (:func:`encode_trie`): 6.4 -> 3.5 MB;
- the tokens one field at a time, the feature offsets as differences, both
  dictionaries' in one stream: 2.3 MB for the first, 0.9 for the second;
- the feature strings of both in one stream: 5.3 MB for the first, 0.8 for the
  second; and the small files of both in another (matrix.bin's costs as
  differences along each row: 1.4 -> 0.9 MB, the second copy next to nothing).

A pack is a ZIP archive, stored uncompressed, of xz streams (``*.xz``) and an
``index.json`` saying, for each file of each dictionary, which byte ranges of
which streams make it, and how each range was rewritten. Only the standard
library and numpy are needed to read it, so the build hook can load this
module by path (``hatch_build.py``). What a pack gives is never trusted as
such: :func:`unpack` checks every file against the size and sha256 the caller
pins (:mod:`yomiage.text.system_dictionary.pins`). Unpacking one dictionary
took 1.4-1.6 s on a busy 2-core machine, and 150 MB (the default reading's) or
230 MB (SBV2's, read after the other's features) of memory for that time.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import shutil
import struct
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import numpy.typing as npt

FORMAT = 1
INDEX = "index.json"
SYS_DIC = "sys.dic"
# sys.dic's header: ten uint32 (magic, version, type, lexsize, lsize, rsize, dsize,
# tsize, fsize, dummy) and a 32-byte charset name; then dsize bytes of trie, tsize
# of tokens, fsize of features (MeCab's dictionary.cpp).
_HEADER = struct.Struct("<10I32s")
_UNIT = 8  # a trie unit: int32 base, uint32 check
_TOKEN = 16  # a token: uint16 lcAttr, rcAttr, posid; int16 wcost; uint32 feature, compound
_TOKEN_FIELDS = ((0, 2), (2, 2), (4, 2), (6, 2), (8, 4), (12, 4))  # (offset, width) of each
_FREE = 0xFFFFFFFF  # an unused trie unit (check 0), in the rewritten check column
_CHUNK = 1 << 20
# Written 64 KiB at a time: where the page cache keeps large folios (ext4, Linux 6.x),
# a file written 1 MiB at a time stays in 1 MiB folios, and each of MeCab's scattered
# reads of the mapped sys.dic then counts the whole folio in the process's RSS (+11 MB
# measured after one sentence, against 0 for the same file written 64 KiB at a time).
_WRITE = 1 << 16
_MAX_WINDOW = 192 << 20

_Words = npt.NDArray[np.uint32]

RAW, TRIE, TOKENS, MATRIX = "raw", "trie", "tokens", "matrix"
MATRIX_BIN = "matrix.bin"


class PackError(ValueError):
    """A pack that cannot be read, or that gives a file unlike its pin."""


@dataclass(frozen=True)
class Pin:
    """What one unpacked file must be."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Part:
    """``length`` bytes at ``start`` of stream ``stream``, rewritten by ``transform``."""

    stream: str
    start: int
    length: int
    transform: str


# -- the rewrites of the trie and of the tokens ---------------------------------
def _trie_columns(data: bytes) -> tuple[_Words, _Words, _Words]:
    units = np.frombuffer(data, dtype="<u4").reshape(-1, 2)
    return units[:, 0], units[:, 1], np.arange(len(units), dtype=np.uint32)


def _trie_units(first: _Words, second: _Words) -> bytes:
    out = np.empty((len(first), 2), dtype="<u4")
    out[:, 0], out[:, 1] = first, second
    return out.tobytes()


def encode_trie(data: bytes) -> bytes:
    """The trie's units, each (base, check) rewritten (uint32 arithmetic, mod 2**32).

    A unit's check is its parent's base, and the parent placed it at base + byte + 1
    (at base itself for the end of a word), so index - check is at most 256. An
    inner node's base lies a little past its own index; the base of a word's end
    holds the word's first token and count, which rise along the array, so it is
    stored as the difference from the previous word end's (4.7 -> 3.5 MB). The
    rewrite is undone by :func:`decode_trie` whatever the values but one (a check
    of index + 1, which no trie has): :func:`pack` checks that it is undone."""
    base, check, index = _trie_columns(data)
    up = np.where(check == 0, np.uint32(_FREE), index - check)
    inner, end = (up != 0) & (up != _FREE), up == 0
    first = np.where(inner, base - index, base)
    first[end] = np.diff(base[end], prepend=np.uint32(0))
    return _trie_units(first, up)


def decode_trie(data: bytes) -> bytes:
    """The inverse of :func:`encode_trie`."""
    first, up, index = _trie_columns(data)
    inner, end = (up != 0) & (up != _FREE), up == 0
    base = np.where(inner, first + index, first)
    base[end] = np.cumsum(first[end], dtype=np.uint32)
    return _trie_units(base, np.where(up == _FREE, np.uint32(0), index - up))


def encode_tokens(data: bytes) -> bytes:
    """The tokens one field at a time (a field compresses against the same field of the
    tokens before it), the feature offsets as differences from the previous token's
    (mod 2**32)."""
    rows = np.frombuffer(data, dtype=np.uint8).reshape(-1, _TOKEN)
    columns = [np.ascontiguousarray(rows[:, offset : offset + width])
               for offset, width in _TOKEN_FIELDS]  # fmt: skip
    offsets = columns[4].view("<u4").ravel()
    columns[4] = np.diff(offsets, prepend=np.uint32(0)).astype("<u4")
    return b"".join(column.tobytes() for column in columns)


def decode_tokens(data: bytes) -> bytes:
    """The inverse of :func:`encode_tokens`."""
    count = len(data) // _TOKEN
    rows = np.empty((count, _TOKEN), dtype=np.uint8)
    columns, at = [], 0
    for _, width in _TOKEN_FIELDS:
        columns.append(np.frombuffer(data, dtype=np.uint8, count=count * width, offset=at))
        at += count * width
    columns[4] = np.cumsum(columns[4].view("<u4"), dtype=np.uint32).astype("<u4").view(np.uint8)
    for (offset, width), column in zip(_TOKEN_FIELDS, columns, strict=True):
        rows[:, offset : offset + width] = column.reshape(count, width)
    return rows.tobytes()


def _matrix_shape(data: bytes) -> tuple[int, int]:
    if len(data) < 4:
        raise PackError("matrix.bin is shorter than its header")
    left, right = struct.unpack_from("<2H", data)
    if len(data) != 4 + 2 * left * right:
        raise PackError("matrix.bin's header does not describe the file")
    return right, left


def encode_matrix(data: bytes) -> bytes:
    """The connection costs (int16, one row of left ids per right id) as differences
    along each row, mod 2**16: neighbouring costs are close (1.42 -> 0.89 MB)."""
    costs = np.frombuffer(data, dtype="<u2", offset=4).reshape(_matrix_shape(data))
    return data[:4] + np.diff(costs, axis=1, prepend=np.uint16(0)).astype("<u2").tobytes()


def decode_matrix(data: bytes) -> bytes:
    """The inverse of :func:`encode_matrix`."""
    steps = np.frombuffer(data, dtype="<u2", offset=4).reshape(_matrix_shape(data))
    return data[:4] + np.cumsum(steps, axis=1, dtype=np.uint16).astype("<u2").tobytes()


_DECODERS = {TRIE: decode_trie, TOKENS: decode_tokens, MATRIX: decode_matrix}
_ENCODERS = {TRIE: encode_trie, TOKENS: encode_tokens, MATRIX: encode_matrix}
_WIDTHS = {RAW: 1, TRIE: _UNIT, TOKENS: _TOKEN, MATRIX: 2}


# -- writing a pack (tools/pack_openjtalk_dictionaries.py) ------------------------
def sys_dic_sections(data: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """``sys.dic`` cut into its header, trie, tokens and features (PackError if it is not one)."""
    if len(data) < _HEADER.size:
        raise PackError("sys.dic is shorter than its header")
    fields = _HEADER.unpack_from(data)
    dsize, tsize, fsize = fields[6], fields[7], fields[8]
    end = _HEADER.size + dsize + tsize + fsize
    if end != len(data) or dsize % _UNIT or tsize % _TOKEN:
        raise PackError("sys.dic's header does not describe the file")
    trie_end = _HEADER.size + dsize
    return (data[: _HEADER.size], data[_HEADER.size : trie_end],
            data[trie_end : trie_end + tsize], data[trie_end + tsize :])  # fmt: skip


class _StreamWriter:
    """One stream being laid out: its pieces, and where each file's ranges are."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pieces: list[bytes] = []
        self.length = 0

    def add(self, data: bytes, transform: str) -> Part:
        encoded = _ENCODERS[transform](data) if transform in _ENCODERS else data
        if transform in _DECODERS and _DECODERS[transform](encoded) != data:
            raise PackError(f"the {transform} rewrite cannot be undone on this data")
        part = Part(self.name, self.length, len(encoded), transform)
        self.pieces.append(encoded)
        self.length += len(encoded)
        return part


def _dict_size(length: int) -> int:
    """An xz dictionary (2**n or 3 * 2**(n-1)) as large as the stream, up to 192 MiB: a
    piece of the second dictionary is compressed against the same piece of the first.
    (A 96 MiB window holds the first dictionary's 67 MB of features, yet leaves the
    second's 0.45 MB larger than the whole stream's window does.)"""
    size = 1 << 20
    while size < min(length, _MAX_WINDOW):
        size = size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    return size


def pack(folders: Sequence[Path], out: Path) -> dict[str, dict[str, Pin]]:
    """Write the dictionaries in ``folders`` (named by their folder names) to the pack
    ``out``; returns what each file must be, for the pins. Slow (minutes, ~1.5 GB):
    it is run by hand when a dictionary changes, never at install time."""
    files = _StreamWriter("files")
    tokens, features = _StreamWriter("tokens"), _StreamWriter("features")
    tries: list[_StreamWriter] = []
    layout: dict[str, dict[str, list[Part]]] = {}
    pins: dict[str, dict[str, Pin]] = {}
    sections = {}
    for folder in folders:
        data = (folder / SYS_DIC).read_bytes()
        sections[folder.name] = sys_dic_sections(data)
        pins[folder.name] = {SYS_DIC: Pin(len(data), hashlib.sha256(data).hexdigest())}
        layout[folder.name] = {SYS_DIC: [files.add(sections[folder.name][0], RAW)]}
    for index, folder in enumerate(folders):
        tries.append(_StreamWriter(f"trie-{index}"))
        layout[folder.name][SYS_DIC].append(tries[-1].add(sections[folder.name][1], TRIE))
    for folder in folders:
        layout[folder.name][SYS_DIC].append(tokens.add(sections[folder.name][2], TOKENS))
    for folder in folders:
        layout[folder.name][SYS_DIC].append(features.add(sections[folder.name][3], RAW))
    for folder in folders:
        for path in sorted(p for p in folder.iterdir() if p.name != SYS_DIC):
            if not path.is_file():
                raise PackError(f"{path} is not a file")
            data = path.read_bytes()
            pins[folder.name][path.name] = Pin(len(data), hashlib.sha256(data).hexdigest())
            transform = MATRIX if path.name == MATRIX_BIN else RAW
            layout[folder.name][path.name] = [files.add(data, transform)]
    index_data = {
        "format": FORMAT,
        "dictionaries": {
            name: {
                file: [[p.stream, p.start, p.length, p.transform] for p in parts]
                for file, parts in entries.items()
            }
            for name, entries in layout.items()
        },
    }
    tmp = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
        # Dated 1980-01-01 (ZIP's first day): the same dictionaries give the same pack.
        index_json = json.dumps(index_data, indent=1, sort_keys=True)
        archive.writestr(zipfile.ZipInfo(INDEX), index_json)
        for stream in (files, *tries, tokens, features):
            filters = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME,
                        "dict_size": _dict_size(stream.length)}]  # fmt: skip
            compressed = lzma.compress(b"".join(stream.pieces), filters=filters)
            archive.writestr(zipfile.ZipInfo(f"{stream.name}.xz"), compressed)
    tmp.replace(out)
    return pins


# -- reading one ----------------------------------------------------------------
def _read_index(archive: zipfile.ZipFile) -> dict[str, dict[str, list[Part]]]:
    try:
        data = json.loads(archive.read(INDEX))
        if data["format"] != FORMAT:
            raise PackError(f"a pack of format {data['format']}; this yomiage reads {FORMAT}")
        return {
            name: {
                file: [Part(str(s), int(a), int(n), str(t)) for s, a, n, t in parts]
                for file, parts in entries.items()
            }
            for name, entries in data["dictionaries"].items()
        }
    except (KeyError, TypeError, ValueError) as exc:  # json's errors are ValueErrors
        if isinstance(exc, PackError):
            raise
        raise PackError(f"the pack's index is unreadable: {exc}") from exc


class _StreamReader:
    """A stream of the pack, read forward (reopened to go back)."""

    def __init__(self, archive: zipfile.ZipFile, name: str) -> None:
        self._archive, self._name = archive, name
        self._file: IO[bytes] | None = None
        self._at = 0

    def read(self, start: int, length: int) -> Iterator[bytes]:
        """The stream's bytes ``start`` to ``start + length``, in chunks."""
        if self._file is None or start < self._at:
            self.close()
            self._file = lzma.open(self._archive.open(f"{self._name}.xz"))  # noqa: SIM115
            self._at = 0
        while self._at < start:
            skipped = self._file.read(min(_CHUNK, start - self._at))
            if not skipped:
                raise PackError(f"stream {self._name} ends before byte {start}")
            self._at += len(skipped)
        left = length
        while left:
            chunk = self._file.read(min(_CHUNK, left))
            if not chunk:
                raise PackError(f"stream {self._name} ends before byte {start + length}")
            self._at += len(chunk)
            left -= len(chunk)
            yield chunk

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _file_chunks(parts: Iterable[Part], readers: Mapping[str, _StreamReader]) -> Iterator[bytes]:
    for part in parts:
        width = _WIDTHS.get(part.transform)
        if part.stream not in readers or width is None or part.length % width:
            raise PackError(f"the pack's index names an unknown stream or rewrite: {part}")
        chunks = readers[part.stream].read(part.start, part.length)
        if part.transform == RAW:
            yield from chunks
        else:
            yield _DECODERS[part.transform](b"".join(chunks))


def unpack(pack_path: Path, name: str, out_dir: Path, pins: Mapping[str, Pin]) -> None:
    """Write the files of dictionary ``name`` from the pack into ``out_dir`` (an
    existing, empty folder). PackError if the pack lacks it, is damaged, or gives a
    file that differs from ``pins`` (which must name every file); OSError if
    ``out_dir`` cannot be written."""
    try:
        with zipfile.ZipFile(pack_path) as archive:
            entries = _read_index(archive).get(name)
            if entries is None or set(entries) != set(pins):
                raise PackError(f"the pack does not hold the dictionary {name} as pinned")
            streams = {part.stream for parts in entries.values() for part in parts}
            order = sorted(entries, key=lambda f: [(p.stream, p.start) for p in entries[f]])
            readers = {stream: _StreamReader(archive, stream) for stream in streams}
            try:
                # In the order of the streams, so that each is read once, forward.
                for file in order:
                    _write_checked(out_dir / file, _file_chunks(entries[file], readers), pins[file])
            finally:
                for reader in readers.values():
                    reader.close()
    except (zipfile.BadZipFile, lzma.LZMAError, EOFError) as exc:
        raise PackError(f"the dictionary pack {pack_path} is damaged: {exc}") from exc


def _write_checked(path: Path, chunks: Iterable[bytes], pin: Pin) -> None:
    digest, size = hashlib.sha256(), 0
    with path.open("xb") as out:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            view = memoryview(chunk)
            for at in range(0, len(view), _WRITE):
                out.write(view[at : at + _WRITE])
    if size != pin.size or digest.hexdigest() != pin.sha256:
        raise PackError(f"the pack gives {path.name} of {size} bytes, sha256 "
                        f"{digest.hexdigest()[:12]}..., not as pinned")  # fmt: skip


def unpack_all(pack_path: Path, dest: Path, pins: Mapping[str, Mapping[str, Pin]]) -> None:
    """Unpack each dictionary of ``pins`` into ``dest/<name>/`` (each whole or not at
    all), but those whose files there match their pins already: for a checkout's
    editable install (``hatch_build.py``) and the benchmark scripts."""
    for name, files in pins.items():
        target = dest / name
        if all(_matches(target / file, pin) for file, pin in files.items()):
            continue
        with tempfile.TemporaryDirectory(dir=dest, prefix=f".{name}.") as tmp:
            staging = Path(tmp) / name
            staging.mkdir()
            unpack(pack_path, name, staging, files)
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)


def _matches(path: Path, pin: Pin) -> bool:
    if not path.is_file() or path.stat().st_size != pin.size:
        return False
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest() == pin.sha256
