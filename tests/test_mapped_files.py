"""Resident pages of read-only mapped files given back: the data stays what the file
holds, writable mappings are never touched, and OpenVINO's graph gives back what it
compiled from after a call that met a new length."""

from __future__ import annotations

import mmap
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yomiage import mapped_files
from yomiage.mapped_files import drop_resident_pages
from yomiage.runtime.engines import openvino_graph, sessions
from yomiage.runtime.engines.placement import OPENVINO, OPENVINO_BF16
from yomiage.runtime.engines.sessions import Sessions, probe_speaker

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's madvise")
MB = 1 << 20


def _resident_file_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssFile")


@contextmanager
def _mapped(path: Path, size: int, seed: int) -> Iterator[tuple[bytes, mmap.mmap]]:
    """``size`` seeded random bytes written to ``path``, and the file mapped read-only."""
    data = np.random.default_rng(seed).integers(0, 255, size, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        yield data, mapped


@linux
def test_the_pages_of_a_read_only_mapping_are_given_back_and_read_again(tmp_path: Path) -> None:
    with _mapped(tmp_path / "weights.bin", 32 * MB, 0) as (data, mapped):
        assert sum(mapped[i] for i in range(0, len(mapped), 4096)) > 0  # every page resident
        before = _resident_file_mb()
        assert drop_resident_pages([tmp_path]) >= 32 * MB  # the folder stands for its files
        assert _resident_file_mb() < before - 24
        assert mapped[:] == data  # read back from the file


@linux
def test_a_writable_mapping_or_another_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "scratch.bin"
    path.write_bytes(bytes(4 * MB))
    with path.open("r+b") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as private:
        private[:5] = b"local"  # a private change that dropping would lose
        assert drop_resident_pages([path]) == 0
        assert drop_resident_pages([tmp_path / "other.bin"]) == 0
        assert private[:5] == b"local"


def test_nothing_is_dropped_where_there_is_no_madvise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapped_files.sys, "platform", "win32")
    assert drop_resident_pages([tmp_path]) == 0
    assert drop_resident_pages([], maps=tmp_path / "missing") == 0


@pytest.mark.skipif(OPENVINO.version() is None, reason="OpenVINO not installed")
def test_openvino_gives_back_what_it_compiled_from_after_each_new_length(
    test_voice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dropped: list[tuple[Path, ...]] = []

    def record(files: Any) -> None:
        dropped.append(tuple(files))

    monkeypatch.setattr(sessions, "drop_resident_pages", record)  # once compiled
    monkeypatch.setattr(openvino_graph, "drop_resident_pages", record)  # after a new length
    path = test_voice / "decoder.onnx"
    graph = Sessions(1).open(path, OPENVINO_BF16)  # no cache: the ONNX files
    assert dropped == [(path, path.with_name("decoder.onnx.data"))]  # once compiled
    rng = np.random.default_rng(0)
    channels = graph.input_shape("z")[1]
    assert isinstance(channels, int)
    speaker = probe_speaker(graph, rng)
    for frames in (20, 20, 30, 20, 30):
        graph.run({"z": rng.standard_normal((1, channels, frames), np.float32), **speaker})
    assert len(dropped) == 3  # after compiling, then after the first call at 20 and at 30
    cached = Sessions(1, cache_dir=tmp_path).open(path, OPENVINO_BF16, sha256="x")
    # With a cache: the folder of its compiled blob, and the ONNX weights OpenVINO read
    # to find the blob by (resident after a first load, never read again).
    folder, *graph = dropped[-1]
    assert folder.name == "x" and folder.parent.parent == tmp_path
    assert graph == [path, path.with_name("decoder.onnx.data")]
    assert cached.placement == OPENVINO_BF16


def _flags_of(path: Path) -> list[set[str]]:
    """The VmFlags of each of this process's mappings of ``path``."""
    flags, name = [], ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
            name = head[5] if len(head) > 5 else ""
        elif line.startswith("VmFlags:") and name == str(path):
            flags.append(set(head[1:]))
    return flags


@linux
def test_a_file_read_sparsely_is_read_a_page_at_a_time_and_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "sys.dic"
    with _mapped(path, 8 * MB, 1) as (data, mapped):
        ranges = mapped_files.MappedRanges.of([tmp_path])
        assert ranges.files == (path,) and sum(n for _, n in ranges.ranges) == 8 * MB
        assert all("rr" not in flags for flags in _flags_of(path))
        ranges.read_sparsely()
        assert _flags_of(path) and all("rr" in flags for flags in _flags_of(path))  # no read-ahead
        assert mapped[:] == data


@linux
def test_openjtalk_reads_its_dictionary_a_page_at_a_time() -> None:
    from yomiage.text.openjtalk import OpenJTalk

    openjtalk = OpenJTalk()
    sys_dic = openjtalk.dictionary_dir / "sys.dic"
    assert openjtalk.run_frontend("今日はいい天気ですね。")
    assert _flags_of(sys_dic) and all("rr" in flags for flags in _flags_of(sys_dic))


def test_nothing_is_advised_where_there_is_no_madvise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapped_files.sys, "platform", "win32")
    ranges = mapped_files.MappedRanges.of([tmp_path])
    assert ranges == mapped_files.MappedRanges()
    ranges.read_sparsely()  # nothing to do, nothing raised
