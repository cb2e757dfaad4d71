"""The model store's changes are all-or-nothing (issue 31): a check that fails after the new
file is in place, with any error type, puts the old file and record back; an uninstall cut
midway keeps the voice; an unreadable sources.json is never overwritten; and the one rule
that names installed voices."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

from tests.aivm_files import OTHER_UUID, UUID, leftovers, records, sha, upload_to
from tests.aivm_files import voice_files as _voice_files
from yomiage.aivmx.store import InstalledModel, ModelStore, ModelStoreError


@pytest.fixture(scope="module")
def voices() -> dict[str, bytes]:
    return _voice_files()


def _published(tmp_path: Path, data: bytes, name: str = "voice.aivmx") -> Path:
    folder = tmp_path / "published"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def _refuse(model: InstalledModel) -> None:
    raise RuntimeError(f"{model.uuid} does not load")


@pytest.mark.parametrize("how", ["upload", "url", "update"])
def test_a_failed_check_puts_the_old_file_and_record_back(
    tmp_path: Path, voices: dict[str, bytes], how: str
) -> None:
    """Issue 31 R1: the new file replaced the old one before anything checked it loads."""
    store = ModelStore(tmp_path / "models")
    source = _published(tmp_path, voices["v1"])
    installed = store.install_from(str(source))
    before = (sha(installed.path), records(store.root))
    source.write_bytes(voices["v2"])

    def install() -> None:
        if how == "upload":
            with store.receive() as upload:
                upload.write(voices["v2"])
                store.install_upload(upload, check=_refuse)
        elif how == "url":
            store.install_from(str(source), check=_refuse)
        else:
            store.update(UUID, check=_refuse)

    with pytest.raises(RuntimeError, match="does not load"):
        install()
    assert (sha(installed.path), records(store.root)) == before
    assert store.get(UUID).version == "1.0.0" and leftovers(store.root) == []


def test_a_failed_check_of_a_fresh_install_leaves_nothing(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    """Issue 31 R2: only the store's own error took a fresh install back."""
    store = ModelStore(tmp_path / "models")
    with pytest.raises(RuntimeError):
        store.install_from(str(_published(tmp_path, voices["other"])), check=_refuse)
    assert list(store.root.iterdir()) == []
    assert store.installed() == {}


