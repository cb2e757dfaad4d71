"""The model store's bounds (issue 31): what an install may hold, what it leaves behind, and
what its errors name. Every failure leaves the installed file as it was and no partial."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from tests.aivm_files import AIVMX, UUID, leftovers, upload_to, voice_files
from yomiage.aivmx.reader import AivmxError, read_aivmx
from yomiage.aivmx.store import ModelNotInstalledError, ModelStore


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
