"""An AudioQuery read as AivisSpeech Engine reads it (``yomiage serve --compat aivisspeech``).

AivisSpeech Engine 1.x speaks VOICEVOX's API to SBV2 voices and gives some of
its fields SBV2 meanings; its clients set them with those meanings in mind:

- ``intonationScale`` (0-2, 1 the default) is the style strength, not the
  intonation: 0-1 is a style weight of 0-1 and 1-2 of 1-10, so the editor's
  default is SBV2's default weight and its upper half reaches strong styles.
- ``tempoDynamicsScale`` (0-2, 1 the default; AivisSpeech's own field) is the
  SDP ratio: 0-1 is 0-0.2 and 1-2 is 0.2-1.0, the default being SBV2's 0.2.
- ``pitchScale`` multiplies F0 by 1 + pitchScale, as yomiage does anyway.
- ``pauseLength`` and ``pauseLengthScale`` are accepted and ignored: the pauses
  are the voice's own.
- Punctuation is a mora of its phrase (``vowel: "pau"``, its ``text`` the mark),
  never a ``pause_mora``: SBV2 reads the marks themselves, so AivisSpeech keeps
  them where they were (:func:`with_pau_moras`); a query sent back in either
  shape is read (:func:`without_pau_moras`).

Both scales are piecewise linear with their knee at 1.0, so the slider's middle
is SBV2's default. docs/voicevox.md has the table of both modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from yomiage.options import SynthesisOptions
from yomiage.voicevox.ids import VoxStyle
from yomiage.voicevox.model import AccentPhrase, AudioQuery, Mora
from yomiage.voicevox.synthesis import synthesis_options as voicevox_options

DEFAULT_STYLE_WEIGHT = 1.0  # SBV2's, at intonationScale 1
MAX_STYLE_WEIGHT = 10.0  # at intonationScale 2
DEFAULT_SDP_RATIO = 0.2  # SBV2's, at tempoDynamicsScale 1
MAX_SDP_RATIO = 1.0  # at tempoDynamicsScale 2
# What its /engine_manifest says: 44.1 kHz audio, lengths in frames of 256 samples.
SAMPLING_RATE = 44100
FRAME_RATE = SAMPLING_RATE / 256  # 172.265625


def _knee(scale: float, at_one: float, at_two: float) -> float:
    """0 at 0, ``at_one`` at 1, ``at_two`` at 2, linear between; ``scale`` clamped to 0-2."""
    scale = min(2.0, max(0.0, scale))
    if scale <= 1.0:
        return scale * at_one
    return at_one + (scale - 1.0) * (at_two - at_one)


def style_weight(intonation_scale: float) -> float:
    """The SBV2 style weight AivisSpeech reads ``intonationScale`` as (0-1 -> 0-1, 1-2 -> 1-10)."""
    return _knee(intonation_scale, DEFAULT_STYLE_WEIGHT, MAX_STYLE_WEIGHT)


def sdp_ratio(tempo_dynamics_scale: float) -> float:
    """The SBV2 SDP ratio AivisSpeech reads ``tempoDynamicsScale`` as (0-1 -> 0-0.2,
    1-2 -> 0.2-1)."""
    return _knee(tempo_dynamics_scale, DEFAULT_SDP_RATIO, MAX_SDP_RATIO)


def synthesis_options(style: VoxStyle, query: AudioQuery) -> SynthesisOptions:
    """The SBV2 options of a query with AivisSpeech's meanings: VOICEVOX's for speed,
    pitch and the seed, the style strength and SDP ratio from the two scales, no WORLD
    intonation and the voice's own pauses."""
    tempo = 1.0 if query.tempoDynamicsScale is None else query.tempoDynamicsScale
    return replace(
        voicevox_options(style, query),
        style_weight=style_weight(query.intonationScale),
        sdp_ratio=sdp_ratio(tempo),
        intonation_scale=1.0,
        pause_seconds=None,
        pause_scale=1.0,
    )


def with_pau_moras(phrases: Sequence[AccentPhrase]) -> tuple[AccentPhrase, ...]:
    """AivisSpeech's shape of our phrases: each pause mora becomes the last mora of its
    phrase (its mark as ``text``, ``vowel`` "pau", pitch 0), ``pause_mora`` null."""
    return tuple(
        replace(p, moras=(*p.moras, replace(p.pause_mora, consonant=None, pitch=0.0)),
                pause_mora=None) if p.pause_mora is not None else p
        for p in phrases
    )  # fmt: skip


def without_pau_moras(phrases: Sequence[AccentPhrase]) -> tuple[AccentPhrase, ...]:
    """Phrases with AivisSpeech's punctuation moras read back into VOICEVOX's shape: the
    ``pau`` moras that end a phrase become its pause (their lengths added up), others are
    dropped (SBV2 reads the marks from the kana, not from the moras), and a phrase of
    marks alone becomes a pause of the phrase before it."""
    out: list[AccentPhrase] = []
    for phrase in phrases:
        spoken = [m for m in phrase.moras if m.vowel != "pau"]
        trailing: list[Mora] = []
        for mora in reversed(phrase.moras):
            if mora.vowel != "pau":
                break
            trailing.insert(0, mora)
        pause = phrase.pause_mora or _joined(trailing)
        if not spoken:
            if out and pause is not None:
                out[-1] = replace(out[-1], pause_mora=_joined([out[-1].pause_mora, pause]))
            continue
        out.append(replace(phrase, moras=tuple(spoken), pause_mora=pause,
                           accent=min(max(phrase.accent, 1), len(spoken))))  # fmt: skip
    return tuple(out)


def _joined(moras: Sequence[Mora | None]) -> Mora | None:
    """One pause mora for several: the first one's mark, their lengths added up."""
    present = [m for m in moras if m is not None]
    if not present:
        return None
    length = sum(m.vowel_length for m in present)
    return Mora(present[0].text, None, None, "pau", length, 0.0)
