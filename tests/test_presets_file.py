"""The ``--presets`` file: what it holds is never lost (issue 31, item 14, R19).

A file with two presets of one id listed one of them, and the next change
rewrote the file without the other; a file of 5,000 presets was loaded whole
though the store holds 1,000. Both now stop the server at start with one line
that names the file and the problem; the file is left as it was. A change is
saved before it is used: one that fails leaves the store and the file as they
were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yomiage import atomic
from yomiage.voicevox import presets as presets_module
from yomiage.voicevox.presets import (
    MAX_PRESETS,
    Preset,
    PresetsFileError,
    PresetStore,
    parse_preset,
)


def _preset(preset_id: int, name: str = "p") -> dict[str, Any]:
    return {"id": preset_id, "name": name, "speaker_uuid": "00000000-0000-0000-0000-000000000000",
            "style_id": 1, "speedScale": 1.0, "pitchScale": 0.0, "intonationScale": 1.0,
            "volumeScale": 1.0, "prePhonemeLength": 0.1, "postPhonemeLength": 0.1,
            "pauseLength": None, "pauseLengthScale": 1.0}  # fmt: skip


def _write(path: Path, items: list[dict[str, Any]]) -> str:
    text = json.dumps(items, ensure_ascii=False)
    path.write_text(text, "utf-8")
    return text


def test_a_presets_file_with_a_duplicate_id_refuses_to_start_naming_the_id(
    tmp_path: Path,
) -> None:
    """R19: two presets of id 1 ("a", "b") listed one, and the first add dropped "a"."""
    path = tmp_path / "presets.json"
    text = _write(path, [_preset(1, "a"), _preset(2, "c"), _preset(1, "b")])
    with pytest.raises(PresetsFileError) as caught:
        PresetStore(path)
    message = str(caught.value)
    assert str(path) in message and "id 1" in message and "\n" not in message
    assert path.read_text("utf-8") == text


def test_a_presets_file_over_the_cap_refuses_to_start(tmp_path: Path) -> None:
    """R19: a file of 5,000 presets loaded all 5,000 (the cap is 1,000)."""
    path = tmp_path / "presets.json"
    text = _write(path, [_preset(i) for i in range(1, MAX_PRESETS + 2)])
    with pytest.raises(PresetsFileError) as caught:
        PresetStore(path)
    message = str(caught.value)
    assert str(path) in message and f"{MAX_PRESETS + 1} presets" in message
    assert str(MAX_PRESETS) in message and "\n" not in message
    assert path.read_text("utf-8") == text


def test_a_presets_file_at_the_cap_loads(tmp_path: Path) -> None:
    path = tmp_path / "presets.json"
    _write(path, [_preset(i) for i in range(1, MAX_PRESETS + 1)])
    assert len(PresetStore(path).all()) == MAX_PRESETS


def test_serve_refuses_a_duplicate_id_with_one_line(tmp_path: Path, test_voice: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "presets.json"
    text = _write(path, [_preset(7, "a"), _preset(7, "b")])
    done = subprocess.run(
        [sys.executable, "-m", "yomiage", "serve", "--port", "0", "--in-process", "--no-warmup",
         "--model", f"tiny={test_voice}", "--presets", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "id 7" in line]
    assert len(lines) == 1 and str(path) in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert path.read_text("utf-8") == text


@pytest.mark.parametrize("change", ["add", "update", "delete"])
@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), RuntimeError("x")])
@pytest.mark.parametrize("where", ["write", "rename"])
def test_a_change_that_cannot_be_saved_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str, failure: Exception, where: str
) -> None:
    """The store changed in memory before the save; a failed save left memory and file apart."""
    path = tmp_path / "presets.json"
    store = PresetStore(path)
    store.add(parse_preset(_preset(1, "kept")))
    text = path.read_text("utf-8")
    before = store.all()

    def fail(*args: Any, **kwargs: Any) -> None:
        raise failure

    if where == "write":
        monkeypatch.setattr(presets_module, "write_atomic", fail)
    else:  # midway: the new file is written aside, and its rename fails
        monkeypatch.setattr(atomic.os, "replace", fail)
    changes = {
        "add": lambda: store.add(parse_preset(_preset(2, "new"))),
        "update": lambda: store.update(Preset(**_preset(1, "renamed"))),
        "delete": lambda: store.delete(1),
    }
    with pytest.raises(type(failure)):
        changes[change]()
    monkeypatch.undo()
    assert store.all() == before
    assert path.read_text("utf-8") == text
    assert PresetStore(path).all() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["presets.json"]  # nothing left aside
