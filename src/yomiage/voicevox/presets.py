"""VOICEVOX presets: named sets of a style and its AudioQuery scales, kept by the server.

Editors save a character's usual settings as a preset and make queries from it
(``/audio_query_from_preset``). The store lives in memory, or in a JSON file
when the server is given one (written atomically on every change, so a crash
never leaves half a file); it holds at most :data:`MAX_PRESETS`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from yomiage.atomic import write_atomic
from yomiage.errors import YomiageError
from yomiage.voicevox.model import QueryError, scale_fields, tempo_dynamics

MAX_PRESETS = 1000
# Ids are VOICEVOX's 32-bit integers (its clients keep them in one).
MAX_ID = 2**31 - 1


@dataclass(frozen=True)
class Preset:
    id: int
    name: str
    speaker_uuid: str
    style_id: int
    speedScale: float = 1.0  # VOICEVOX's JSON names, as clients send them
    pitchScale: float = 0.0
    intonationScale: float = 1.0
    volumeScale: float = 1.0
    prePhonemeLength: float = 0.1
    postPhonemeLength: float = 0.1
    pauseLength: float | None = None
    pauseLengthScale: float = 1.0
    tempoDynamicsScale: float | None = None  # AivisSpeech's field: kept only where sent

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.tempoDynamicsScale is None:
            del data["tempoDynamicsScale"]  # VOICEVOX's shape, unchanged
        return data


def parse_preset(data: Any) -> Preset:
    """A preset from a client's JSON; QueryError names the field at fault."""
    if not isinstance(data, Mapping):
        raise QueryError("body", "must be a preset object")
    values: dict[str, Any] = {}
    for key, kind in (("id", int), ("style_id", int), ("name", str), ("speaker_uuid", str)):
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise QueryError(key, f"must be {'an integer' if kind is int else 'a string'}")
        if isinstance(value, int) and not 0 <= value <= MAX_ID:
            raise QueryError(key, f"must be an integer from 0 to {MAX_ID}")
        values[key] = value
    if not 0 < len(values["name"]) <= 200:
        raise QueryError("name", "must be 1-200 characters")
    values.update(scale_fields(data), tempoDynamicsScale=tempo_dynamics(data))
    return Preset(**values)


class PresetsFileError(YomiageError, ValueError):
    """The presets file cannot be used; the server refuses to start rather than lose
    or overwrite what the file holds."""


def _load(path: Path) -> dict[int, Preset]:
    """The presets in ``path``: a JSON list of presets, or :class:`PresetsFileError`."""
    where = f"presets file {path}"
    try:
        raw = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetsFileError(f"{where} cannot be read: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise PresetsFileError(f"{where} is not JSON ({exc}); fix or move it") from None
    if not isinstance(raw, list):
        raise PresetsFileError(
            f"{where} holds a JSON {type(raw).__name__}, not a list of presets; fix or move it"
        )
    if len(raw) > MAX_PRESETS:  # the store would refuse every add, and each save rewrites all
        raise PresetsFileError(
            f"{where} holds {len(raw)} presets; this server keeps at most {MAX_PRESETS}: "
            "remove some, or move the file"
        )
    presets: dict[int, Preset] = {}
    for i, item in enumerate(raw):
        try:
            preset = parse_preset(item)
        except QueryError as exc:
            raise PresetsFileError(f"{where}: preset {i + 1}: {exc}; fix or move it") from None
        if preset.id in presets:  # one would be dropped at the next save
            raise PresetsFileError(
                f"{where}: presets {list(presets).index(preset.id) + 1} and {i + 1} both have "
                f"id {preset.id}; give one another id, or move the file"
            )
        presets[preset.id] = preset
    return presets


class PresetStore:
    """The server's presets by id. Thread-safe; ``path``: the JSON file that keeps them
    (:class:`PresetsFileError` if it exists and is not a list of at most
    :data:`MAX_PRESETS` presets with distinct ids). A change is saved before it is
    used, so one that cannot be saved changes nothing."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._presets: dict[int, Preset] = {}
        if path is not None and path.exists():
            self._presets = _load(path)

    def all(self) -> list[Preset]:
        with self._lock:
            return sorted(self._presets.values(), key=lambda p: p.id)

    def get(self, preset_id: int) -> Preset | None:
        with self._lock:
            return self._presets.get(preset_id)

    def add(self, preset: Preset) -> int:
        """Adds ``preset``; an id already taken gets the next free one (VOICEVOX does)."""
        with self._lock:
            if len(self._presets) >= MAX_PRESETS:
                raise QueryError("body", f"this server keeps at most {MAX_PRESETS} presets")
            if preset.id in self._presets:
                preset = replace(preset, id=max(self._presets) + 1)
                if preset.id > MAX_ID:
                    raise QueryError("id", f"no id up to {MAX_ID} is free after the largest")
            self._commit({**self._presets, preset.id: preset})
            return preset.id

    def update(self, preset: Preset) -> bool:
        with self._lock:
            if preset.id not in self._presets:
                return False
            self._commit({**self._presets, preset.id: preset})
            return True

    def delete(self, preset_id: int) -> bool:
        with self._lock:
            if preset_id not in self._presets:
                return False
            self._commit({k: p for k, p in self._presets.items() if k != preset_id})
            return True

    def _commit(self, presets: dict[int, Preset]) -> None:
        """Save ``presets``, then use them: a save that fails, however, changes nothing."""
        if self.path is not None:
            items = [p.to_json() for p in sorted(presets.values(), key=lambda p: p.id)]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(items, ensure_ascii=False, indent=1), sync=True)
        self._presets = presets
