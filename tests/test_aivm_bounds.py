"""The model store's bounds (issue 31): what an install may hold, what it leaves behind, and
what its errors name. Every failure leaves the installed file as it was and no partial."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from tests.aivm_files import AIVMX, UUID, leftovers, upload_to, voice_files
from tests.slow_source import trickling_source, url_of
from yomiage.aivmx.reader import AivmxError, read_aivmx
from yomiage.aivmx.stop import DownloadStoppedError, DownloadTimeoutError, FetchStop
from yomiage.aivmx.store import ModelNotInstalledError, ModelStore
from yomiage.errors import NoSpaceError, SourceNotFoundError


@pytest.fixture(scope="module")
def voices() -> dict[str, bytes]:
    return voice_files()


def _padded(extra_bytes: int, **manifest: str) -> bytes:
    """The tiny voice with one more metadata entry of ``extra_bytes`` (a crafted file)."""
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_manifest" and manifest:
            prop.value = json.dumps({**json.loads(prop.value), **manifest})
    pad = model.metadata_props.add()
    pad.key, pad.value = "pad", "x" * extra_bytes
    return bytes(model.SerializeToString())


def test_a_metadata_entry_past_the_listing_limit_is_refused_at_install(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12: read_aivmx had no entry limit and the listing refuses entries over 64 MiB, so
    such a file was installed (over the good file of its uuid) and then never listed."""
    monkeypatch.setattr("yomiage.aivmx.metadata.MAX_ENTRY_BYTES", 1 << 20)  # 64 MiB: slow
    store = ModelStore(tmp_path / "models")
    good = upload_to(store, voices["v1"])
    crafted = _padded(2 << 20, version="9.9.9")
    with pytest.raises(AivmxError, match=r"1,048,576 bytes") as caught:
        upload_to(store, crafted)
    assert "the uploaded file" in str(caught.value) and ".partial" not in str(caught.value)
    assert good.path.read_bytes() == voices["v1"]
    assert store.get(UUID).version == "1.0.0"
    assert leftovers(store.root) == []
    source = tmp_path / "big.aivmx"
    source.write_bytes(crafted)
    with pytest.raises(AivmxError, match="at most"):
        store.install_from(str(source))
    with pytest.raises(AivmxError, match="at most"):  # a voice given to an engine, too
        read_aivmx(source)
    assert good.path.read_bytes() == voices["v1"] and leftovers(store.root) == []


