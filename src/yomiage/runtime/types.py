"""What flows between the engine and a synthesis backend (no torch here)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt

from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import ModelInputs


@dataclass(frozen=True)
class SynthesisOptions:
    """Per-call options with SBV2's meanings and its API's defaults (spec §6).

    ``speed`` is SBV2's ``length_scale``: larger is slower. ``seed`` makes the
    noise reproducible; ``None`` draws fresh noise each call. ``quick_start``
    reads a long first sentence's first clause (up to its first comma) on its
    own, so the first audio of a stream comes sooner; the clause is then read
    without the rest of the sentence as context (SBV2 never does this).
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

    def __post_init__(self) -> None:
        for name in (
            "style_weight",
            "speed",
            "sdp_ratio",
            "noise",
            "noise_w",
            "pitch_scale",
            "intonation_scale",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
            ):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not 0.0 <= self.sdp_ratio <= 1.0:
            raise ValueError(f"sdp_ratio must be between 0 and 1, got {self.sdp_ratio}")
        if not 0.1 <= self.speed <= 10.0:
            raise ValueError(f"speed must be between 0.1 and 10, got {self.speed}")
        if self.noise < 0 or self.noise_w < 0:
            raise ValueError("noise and noise_w must not be negative")
        if isinstance(self.speaker_id, bool) or not isinstance(self.speaker_id, int):
            raise ValueError(f"speaker_id must be an integer, got {self.speaker_id!r}")
        if not 0.25 <= self.pitch_scale <= 4.0:
            raise ValueError(f"pitch_scale must be between 0.25 and 4, got {self.pitch_scale}")
        if not 0.0 <= self.intonation_scale <= 4.0:
            raise ValueError(
                f"intonation_scale must be between 0 and 4, got {self.intonation_scale}"
            )
        if not isinstance(self.quick_start, bool):
            raise ValueError(f"quick_start must be True or False, got {self.quick_start!r}")
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0
        ):
            raise ValueError(f"seed must be a non-negative integer or None, got {self.seed!r}")

    @property
    def changes_pitch(self) -> bool:
        """Whether WORLD must re-synthesize the audio (spec §7.1)."""
        return self.pitch_scale != 1.0 or self.intonation_scale != 1.0


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


@dataclass(frozen=True)
class EncodedSentence:
    """One sentence after the text encoder and duration predictors.

    ``durations`` are the frames of each synthesizer token (blanks included),
    known before any audio is made; ``state`` is the backend's own data for
    :meth:`SynthesisBackend.decode` (tensors on its device).
    """

    phonemes: Phonemes
    inputs: ModelInputs
    durations: npt.NDArray[np.int64]
    state: Any

    @property
    def n_frames(self) -> int:
        return max(1, int(self.durations.sum()))


@dataclass(frozen=True)
class VoiceInfo:
    """What callers may choose for a loaded voice."""

    sample_rate: int
    styles: tuple[str, ...]
    speakers: Mapping[str, int]
    add_blank: bool = True


class SynthesisBackend(Protocol):
    """Runs voices. Implementations are safe to call from several threads."""

    def voice_names(self) -> tuple[str, ...]: ...

    def voice_info(self, voice: str) -> VoiceInfo: ...

    def sample_rate(self, voice: str) -> int: ...

    def hop_length(self, voice: str) -> int: ...

    def new_rng(self, seed: int | None) -> Any:
        """Random state for one request: encode draws from it first, decode second."""
        ...

    def encode(
        self, voice: str, sentences: Sequence[Phonemes], options: SynthesisOptions, rng: Any
    ) -> list[EncodedSentence]:
        """All sentences of a request, with one batched BERT call."""
        ...

    def bert_features(self, sentences: Sequence[Phonemes]) -> Sequence[Any]:
        """BERT features of each sentence (one batched call), in the backend's array type."""
        ...

    def encode_features(
        self,
        voice: str,
        sentences: Sequence[Phonemes],
        features: Sequence[Any],
        options: SynthesisOptions,
        rng: Any,
    ) -> list[EncodedSentence]:
        """:meth:`encode` with the BERT features already computed."""
        ...

    def predict_durations(
        self,
        voice: str,
        phonemes: Phonemes,
        features: Any,
        options: SynthesisOptions,
        rng: Any,
    ) -> npt.NDArray[np.int64] | None:
        """Frames per token of ``phonemes`` without making audio; None if unknown."""
        ...

    def decode_windows(
        self, voice: str, encoded: EncodedSentence, options: SynthesisOptions, rng: Any
    ) -> Iterator[npt.NDArray[np.float32]]:
        """:meth:`decode`'s audio in consecutive pieces, each as soon as it is made."""
        ...

    def decode(
        self, voice: str, encoded: EncodedSentence, options: SynthesisOptions, rng: Any
    ) -> npt.NDArray[np.float32]:
        """Audio of one sentence, float32 in [-1, 1], ``n_frames * hop`` samples."""
        ...


def check_speaker(options: SynthesisOptions, n_speakers: int, spk2id: Mapping[str, int]) -> None:
    """ValueError listing the voice's speakers when ``options.speaker_id`` is not one."""
    if not 0 <= options.speaker_id < n_speakers:
        names = ", ".join(f"{n}={i}" for n, i in spk2id.items())
        raise ValueError(f"unknown speaker_id {options.speaker_id}; this voice has {names}")


V = TypeVar("V")


class VoiceTable(Generic[V]):
    """Loaded voices by name, shared by a backend's threads."""

    def __init__(self) -> None:
        self._voices: dict[str, V] = {}
        self._lock = threading.Lock()

    def add(self, name: str, voice: V) -> V:
        with self._lock:
            self._voices[name] = voice
        return voice

    def get(self, name: str) -> V:
        try:
            return self._voices[name]
        except KeyError:
            known = ", ".join(self._voices) or "none loaded"
            raise ValueError(f"unknown voice {name!r}; loaded voices: {known}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._voices)
