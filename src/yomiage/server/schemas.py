"""Request bodies. Ranges are checked by the engine (one source of truth), types here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from yomiage.options import SynthesisOptions
from yomiage.text.user_word import DEFAULT_PRIORITY, DEFAULT_WORD_TYPE

_D = SynthesisOptions()


class VoiceRef(BaseModel):
    """OpenAI's custom-voice form ``{"id": "..."}``."""

    id: str


class SynthesisFields(BaseModel):
    """The engine's options (``yomiage.SynthesisOptions``); unset ones keep its defaults."""

    style: str | None = Field(None, description=f"style name (default {_D.style})")
    style_weight: float | None = None
    speaker_id: int | str | None = Field(None, description="speaker number or name")
    sdp_ratio: float | None = None
    noise: float | None = None
    noise_w: float | None = None
    pitch_scale: float | None = Field(None, description="F0 times this, by WORLD")
    intonation_scale: float | None = Field(None, description="F0 contour around its mean, by WORLD")
    seed: int | None = Field(None, description="same seed, same audio")
    sample_rate: int | None = Field(
        None, description="output rate in Hz (default: the voice's; opus 48000; OpenAI pcm 24000)"
    )

    def fields(self) -> dict[str, Any]:
        names = ("style", "style_weight", "sdp_ratio", "noise", "noise_w", "pitch_scale",
                 "intonation_scale", "seed")  # fmt: skip
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


class SpeechRequest(SynthesisFields):
    """``POST /v1/audio/speech``: OpenAI's fields, then the engine's as extensions.

    Unknown fields are ignored, as clients written for OpenAI may send more.
    """

    model_config = ConfigDict(extra="ignore")

    model: str
    input: str
    voice: str | VoiceRef
    instructions: str | None = Field(None, description="accepted and ignored")
    response_format: str = "mp3"
    speed: float = Field(1.0, description="0.25-4.0, larger is faster (OpenAI's meaning)")
    stream_format: Literal["audio", "sse"] = "audio"
    stream: bool = Field(True, description="wav and pcm: send chunks as they are decoded")


class TTSRequest(SynthesisFields):
    """``POST /tts``: every option of the Python API; unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")

    text: str
    voice: str | None = Field(None, description="a loaded voice (default: the server's default)")
    format: str = "wav"
    speed: float | None = Field(None, description="length scale as in the API: 2 is half as fast")
    stream: bool = Field(True, description="wav and pcm: send chunks as they are decoded")


class WordRequest(BaseModel):
    """``POST /v1/dictionary``: a word and its katakana reading."""

    model_config = ConfigDict(extra="forbid")

    surface: str
    reading: str
    accent: int | None = Field(None, description="mora after which the pitch falls (0: flat)")
    priority: int = DEFAULT_PRIORITY
    word_type: str = DEFAULT_WORD_TYPE
