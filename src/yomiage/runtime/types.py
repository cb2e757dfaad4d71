"""What flows between the engine and a synthesis backend (no torch here)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from yomiage.errors import OptionError
from yomiage.options import SynthesisOptions
from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import ModelInputs


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
    # The voice makes a sentence's audio in one graph call (no flow spans, no windows).
    whole_utterance: bool = False


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
    """OptionError listing the voice's speakers when ``options.speaker_id`` is not one."""
    if not 0 <= options.speaker_id < n_speakers:
        names = ", ".join(f"{n}={i}" for n, i in spk2id.items())
        raise OptionError(
            "speaker_id", f"unknown speaker_id {options.speaker_id}; this voice has {names}"
        )


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
