"""AivisSpeech's ``AivmInfo``: what ``GET /aivm_models`` says about one installed voice.

The shape AivisSpeech Engine answers with: whether the voice is loaded, its
AIVM manifest as the file holds it, its file, and its speakers in VOICEVOX's
``/speakers`` + ``/speaker_info`` shapes (``speakers[].speaker`` and
``speakers[].speaker_info``), with the style ids :mod:`yomiage.voicevox.ids`
gives, which are AivisSpeech's. yomiage never asks AivisHub for newer
versions: ``is_update_available`` is false, ``latest_version`` the file's own
and ``is_private_model`` true, which is what AivisSpeech reports for a voice it
cannot find on AivisHub. Icons and voice samples, data URLs in the manifest,
are given as their base64 payload, as AivisSpeech gives them.

That shape repeats what the manifest holds: each speaker's icon again as its
portrait and as the icon of each of its styles without one, the samples again,
the licence again for each speaker. A crafted file's 20 MB icons made a 44 MB
file a 200 MB answer, so the repeats are bounded while the manifest stays
whole: an icon or sample past :data:`MAX_REPEATED_CHARS` is left out of them
(a real icon is a small picture), and a licence past :data:`MAX_POLICY_CHARS`
is cut there with a line saying where the whole text is (:func:`policy`, also
what ``/speaker_info`` sends).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yomiage.voicevox.ids import MAX_LOCAL_STYLES, style_id

MAX_REPEATED_CHARS = 4 << 20  # base64 of an icon or a sample repeated beside the manifest
MAX_POLICY_CHARS = 1 << 17  # a licence as a speaker's policy (the manifest keeps it whole)


def aivm_info(
    manifest: Mapping[str, Any], *, path: str, size: int, loaded: bool, licence: str | None
) -> dict[str, Any]:
    """The ``AivmInfo`` of one installed voice (``licence``: the text the file carries)."""
    version = _text(manifest.get("version"))
    return {
        "is_loaded": loaded,
        "is_update_available": False,
        "is_private_model": True,
        "is_default_model": False,
        "latest_version": version,
        "file_path": path,
        "file_size": size,
        "manifest": dict(manifest),
        "speakers": [
            _library_speaker(s, version, policy(licence, _text(manifest.get("uuid"))))
            for s in _list(manifest.get("speakers"))
            if isinstance(s, Mapping)
        ],
    }


def _library_speaker(
    speaker: Mapping[str, Any], version: str, licence: str | None
) -> dict[str, Any]:
    uid = _text(speaker.get("uuid"))
    icon = _repeated(_base64(speaker.get("icon")))
    styles = [
        (style_id(uid, style["local_id"]), style)
        for style in _list(speaker.get("styles"))
        if isinstance(style, Mapping) and _local_id(style.get("local_id")) and uid
    ]
    return {
        "speaker": {
            "name": _text(speaker.get("name")),
            "speaker_uuid": uid,
            "styles": [
                {"name": _text(s.get("name")), "id": sid, "type": "talk"} for sid, s in styles
            ],
            "version": version,
            "supported_features": {"permitted_synthesis_morphing": "NOTHING"},
        },
        "speaker_info": {
            "policy": licence or "",
            "portrait": icon,
            "style_infos": [_style_info(sid, s, icon) for sid, s in styles],
        },
    }


def _style_info(sid: int, style: Mapping[str, Any], speaker_icon: str) -> dict[str, Any]:
    samples = [s for s in _list(style.get("voice_samples")) if isinstance(s, Mapping)]
    return {
        "id": sid,
        "icon": _repeated(_base64(style.get("icon"))) or speaker_icon,
        "portrait": None,
        "voice_samples": [_repeated(_base64(s.get("audio"))) for s in samples],
        "voice_sample_transcripts": [_text(s.get("transcript")) for s in samples],
    }


def policy(licence: str | None, uuid: str) -> str | None:
    """A voice's licence as a speaker's ``policy``: whole up to :data:`MAX_POLICY_CHARS`
    characters; past that cut there, with a line saying how much follows and where
    the whole text is (a crafted file's 5 MB licence went out whole each time)."""
    if licence is None or len(licence) <= MAX_POLICY_CHARS:
        return licence
    rest = len(licence) - MAX_POLICY_CHARS
    return (
        f"{licence[:MAX_POLICY_CHARS]}\n\n[… {rest:,} more characters: the whole licence is "
        f"the manifest's license, GET /aivm_models/{uuid or '<uuid>'}]"
    )


def _repeated(payload: str) -> str:
    """``payload`` where it may be repeated beside the manifest: "" past the bound."""
    return payload if len(payload) <= MAX_REPEATED_CHARS else ""


def _local_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_LOCAL_STYLES


def _base64(data_url: Any) -> str:
    """The payload of a ``data:...;base64,`` URL ("" for anything else)."""
    if not isinstance(data_url, str) or not data_url.startswith("data:"):
        return ""
    return data_url.partition(",")[2]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
