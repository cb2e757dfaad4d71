"""VOICEVOX's AudioQuery, AccentPhrase and Mora: the JSON editors exchange with an engine.

Field names and nullability follow VOICEVOX's API exactly (``null`` is sent,
never left out; unknown keys are accepted and sent back as given), because
clients parse them strictly. Parsing checks every field and raises
:class:`QueryError` naming the one that is wrong.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yomiage.errors import YomiageError


class QueryError(YomiageError, ValueError):
    """An AudioQuery (or accent phrase) a client sent that cannot be used; ``field``
    is the JSON path of the value at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Mora:
    text: str
    consonant: str | None
    consonant_length: float | None
    vowel: str
    vowel_length: float
    pitch: float

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "consonant": self.consonant,
                "consonant_length": self.consonant_length, "vowel": self.vowel,
                "vowel_length": self.vowel_length, "pitch": self.pitch}  # fmt: skip


@dataclass(frozen=True)
class AccentPhrase:
    moras: tuple[Mora, ...]
    accent: int
    pause_mora: Mora | None = None
    is_interrogative: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"moras": [m.to_json() for m in self.moras], "accent": self.accent,
                "pause_mora": self.pause_mora.to_json() if self.pause_mora else None,
                "is_interrogative": self.is_interrogative}  # fmt: skip


@dataclass(frozen=True)
class AudioQuery:
    """``kana`` holds the text the query was made from (AivisSpeech's meaning: an SBV2
    voice needs the text for its BERT); VOICEVOX's own engine ignores it.
    ``tempoDynamicsScale`` is AivisSpeech's field (0-2, read as 1.0 when ``None``);
    ``None``, VOICEVOX's queries, leaves it out of the JSON, so their shape is unchanged."""

    accent_phrases: tuple[AccentPhrase, ...]
    speedScale: float = 1.0  # VOICEVOX's JSON names, as clients send them
    pitchScale: float = 0.0
    intonationScale: float = 1.0
    volumeScale: float = 1.0
    prePhonemeLength: float = 0.1
    postPhonemeLength: float = 0.1
    pauseLength: float | None = None
    pauseLengthScale: float = 1.0
    outputSamplingRate: int = 44100
    outputStereo: bool = False
    kana: str | None = None
    tempoDynamicsScale: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # other keys, sent back as given

    def to_json(self) -> dict[str, Any]:
        return {
            "accent_phrases": [p.to_json() for p in self.accent_phrases],
            "speedScale": self.speedScale, "pitchScale": self.pitchScale,
            "intonationScale": self.intonationScale, "volumeScale": self.volumeScale,
            "prePhonemeLength": self.prePhonemeLength,
            "postPhonemeLength": self.postPhonemeLength, "pauseLength": self.pauseLength,
            "pauseLengthScale": self.pauseLengthScale,
            "outputSamplingRate": self.outputSamplingRate, "outputStereo": self.outputStereo,
            "kana": self.kana, **self.extra,
            **({} if self.tempoDynamicsScale is None
               else {"tempoDynamicsScale": self.tempoDynamicsScale}),
        }  # fmt: skip


# -- parsing -------------------------------------------------------------------------------

SCALE_RANGES = {  # name: (lowest, highest) accepted, in queries and presets alike
    "speedScale": (0.25, 4.0),
    "pitchScale": (-0.5, 0.5),
    "intonationScale": (0.0, 2.0),
    "volumeScale": (0.0, 4.0),
    "prePhonemeLength": (0.0, 10.0),
    "postPhonemeLength": (0.0, 10.0),
    "pauseLengthScale": (0.0, 10.0),
}
SAMPLING_RATES = (8000, 48000)
MAX_MORAS = 2000
# A mora's consonant or vowel in seconds: as long as the longest silence a query may ask
# for, and no longer (1e308 made the audio estimate a 300-digit number of seconds).
MAX_MORA_SECONDS = 10.0