def test_a_file_whose_metadata_cannot_be_read_is_uninstalled_by_its_uuid_file_name(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    """R12: a file the listing skips could not be uninstalled (404) and stayed for ever."""
    store = ModelStore(tmp_path)
    upload_to(store, voices["other"])
    unreadable = tmp_path / f"{UUID}.aivmx"
    unreadable.write_bytes(b"\xff" * 1000)
    assert UUID not in store.installed()
    removed = store.uninstall(UUID.upper())
    assert removed.uuid == UUID and not unreadable.exists()
    assert len(store.installed()) == 1  # the other voice stays
    with pytest.raises(ModelNotInstalledError):
        store.uninstall(UUID)
    (tmp_path / "hand-named.aivmx").write_bytes(b"\xff" * 10)  # not named by a uuid: no
    with pytest.raises(ModelNotInstalledError):
        store.uninstall("../hand-named")
    assert (tmp_path / "hand-named.aivmx").exists()


def _hyper(**data: object) -> bytes:
    """The tiny voice with fields of its config's ``data`` changed."""
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_hyper_parameters":
            config = json.loads(prop.value)
            config["data"].update(data)
            prop.value = json.dumps(config)
    return bytes(model.SerializeToString())


def test_a_refused_upload_names_what_the_client_sent_never_the_partial_file(
    tmp_path: Path,
) -> None:
    """R17: the config's errors named the server's partial file ('.upload-x.partial: data.
    sampling_rate 1 is not a sample rate'): only the reader's own errors were renamed."""
    store = ModelStore(tmp_path)
    crafted = _hyper(sampling_rate=1)
    with pytest.raises(AivmxError, match="sampling_rate") as caught:
        upload_to(store, crafted)
    assert "the uploaded file" in str(caught.value)
    assert ".partial" not in str(caught.value) and str(tmp_path) not in str(caught.value)
    with store.receive() as upload:
        upload.filename = "my voice.aivmx"
        upload.write(crafted)
        with pytest.raises(AivmxError) as named:
            store.install_upload(upload)
    assert "'my voice.aivmx'" in str(named.value) and ".partial" not in str(named.value)
    assert leftovers(tmp_path) == [] and store.installed() == {}


def test_a_full_disk_under_an_upload_is_the_disks_fault_not_the_voices(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R17: ENOSPC while storing an upload is a StoreFullError naming the folder."""
    store = ModelStore(tmp_path)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("yomiage.aivmx.upload.os.fsync", full)
    with pytest.raises(NoSpaceError, match="no space left") as caught:
        upload_to(store, voices["v1"])
    assert str(tmp_path) in str(caught.value) and ".partial" not in str(caught.value)
    assert leftovers(tmp_path) == [] and store.installed() == {}


def test_a_full_cache_during_the_conversion_is_blamed_on_the_disk_not_the_voice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R17: ONNX Runtime says a full disk in its own words; the conversion called that 'the
    graph is not a usable SBV2 JP-Extra export' (a 422 blaming a good voice file)."""
    import shutil

    from yomiage.converted import aivmx_once
    from yomiage.sources.cache import Cache

    def onnxruntime_full(source: Path, target: Path) -> None:
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : ToGraphProtoWithExternalInitializers")

    voice = tmp_path / "voice.aivmx"
    shutil.copy(AIVMX, voice)
    cache = Cache.at(tmp_path / "cache")
    monkeypatch.setattr("yomiage.export.optimize.optimize_graph", onnxruntime_full)
    monkeypatch.setattr(
        "shutil.disk_usage", lambda path: shutil._ntuple_diskusage(1 << 30, 1 << 30, 4096)
    )
    with pytest.raises(NoSpaceError, match="no space left") as caught:
        aivmx_once(voice, cache)
    assert str(cache.root) in str(caught.value)
    assert not isinstance(caught.value, AivmxError)
    assert [p.name for p in (cache.root / "converted").iterdir()] == []
    monkeypatch.undo()  # room again: the same file converts
    assert (aivmx_once(voice, cache) / "voice.json").is_file()


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    """``work`` on a thread of its own; what it raised lands in the list."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def test_a_fetch_from_a_trickling_source_ends_at_its_time_limit(tmp_path: Path) -> None:
    """R7: a source sending a byte now and then passed every per-read timeout, so the
    fetch (and the change lock held around it) lasted for as long as the source liked."""
    store = ModelStore(tmp_path)
    with trickling_source(0.2) as source, store.receive() as upload:
        thread, raised = _in_thread(
            lambda: store.fetch_into(url_of(source), upload, stop=FetchStop(1.0))
        )
        thread.join(60)
        assert not thread.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], DownloadTimeoutError)
    assert "did not end within 1 s" in str(raised[0]) and "--install-timeout" in str(raised[0])
    assert leftovers(tmp_path) == []


def test_a_fetch_stopped_from_another_thread_lets_go_of_its_source_at_once(
    tmp_path: Path,
) -> None:
    """R7: a server whose client left had no way to end the fetch it had started."""
    store = ModelStore(tmp_path)
    stop = FetchStop()  # no time limit: only the stop ends it
    with trickling_source(5.0) as source, store.receive() as upload:
        thread, raised = _in_thread(lambda: store.fetch_into(url_of(source), upload, stop=stop))
        assert source.started.wait(30)
        stop.stop("the client left")
        thread.join(30)  # the read was blocked for 5 s at a time: the stop does not wait
        assert not thread.is_alive()
        assert source.hung_up.wait(30)
    assert len(raised) == 1 and isinstance(raised[0], DownloadStoppedError)
    assert "the client left" in str(raised[0])
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX thing")
def test_a_fifo_named_like_a_voice_is_refused_not_waited_on(tmp_path: Path) -> None:
    """R7: a folder holding a FIFO called v.aivmx blocked the install for ever (no one
    writes to it), holding the change lock."""
    folder = tmp_path / "source"
    folder.mkdir()
    fifo = folder / "v.aivmx"
    os.mkfifo(fifo)
    store = ModelStore(tmp_path / "models")
    thread, raised = _in_thread(lambda: store.install_from(str(folder)))
    thread.join(30)
    if thread.is_alive():  # the old behaviour: let the thread go before failing
        fifo.open("wb").close()
        thread.join(30)
        pytest.fail("the install waited on the FIFO")
    assert len(raised) == 1 and isinstance(raised[0], SourceNotFoundError)
    assert "not a regular file" in str(raised[0])
    assert leftovers(store.root) == [] and store.installed() == {}


def test_the_aivm_info_repeats_no_huge_icon_and_cuts_a_huge_licence_where_it_repeats() -> None:
    """R14: AivmInfo repeats each icon (as the portrait, as each style's icon) and the
    licence (once per speaker) beside the manifest: a 44 MB file with two 20 MB icons made
    200 MB per listing, and a 5 MB licence went out whole in /speaker_info."""
    from yomiage.aivmx.metadata import read_metadata
    from yomiage.voicevox.aivm_info import MAX_POLICY_CHARS, MAX_REPEATED_CHARS, aivm_info

    manifest = json.loads(read_metadata(AIVMX)["aivm_manifest"])
    small = "data:image/png;base64," + "QUJD" * 100
    manifest["speakers"][0]["icon"] = small
    plain = aivm_info(manifest, path="p", size=1, loaded=False, licence="MIT")
    speaker_info = plain["speakers"][0]["speaker_info"]
    assert speaker_info["portrait"] == small.partition(",")[2]  # a real icon: as AivisSpeech
    assert speaker_info["policy"] == "MIT"

    huge_icon = "data:image/png;base64," + "A" * (MAX_REPEATED_CHARS + 4)
    licence = "第1条 " + "x" * MAX_POLICY_CHARS
    manifest["speakers"][0]["icon"] = huge_icon
    manifest["license"] = licence
    info = aivm_info(manifest, path="p", size=1, loaded=False, licence=licence)
    assert info["manifest"]["speakers"][0]["icon"] == huge_icon  # the manifest stays whole
    assert info["manifest"]["license"] == licence
    speaker_info = info["speakers"][0]["speaker_info"]
    assert speaker_info["portrait"] == ""
    assert all(style["icon"] == "" for style in speaker_info["style_infos"])
    policy = speaker_info["policy"]
    assert policy.startswith(licence[:1000]) and len(policy) < MAX_POLICY_CHARS + 200
    assert f"GET /aivm_models/{manifest['uuid']}" in policy
    assert len(json.dumps(info)) < 1.2 * len(json.dumps(manifest))  # was 3 times and more
