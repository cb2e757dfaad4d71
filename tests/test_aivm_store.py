"""The folder of AIVMX voices a server installs at run time (``yomiage.aivmx.store``).

Every failure must leave the installed file as it was and no partial file behind;
web downloads are in test_aivm_fetch.py.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from tests.aivm_files import (
    AIVMX,
    OTHER_UUID,
    UUID,
    leftovers,
    records,
    sha,
    upload_to,
    variant,
    voice_files,
)
from yomiage.aivmx.reader import AivmxError
from yomiage.aivmx.store import (
    ModelNotInstalledError,
    ModelStore,
    NoUpdateError,
    UploadTooLargeError,
)
from yomiage.errors import (
    InvalidSourceError,
    SourceNotFoundError,
)


@pytest.fixture(scope="module")
def voices() -> dict[str, bytes]:
    return voice_files()


# -- uploads -------------------------------------------------------------------


def test_upload_installs_lists_and_gets(tmp_path: Path, voices: dict[str, bytes]) -> None:
    store = ModelStore(tmp_path / "models")
    assert store.installed() == {}
    model = upload_to(store, voices["v1"])
    assert (model.uuid, model.name, model.version) == (UUID, "sbv2_tiny", "1.0.0")
    assert model.path == tmp_path / "models" / f"{UUID}.aivmx"
    assert model.size == len(voices["v1"]) and model.source is None
    assert model.manifest["model_architecture"] == "Style-Bert-VITS2 (JP-Extra)"
    assert list(store.installed()) == [UUID]
    assert store.get(UUID) == model
    assert store.get(UUID.upper()).path == model.path
    assert leftovers(store.root) == []
    assert os.name == "nt" or model.path.stat().st_mode & 0o777 == 0o644  # as files users keep


def test_listing_is_sorted_by_name_and_skips_unreadable_files(
    tmp_path: Path, voices: dict[str, bytes], caplog: pytest.LogCaptureFixture
) -> None:
    store = ModelStore(tmp_path)
    upload_to(store, voices["v1"])
    upload_to(store, voices["other"])
    (tmp_path / "garbage.aivmx").write_bytes(b"\xff" * 100)
    (tmp_path / "notes.txt").write_text("not a voice")
    with caplog.at_level(logging.WARNING, logger="yomiage.aivmx.store"):
        listed = store.installed()
    assert [m.name for m in listed.values()] == ["another voice", "sbv2_tiny"]
    assert "garbage.aivmx" in caplog.text


def test_listing_reads_metadata_only_of_changed_files(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ModelStore(tmp_path)
    upload_to(store, voices["v1"])
    store.installed()
    from yomiage.aivmx.metadata import read_metadata

    calls: list[Path] = []

    def counted(path: Path) -> dict[str, str]:
        calls.append(path)
        return read_metadata(path)

    monkeypatch.setattr("yomiage.aivmx.installed_model.read_metadata", counted)
    store.installed()
    assert calls == []
    upload_to(store, voices["v2"])  # a new file under the same name: read again
    assert store.installed()[UUID].version == "2.0.0"
    assert calls


def test_same_uuid_replaces(tmp_path: Path, voices: dict[str, bytes]) -> None:
    store = ModelStore(tmp_path)
    first = upload_to(store, voices["v1"])
    second = upload_to(store, voices["v2"])
    assert second.path == first.path and second.version == "2.0.0"
    assert list(store.installed()) == [UUID]
    assert first.path.read_bytes() == voices["v2"]


def test_too_large_upload_is_refused_and_the_old_file_kept(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    store = ModelStore(tmp_path, max_bytes=len(voices["v1"]) + 10)
    old = upload_to(store, voices["v1"])
    with pytest.raises(UploadTooLargeError, match="--max-upload-mb"):
        upload_to(store, voices["v1"] + b"x" * 100)
    assert old.path.read_bytes() == voices["v1"]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "damage",
    [lambda data: data[: len(data) // 2], lambda data: bytes(range(256)) * 64, lambda data: b""],
    ids=["truncated", "random", "empty"],
)
def test_invalid_upload_is_refused_and_the_old_file_kept(
    tmp_path: Path, voices: dict[str, bytes], damage: Callable[[bytes], bytes]
) -> None:
    store = ModelStore(tmp_path)
    old = upload_to(store, voices["v1"])
    with pytest.raises(AivmxError, match="the uploaded file") as caught:
        upload_to(store, damage(voices["v2"]))
    assert ".partial" not in str(caught.value)  # the server's path stays inside
    assert old.path.read_bytes() == voices["v1"]
    assert leftovers(tmp_path) == []


def test_an_upload_left_without_install_is_removed(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    with store.receive() as upload:
        upload.write(b"half a voice")
        assert upload.path.exists() and upload.path.parent == tmp_path
    assert leftovers(tmp_path) == []

    def client_leaves() -> None:
        with store.receive() as upload:
            upload.write(b"half a voice")
            raise RuntimeError("client left")

    with pytest.raises(RuntimeError):
        client_leaves()
    assert leftovers(tmp_path) == []


def test_hand_copied_file_is_listed_and_replaced_in_place(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    copied = tmp_path / "My Voice.AIVMX"
    copied.write_bytes(voices["v1"])
    store = ModelStore(tmp_path)
    assert store.get(UUID).path == copied and store.get(UUID).source is None
    model = upload_to(store, voices["v2"])
    assert model.path == copied and copied.read_bytes() == voices["v2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["My Voice.AIVMX"]


def test_concurrent_uploads_of_one_voice_leave_one_intact_file(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    store = ModelStore(tmp_path)
    errors: list[BaseException] = []

    def install(data: bytes) -> None:
        try:
            upload_to(store, data)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=install, args=(voices[k],)) for k in ["v1", "v2"] * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert list(store.installed()) == [UUID]
    assert store.get(UUID).path.read_bytes() in (voices["v1"], voices["v2"])
    assert leftovers(tmp_path) == []


def test_stale_partials_are_removed_when_the_store_opens(tmp_path: Path) -> None:
    import os

    stale, fresh = tmp_path / ".upload-old.partial", tmp_path / ".upload-new.partial"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (0, 0))
    ModelStore(tmp_path)
    assert not stale.exists() and fresh.exists()


# -- local sources, update, uninstall ------------------------------------------


def test_install_from_a_path_and_file_uri(tmp_path: Path, voices: dict[str, bytes]) -> None:
    src = tmp_path / "src" / "voice.aivmx"
    src.parent.mkdir()
    src.write_bytes(voices["v1"])
    store = ModelStore(tmp_path / "models")
    model = store.install_from(str(src))
    assert model.source == str(src) and model.path.read_bytes() == voices["v1"]
    assert records(store.root) == {UUID: {"source": str(src)}}
    model = store.install_from(src.as_uri())
    assert model.source == src.as_uri() and store.get(UUID).source == src.as_uri()
    assert store.install_from(str(src.parent)).uuid == UUID  # a folder of one voice
    assert leftovers(store.root) == []


def test_install_from_a_relative_path_records_it_absolute(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "voice.aivmx").write_bytes(voices["v1"])
    monkeypatch.chdir(tmp_path)
    model = ModelStore(tmp_path / "models").install_from("voice.aivmx")
    assert model.source == str(tmp_path / "voice.aivmx")


def test_install_from_a_missing_path(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "models")
    for malformed in ("", "http://[::1", "ftp://example.com/v.aivmx"):
        with pytest.raises(InvalidSourceError):
            store.install_from(malformed)
    with pytest.raises(SourceNotFoundError):
        store.install_from(str(tmp_path / "nothing.aivmx"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceNotFoundError, match="no AIVMX file"):
        store.install_from(str(tmp_path / "empty"))
    assert leftovers(store.root) == []


def test_update_without_a_source_is_refused(tmp_path: Path, voices: dict[str, bytes]) -> None:
    store = ModelStore(tmp_path)
    upload_to(store, voices["v1"])
    with pytest.raises(NoUpdateError, match="no source"):
        store.update(UUID)


def test_update_from_a_path(tmp_path: Path, voices: dict[str, bytes]) -> None:
    src = tmp_path / "voice.aivmx"
    src.write_bytes(voices["v1"])
    store = ModelStore(tmp_path / "models")
    installed = store.install_from(str(src))
    with pytest.raises(NoUpdateError, match="up to date"):
        store.update(UUID)
    assert leftovers(store.root) == []
    src.write_bytes(voices["v2"])
    updated = store.update(UUID)
    assert updated.version == "2.0.0" and updated.path == installed.path
    assert updated.source == str(src) and sha(updated.path) == sha(src)
    src.write_bytes(voices["other"])  # the source now holds another voice
    with pytest.raises(NoUpdateError, match=OTHER_UUID):
        store.update(UUID)
    assert installed.path.read_bytes() == voices["v2"] and list(store.installed()) == [UUID]
    src.write_bytes(voices["v2"][:1000])
    with pytest.raises(AivmxError):
        store.update(UUID)
    assert installed.path.read_bytes() == voices["v2"]
    assert leftovers(store.root) == []


def test_uninstall_removes_the_file_and_its_record(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    src = tmp_path / "voice.aivmx"
    src.write_bytes(voices["other"])
    store = ModelStore(tmp_path / "models")
    upload_to(store, voices["v1"])
    store.install_from(str(src))
    removed = store.uninstall(OTHER_UUID)
    assert removed.uuid == OTHER_UUID and not removed.path.exists()
    assert list(store.installed()) == [UUID] and records(store.root) == {}
    with pytest.raises(ModelNotInstalledError, match="is not installed"):
        store.uninstall(OTHER_UUID)


@pytest.mark.parametrize("uuid", [OTHER_UUID, "not-a-uuid", "../" * 50])
def test_unknown_uuid(tmp_path: Path, uuid: str) -> None:
    store = ModelStore(tmp_path)
    for call in (store.get, store.update, store.uninstall):
        with pytest.raises(ModelNotInstalledError) as caught:
            call(uuid)
        assert len(str(caught.value)) < 150


def test_a_manifest_holding_nan_is_refused_and_never_listed(tmp_path: Path) -> None:
    """Python's JSON parser takes NaN, which no JSON answer can carry: such a voice would
    have failed every listing of the server's models."""
    store = ModelStore(tmp_path / "models")
    crafted = variant(training_epochs=float("nan"))  # type: ignore[arg-type]
    with pytest.raises(AivmxError, match="NaN"):
        upload_to(store, crafted)
    (store.root / "copied.aivmx").write_bytes(crafted)
    assert store.installed() == {}


def test_a_manifest_holding_a_lone_surrogate_is_refused(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "models")
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_manifest":  # the escape survives in the JSON text, as in a file
            prop.value = json.dumps({**json.loads(prop.value), "name": "\ud800"})
    with pytest.raises(AivmxError, match="surrogate"):
        upload_to(store, model.SerializeToString())
    assert store.installed() == {}
