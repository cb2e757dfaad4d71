"""The voices installed in a models folder, as the voices an engine loads at start.

``yomiage serve`` keeps the AIVMX voices installed through ``/aivm_models``
in one folder (``--models-dir``, by default ``models/`` in the user data
folder) and loads them all at the next start, beside its ``--voice`` and
``--model`` voices. Each is loaded under its manifest's name, or, when another
voice has that name, the name and the start of its uuid, so the names on the
wire (OpenAI's ``voice``, ``/v1/voices``) are the ones the publisher chose.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

from yomiage.engine_spec import VoiceSource

MODELS_DIR_ENV = "YOMIAGE_MODELS_DIR"
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


def default_models_dir() -> Path:
    """``$YOMIAGE_MODELS_DIR``, else ``models/`` in the platform's user data folder."""
    override = os.environ.get(MODELS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("yomiage", appauthor=False)) / "models"


def installed_voice_name(name: str, uuid: str, taken: Collection[str]) -> str:
    """The name an installed voice is loaded under: its manifest's ``name`` (control
    characters dropped), or with ``-<uuid start>`` when another voice has that name."""
    clean = _UNPRINTABLE.sub("", name).strip()[:64] or "voice"
    return clean if clean not in taken else f"{clean}-{uuid[:8]}"


def installed_voice_sources(models_dir: Path, taken: Collection[str]) -> tuple[VoiceSource, ...]:
    """``(name, file)`` of every voice installed in ``models_dir``, named so that no two
    voices, and none of ``taken``, share a name. Files that cannot be read are skipped
    (the store logs why); a folder that does not exist holds none."""
    from yomiage.aivmx.store import ModelStore

    if not models_dir.is_dir():
        return ()
    names = set(taken)
    out: list[VoiceSource] = []
    for model in ModelStore(models_dir).installed().values():
        name = installed_voice_name(model.name, model.uuid, names)
        names.add(name)
        out.append((name, str(model.path)))
    return tuple(out)