def number_field(data: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryError(f"{where}{key}", "must be a finite number")
    try:
        number = float(value)
    except OverflowError:  # an integer past the largest float
        number = math.inf
    if not math.isfinite(number):
        raise QueryError(f"{where}{key}", "must be a finite number")
    return number


# A mora's text is BERT's input, one token a character, so only kana may be there:
# a space or a control character is no token and a character NFKC expands (㌀) is
# several, and either would misalign BERT with the phonemes (a 500 before).
MAX_MORA_TEXT = 4
_KANA = frozenset(chr(c) for c in [*range(0x3041, 0x3097), *range(0x30A1, 0x30FB), 0x30FC])
_LINE_CONTROLS = frozenset("\t\n\r")


def check_string(value: str, field: str) -> str:
    """``value`` if it holds no lone surrogate and no control character but tab and
    newline (JSON can carry both; neither can be read, logged or encoded as UTF-8)."""
    for ch in value:
        if unicodedata.category(ch) in ("Cs", "Cc") and ch not in _LINE_CONTROLS:
            raise QueryError(field, f"contains the character U+{ord(ch):04X}, which cannot be read")
    return value


def _text(data: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise QueryError(f"{where}{key}", "must be a string")
    return check_string(value, f"{where}{key}")


def _mora_text(data: Mapping[str, Any], where: str, *, pause: bool) -> str:
    text: str = _text(data, "text", where)
    if len(text) > MAX_MORA_TEXT:
        raise QueryError(f"{where}text", f"must be at most {MAX_MORA_TEXT} characters")
    if not pause and not all(ch in _KANA for ch in text):
        odd = next(ch for ch in text if ch not in _KANA)
        raise QueryError(f"{where}text", f"must be kana, not {odd!r} (U+{ord(odd):04X})")
    return text


def _seconds(data: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    """A mora's length: 0 to :data:`MAX_MORA_SECONDS` (None where ``optional``)."""
    value = number_field(data, key, where, optional=optional)
    if value is not None and not 0.0 <= value <= MAX_MORA_SECONDS:
        raise QueryError(f"{where}{key}", f"must be between 0 and {MAX_MORA_SECONDS:g} seconds")
    return value


def parse_mora(data: Any, where: str, *, pause: bool = False) -> Mora:
    """A mora; ``pause``: a pause mora, whose text is a punctuation mark, not kana."""
    if not isinstance(data, Mapping):
        raise QueryError(where.rstrip("."), "must be an object")
    return Mora(
        text=_mora_text(data, where, pause=pause),
        consonant=_text(data, "consonant", where, optional=True),
        consonant_length=_seconds(data, "consonant_length", where, optional=True),
        vowel=_text(data, "vowel", where),
        vowel_length=_seconds(data, "vowel_length", where),
        pitch=number_field(data, "pitch", where),  # shown only: the voice makes its own pitch
    )


def _is_pau(mora: Any) -> bool:
    """A mora of punctuation, as AivisSpeech writes marks inside phrases (its text a mark)."""
    return isinstance(mora, Mapping) and mora.get("vowel") == "pau"


def parse_accent_phrase(data: Any, where: str) -> AccentPhrase:
    if not isinstance(data, Mapping):
        raise QueryError(where.rstrip("."), "must be an object")
    moras = data.get("moras")
    if not isinstance(moras, list) or not moras:
        raise QueryError(f"{where}moras", "must be a non-empty list")
    accent = data.get("accent")
    if isinstance(accent, bool) or not isinstance(accent, int) or not 1 <= accent <= len(moras):
        raise QueryError(f"{where}accent", f"must be an integer from 1 to {len(moras)}")
    pause = data.get("pause_mora")
    interrogative = data.get("is_interrogative", False)
    if not isinstance(interrogative, bool):
        raise QueryError(f"{where}is_interrogative", "must be true or false")
    return AccentPhrase(
        tuple(parse_mora(m, f"{where}moras[{i}].", pause=_is_pau(m)) for i, m in enumerate(moras)),
        accent,
        parse_mora(pause, f"{where}pause_mora.", pause=True) if pause is not None else None,
        interrogative,
    )


def parse_accent_phrases(data: Any, where: str = "") -> tuple[AccentPhrase, ...]:
    if not isinstance(data, list):
        raise QueryError(where or "body", "must be a list of accent phrases")
    if len(data) > MAX_MORAS:  # each phrase has a mora: refused before parsing them all
        raise QueryError(where or "body", f"more than {MAX_MORAS} accent phrases")
    phrases = tuple(parse_accent_phrase(p, f"{where}[{i}].") for i, p in enumerate(data))
    if sum(len(p.moras) for p in phrases) > MAX_MORAS:
        raise QueryError(where or "body", f"more than {MAX_MORAS} moras")
    return phrases


def scale_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The scales of :data:`SCALE_RANGES` and ``pauseLength`` that ``data`` gives, checked
    (an AudioQuery's and a preset's are the same fields)."""
    values: dict[str, Any] = {}
    for name, (low, high) in SCALE_RANGES.items():
        if data.get(name) is not None:
            value = number_field(data, name, "")
            if not low <= value <= high:
                raise QueryError(name, f"must be between {low} and {high}")
            values[name] = value
    if data.get("pauseLength") is not None:
        pause = number_field(data, "pauseLength", "")
        if not 0.0 <= pause <= 10.0:
            raise QueryError("pauseLength", "must be between 0 and 10 seconds (or null)")
        values["pauseLength"] = pause
    return values


def tempo_dynamics(data: Mapping[str, Any]) -> float | None:
    """AivisSpeech's ``tempoDynamicsScale`` (0-2) where ``data`` has it, else None (a query's
    and a preset's field alike; VOICEVOX's clients never send it)."""
    tempo = number_field(data, "tempoDynamicsScale", "", optional=True)
    if tempo is not None and not 0.0 <= tempo <= 2.0:
        raise QueryError("tempoDynamicsScale", "must be between 0.0 and 2.0")
    return None if tempo is None else float(tempo)


def parse_audio_query(data: Any) -> AudioQuery:
    """An AudioQuery from a client's JSON; fields missing take VOICEVOX's defaults."""
    if not isinstance(data, Mapping):
        raise QueryError("body", "must be an AudioQuery object")
    if "accent_phrases" not in data:
        raise QueryError("accent_phrases", "is required")
    phrases = parse_accent_phrases(data["accent_phrases"], "accent_phrases")
    values = scale_fields(data)
    rate = data.get("outputSamplingRate", 44100)
    # is_integer(): json reads NaN, Infinity and 1e400 as floats, which int() cannot take.
    whole = isinstance(rate, int) or (isinstance(rate, float) and rate.is_integer())
    if isinstance(rate, bool) or not whole:
        raise QueryError("outputSamplingRate", "must be an integer")
    if not SAMPLING_RATES[0] <= rate <= SAMPLING_RATES[1]:
        raise QueryError("outputSamplingRate", f"must be {SAMPLING_RATES[0]}-{SAMPLING_RATES[1]}")
    stereo = data.get("outputStereo", False)
    if not isinstance(stereo, bool):
        raise QueryError("outputStereo", "must be true or false")
    kana = data.get("kana")
    if kana is not None and not isinstance(kana, str):
        raise QueryError("kana", "must be a string or null")
    if kana is not None:
        check_string(kana, "kana")
    tempo = tempo_dynamics(data)
    known = {"accent_phrases", "pauseLength", "outputSamplingRate", "outputStereo", "kana",
             "tempoDynamicsScale", *SCALE_RANGES}  # fmt: skip
    extra = {k: v for k, v in data.items() if k not in known}
    return AudioQuery(phrases, outputSamplingRate=int(rate), outputStereo=stereo, kana=kana,
                      tempoDynamicsScale=tempo, extra=extra, **values)  # fmt: skip
