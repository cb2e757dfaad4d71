"""The per-call knobs of synthesis: one frozen object, checked once where a call comes in.

Every option has a range a voice can use. The ranges are not style: SBV2 takes
any float, and a stochastic duration predictor fed ``noise_w=10`` predicts
minutes of audio for one word (a server held 8.4 GB for 300 s on one such
request). Outside its range an option raises :class:`OptionError` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TypedDict

from yomiage.errors import OptionError

# option -> (lowest, highest) accepted value, both included.
RANGES: Mapping[str, tuple[float, float]] = {
    "style_weight": (0.0, 20.0),  # SBV2's editor goes to 20; beyond, styles break apart
    "speed": (0.25, 4.0),  # length scale: 4 is four times slower (OpenAI's speed range)
    "sdp_ratio": (0.0, 1.0),  # a mix of the two duration predictors
    "noise": (0.0, 2.0),  # SBV2 default 0.6
    "noise_w": (0.0, 2.0),  # SBV2 default 0.8
    "pitch_scale": (0.25, 4.0),  # two octaves either way
    "intonation_scale": (0.0, 4.0),
    "pause_scale": (0.0, 10.0),  # times the pause between sentences
}
MAX_PAUSE_SECONDS = 10.0
MAX_SEED = 2**64 - 1
MAX_STYLE_NAME = 256


def _check_number(name: str, value: object) -> None:
    low, high = RANGES[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise OptionError(name, f"{name} must be a finite number, not {value!r}")
    if not low <= value <= high:
        raise OptionError(name, f"{name} must be between {low:g} and {high:g}, not {value:g}")


# SBV2 names its neutral style "Neutral", AivisSpeech's voices "ノーマル": either name reaches it.
STYLE_ALIASES = {"Neutral": "ノーマル", "ノーマル": "Neutral"}


@dataclass(frozen=True)
class SynthesisOptions:
    """Per-call options with SBV2's meanings and its API's defaults (spec §6).

    ``speed`` is SBV2's ``length_scale``: larger is slower. ``seed`` makes the
    noise reproducible; ``None`` draws fresh noise each call. ``quick_start``
    reads a long first sentence's first clause (up to its first comma) on its
    own, so the first audio of a stream comes sooner; the clause is then read
    without the rest of the sentence as context (SBV2 never does this).
    The pause between sentences is the duration predictor's (at least 80 ms),
    or ``pause_seconds`` when given, times ``pause_scale``.
    Ranges: :data:`RANGES`.
    """

    style: str = "Neutral"
    style_weight: float = 1.0
    speaker_id: int = 0
    speed: float = 1.0
    sdp_ratio: float = 0.2
    noise: float = 0.6
    noise_w: float = 0.8
    pitch_scale: float = 1.0
    intonation_scale: float = 1.0
    seed: int | None = None
    quick_start: bool = False
    pause_seconds: float | None = None
    pause_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in RANGES:
            _check_number(name, getattr(self, name))
        if not isinstance(self.style, str) or not 0 < len(self.style) <= MAX_STYLE_NAME:
            raise OptionError("style", f"style must be a style name, not {self.style!r:.80}")
        if (
            isinstance(self.speaker_id, bool)
            or not isinstance(self.speaker_id, int)
            or not 0 <= self.speaker_id < 2**31
        ):
            raise OptionError(
                "speaker_id", f"speaker_id must be a speaker number, not {self.speaker_id!r:.40}"
            )
        if not isinstance(self.quick_start, bool):
            raise OptionError(
                "quick_start", f"quick_start must be True or False, not {self.quick_start!r:.40}"
            )
        if self.pause_seconds is not None and (
            isinstance(self.pause_seconds, bool)
            or not isinstance(self.pause_seconds, int | float)
            or not 0.0 <= self.pause_seconds <= MAX_PAUSE_SECONDS
        ):
            raise OptionError(
                "pause_seconds",
                f"pause_seconds must be 0-{MAX_PAUSE_SECONDS:g} or None, "
                f"not {self.pause_seconds!r:.40}",
            )
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not 0 <= self.seed <= MAX_SEED
        ):
            raise OptionError(
                "seed", f"seed must be an integer from 0 to 2**64-1 or None, not {self.seed!r:.40}"
            )

    @property
    def changes_pitch(self) -> bool:
        """Whether WORLD must re-synthesize the audio (spec §7.1)."""
        return self.pitch_scale != 1.0 or self.intonation_scale != 1.0

    @classmethod
    def from_fields(cls, values: Mapping[str, object]) -> SynthesisOptions:
        """Options from a mapping of names (an unknown name is an :class:`OptionError`)."""
        known = {f.name for f in fields(cls)}
        for name in values:
            if name not in known:
                raise OptionError(
                    str(name), f"unknown option {name!r}; options: {', '.join(sorted(known))}"
                )
        return cls(**values)  # type: ignore[arg-type]

    def check_voice(
        self, voice: str, styles: tuple[str, ...], speaker_ids: Mapping[str, int]
    ) -> SynthesisOptions:
        """``self`` if ``voice`` has the style and speaker asked for (a style asked for by
        its other name comes back under the voice's); OptionError names them."""
        style = self.style
        if style not in styles and STYLE_ALIASES.get(style) in styles:
            style = STYLE_ALIASES[style]
        if style not in styles:
            raise OptionError(
                "style",
                f"unknown style {self.style!r} for voice {voice!r}; styles: {', '.join(styles)}",
            )
        if self.speaker_id not in speaker_ids.values():
            known = ", ".join(f"{n}={i}" for n, i in speaker_ids.items())
            raise OptionError(
                "speaker_id",
                f"unknown speaker_id {self.speaker_id} for voice {voice!r}; speakers: {known}",
            )
        return self if style == self.style else replace(self, style=style)


class OptionFields(TypedDict, total=False):
    """:class:`SynthesisOptions` as keyword arguments (``Speaker.generate(text, **fields)``).

    Kept in step with the dataclass by a test.
    """

    style: str
    style_weight: float
    speaker_id: int
    speed: float
    sdp_ratio: float
    noise: float
    noise_w: float
    pitch_scale: float
    intonation_scale: float
    seed: int | None
    quick_start: bool
    pause_seconds: float | None
    pause_scale: float
