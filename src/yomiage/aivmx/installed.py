"""The voices installed in a models folder, and the one rule that names them.

``yomiage serve`` keeps the AIVMX voices installed through ``/aivm_models``
in one folder (``--models-dir``, by default ``models/`` in the user data
folder) and loads them all at the next start, beside its ``--voice`` and
``--model`` voices. The name each is loaded under (OpenAI's ``voice``,
``/v1/voices``) comes from :func:`installed_voice_names`, which both the
start-up scan and the run-time installs use: the publisher's name where no
other voice has it, else that name and the start of the voice's uuid. It
depends on which voices are installed, never on the order they came in, so a
name means the same voice after any restart; a name two voices share means
neither (both carry their uuid), never one of them picked by chance.
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

MODELS_DIR_ENV = "YOMIAGE_MODELS_DIR"
log = logging.getLogger(__name__)
MAX_NAME_CHARS = 64
# A terminal's escape sequences (CSI ... final byte), dropped whole: "\x1b[31m" is no name.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
# Controls, bidi and other format characters (U+202E turns the text around), surrogates,
# line and paragraph separators: none belongs in a name shown in a list.
_DROPPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


@dataclass(frozen=True)
class InstalledVoice:
    """An installed voice as the engine loads it: its name, its file, its AIVM uuid."""

    name: str
    path: Path
    uuid: str


def default_models_dir() -> Path:
    """``$YOMIAGE_MODELS_DIR``, else ``models/`` in the platform's user data folder."""
    override = os.environ.get(MODELS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("yomiage", appauthor=False)) / "models"


def clean_voice_name(name: str) -> str:
    """A manifest's ``name`` fit to show: escape sequences, controls and format
    characters dropped, spaces trimmed, at most 64 characters ("voice" if none is left)."""
    kept = "".join(c for c in _ESCAPES.sub("", name) if unicodedata.category(c) not in _DROPPED)
    return kept.strip()[:MAX_NAME_CHARS].strip() or "voice"


def installed_voice_names(
    models: Iterable[tuple[str, str]], taken: Collection[str]
) -> dict[str, str]:
    """The name of each installed voice, from ``(uuid, manifest name)`` pairs, by uuid.

    The clean name (:func:`clean_voice_name`) where no other installed voice has it and
    ``taken`` (the command line's voices) does not hold it; else ``<name>-<8 hex digits
    of the uuid>``, or ``<name>-<uuid>`` where that is taken too (the digits shared, or
    another voice's own name: the longer name gives way). The result
    is the same for the same voices whatever their order, and no two names, nor any of
    ``taken``, are equal; a voice that could only get a name in ``taken`` (a command
    line naming a voice ``<name>-<uuid>``) is left out (the caller says so).
    """
    clean = {uuid: clean_voice_name(name) for uuid, name in models}
    shared = Counter(clean.values())
    level = {uuid: 0 if shared[c] == 1 else 1 for uuid, c in clean.items()}

    def named(uuid: str) -> str:
        return (clean[uuid], f"{clean[uuid]}-{uuid[:8]}", f"{clean[uuid]}-{uuid}")[level[uuid]]

    while True:
        names = {uuid: named(uuid) for uuid in clean}
        holders: dict[str, list[str]] = {}
        for uuid, name in names.items():
            holders.setdefault(name, []).append(uuid)
        moved: list[str] = []
        for name, uuids in holders.items():
            movable = [u for u in uuids if level[u] < 2]
            if name in taken:
                moved += movable
            elif len(uuids) > 1 and movable:
                # The longer names give way first: a publisher's own name stays if it can.
                top = max(level[u] for u in movable)
                moved += [u for u in movable if level[u] == top]
        if not moved:  # "<name>-<uuid>" names differ from each other: only `taken` is left
            return {u: n for u, n in sorted(names.items()) if n not in taken}
        for uuid in moved:
            level[uuid] += 1


def installed_voices(models_dir: Path, taken: Collection[str]) -> tuple[InstalledVoice, ...]:
    """Every voice installed in ``models_dir``, named by :func:`installed_voice_names`.
    Files that cannot be read are skipped (the store logs why); a folder that does not
    exist holds none."""
    from yomiage.aivmx.store import ModelStore

    if not models_dir.is_dir():
        return ()
    models = ModelStore(models_dir).installed()
    names = installed_voice_names(((m.uuid, m.name) for m in models.values()), taken)
    for uuid in models.keys() - names.keys():
        log.warning("skipping %s: every name it could have is a command-line voice's",
                    models[uuid].path)  # fmt: skip
    return tuple(
        InstalledVoice(names[uuid], model.path, uuid)
        for uuid, model in models.items()
        if uuid in names
    )
