"""VOICEVOX style ids for the loaded voices: stable across restarts and engines.

VOICEVOX clients name a voice by one integer, the *style id* (``speaker=`` in
every route), and save it in projects and bot configurations. AivisSpeech
numbers an AIVMX voice's style as ``((md5(speaker uuid) & (2^27 - 1)) << 5) |
local style id`` (bit 31 clear): the same formula here keeps those saved ids
working when users move to yomiage. A voice that is not an AIVMX file has no
speaker uuid, so one is derived from its loaded name and speaker name
(``uuid5(NAMESPACE_URL, "yomiage:<voice>/<speaker>")``): the ids stay the
same as long as the voice is loaded under the same name.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from yomiage.errors import ModelLoadError

MAX_LOCAL_STYLES = 32  # the formula keeps 5 bits for the style


def style_id(speaker_uuid: str, local_style: int) -> int:
    """AivisSpeech's style id of style ``local_style`` of the speaker ``speaker_uuid``."""
    if not 0 <= local_style < MAX_LOCAL_STYLES:
        raise ValueError(f"a local style id must be 0-31, not {local_style}")
    digest = int(hashlib.md5(speaker_uuid.encode(), usedforsecurity=False).hexdigest(), 16)
    return (((digest & ((1 << 27) - 1)) << 5) | local_style) & ~(1 << 31)


def derived_speaker_uuid(voice: str, speaker: str) -> str:
    """The speaker uuid of a voice that has none (any but AIVMX)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"yomiage:{voice}/{speaker}"))


@dataclass(frozen=True)
class VoxStyle:
    """One style of one speaker of one loaded voice, as VOICEVOX clients see it."""

    id: int
    voice: str  # the loaded voice's name
    speaker: str
    speaker_id: int
    speaker_uuid: str
    style: str


@dataclass(frozen=True)
class VoxSpeaker:
    name: str
    speaker_uuid: str
    voice: str
    styles: tuple[VoxStyle, ...]


def vox_speakers(
    voices: Iterable[tuple[str, Mapping[str, int], Mapping[str, int], Mapping[str, str] | None]],
) -> tuple[VoxSpeaker, ...]:
    """Speakers and style ids of ``(voice name, speaker ids, style ids, speaker uuids)``;
    two styles that would share an id are a load error naming both."""
    speakers: list[VoxSpeaker] = []
    seen: dict[int, VoxStyle] = {}
    for voice, speaker_ids, style_ids, uuids in voices:
        many = len(speaker_ids) > 1
        for speaker, speaker_id in speaker_ids.items():
            uid = (uuids or {}).get(speaker) or derived_speaker_uuid(voice, speaker)
            styles = []
            for style, local in style_ids.items():
                if local >= MAX_LOCAL_STYLES:
                    continue  # VOICEVOX ids have room for 32 styles per speaker
                vox = VoxStyle(style_id(uid, local), voice, speaker, speaker_id, uid, style)
                clash = seen.get(vox.id)
                if clash is not None:
                    raise ModelLoadError(
                        f"VOICEVOX style id {vox.id} would name both {clash.voice}/"
                        f"{clash.speaker}/{clash.style} and {voice}/{speaker}/{style}; "
                        "load one of them under another name"
                    )
                seen[vox.id] = vox
                styles.append(vox)
            name = f"{voice} ({speaker})" if many else voice
            speakers.append(VoxSpeaker(name, uid, voice, tuple(styles)))
    return tuple(speakers)