def test_a_passing_check_sees_the_new_file_in_place(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    store = ModelStore(tmp_path / "models")
    upload_to(store, voices["v1"])
    seen: list[str] = []

    def check(model: InstalledModel) -> None:
        seen.append(store.get(model.uuid).version)

    with store.receive() as upload:
        upload.write(voices["v2"])
        store.install_upload(upload, check=check)
    assert seen == ["2.0.0"] and store.get(UUID).version == "2.0.0"
    assert leftovers(store.root) == []


def test_an_uninstall_cut_midway_keeps_the_file(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file was deleted before its record was rewritten; a failure there lost it."""
    store = ModelStore(tmp_path / "models")
    model = store.install_from(str(_published(tmp_path, voices["v1"])))
    before = (sha(model.path), records(store.root))

    def broken(uuid: str, source: str | None) -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(store, "_record", broken)
    with pytest.raises(OSError, match="went away"):
        store.uninstall(UUID)
    assert (sha(model.path), records(store.root)) == before
    assert leftovers(store.root) == []


@pytest.mark.parametrize("broken", ['{"version": 1, "models": {', "[]", '{"models": 3}'])
def test_an_unreadable_sources_file_is_never_overwritten(
    tmp_path: Path, voices: dict[str, bytes], broken: str
) -> None:
    """Issue 31 R18: an unreadable sources.json was overwritten at the next install, so
    every other voice lost its recorded source (its update then said "uploaded")."""
    store = ModelStore(tmp_path / "models")
    store.install_from(str(_published(tmp_path, voices["v1"])))
    path = store.root / "sources.json"
    path.write_text(broken)
    other = _published(tmp_path, voices["other"], "other.aivmx")
    with pytest.raises(ModelStoreError, match=r"sources\.json cannot be read"):
        store.install_from(str(other))
    with pytest.raises(ModelStoreError, match="fix or move it"):
        store.uninstall(UUID)
    assert path.read_text() == broken
    assert list(store.installed()) == [UUID]  # the listing still works
    path.write_text(json.dumps({"version": 1, "models": {}}))
    assert store.install_from(str(other)).uuid == OTHER_UUID


def test_a_replacement_cut_by_a_crash_is_undone_when_the_store_opens(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that died while it checked a new file left it in place and the old one
    aside; the next store put the old one back (once nothing else could be using it)."""
    store = ModelStore(tmp_path / "models")
    model = upload_to(store, voices["v1"])
    kept = store.root / f".replaced-{model.path.name}"
    shutil.copy(model.path, kept)
    model.path.write_bytes(voices["v2"])
    ModelStore(store.root)  # a fresh one: the cut replacement is too recent to touch
    assert kept.exists()
    monkeypatch.setattr("yomiage.aivmx.store_files.STALE_PARTIAL_S", -60.0)
    assert ModelStore(store.root).get(UUID).version == "1.0.0"
    assert leftovers(store.root) == []


# -- the naming rule ------------------------------------------------------------------

MAI = [("ffffffff-0000-4000-8000-000000000001", "まい"),
       ("00000001-0000-4000-8000-000000000002", "まい"),
       ("00000000-0000-4000-8000-00000000000a", "sbv2_tiny"),
       ("00000000-0000-4000-8000-00000000000b", "sbv2_tiny"),
       (UUID, "sbv2_tiny"), (OTHER_UUID, "another voice")]  # fmt: skip


def test_names_do_not_depend_on_the_order_of_installs() -> None:
    """Issue 31 R3: the order of installs decided which voice got the bare name."""
    from yomiage.aivmx.installed import installed_voice_names

    names = installed_voice_names(MAI, ["tiny"])
    for order in itertools.permutations(MAI):
        assert installed_voice_names(order, ["tiny"]) == names
    assert names == {
        "ffffffff-0000-4000-8000-000000000001": "まい-ffffffff",
        "00000001-0000-4000-8000-000000000002": "まい-00000001",
        "00000000-0000-4000-8000-00000000000a": "sbv2_tiny-00000000-0000-4000-8000-00000000000a",
        "00000000-0000-4000-8000-00000000000b": "sbv2_tiny-00000000-0000-4000-8000-00000000000b",
        UUID: "sbv2_tiny-13eb270c",
        OTHER_UUID: "another voice",
    }


def test_names_never_collide_with_each_other_or_the_command_line() -> None:
    """Issue 31 R11: a suffixed name could equal another voice's name, or a taken one."""
    from yomiage.aivmx.installed import installed_voice_names

    tricky = [(UUID, "voice"), (OTHER_UUID, "voice-13eb270c"), ("0b8ac1c2-0000-4000-8000-00000000000c", "tiny")]  # fmt: skip
    # "voice" is taken, and "voice-13eb270c" is another voice's own name: it keeps it.
    assert installed_voice_names(tricky, ["tiny", "voice"]) == {
        UUID: f"voice-{UUID}",
        OTHER_UUID: "voice-13eb270c",
        "0b8ac1c2-0000-4000-8000-00000000000c": "tiny-0b8ac1c2",
    }
    # A command line that holds every name a voice could have: that voice is left out.
    taken = ["x", "x-13eb270c", f"x-{UUID}"]
    assert installed_voice_names([(UUID, "x")], taken) == {}


def test_names_drop_controls_bidi_and_escape_sequences() -> None:
    """Issue 31 R20: installed-voice names kept U+202E and ESC sequences, so a voice list
    could be shown reversed or coloured."""
    from yomiage.aivmx.installed import clean_voice_name, installed_voice_names

    assert clean_voice_name("\x1b[31m\u202eまい\u200f\x00\n") == "まい"
    assert clean_voice_name("a\u2028b\u2066c") == "abc"
    assert clean_voice_name("\u202e\x1b[0m ") == "voice"
    assert clean_voice_name("x" * 100) == "x" * 64
    assert installed_voice_names([(UUID, "\u202eevil\x1b[2J")], []) == {UUID: "evil"}


def test_a_names_clean_form_is_what_two_voices_share() -> None:
    """Two names equal once cleaned are one name: both voices carry their uuid."""
    from yomiage.aivmx.installed import installed_voice_names

    names = installed_voice_names([(UUID, "まい"), (OTHER_UUID, "\u202eまい")], [])
    assert sorted(names.values()) == ["まい-0b8ac1c2", "まい-13eb270c"]
