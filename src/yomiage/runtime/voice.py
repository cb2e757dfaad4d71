"""A loaded voice, and the backend that loads voices and owns the BERT they share.

The pipeline drives a :class:`Voice` object directly: it asks the backend for
BERT features, then the voice encodes sentences (durations known before any
audio), and decodes each sentence window by window. A new runtime (another
inference engine, a GPU provider) is a backend class and a voice class.
No torch here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from yomiage.errors import OptionError
from yomiage.options import SynthesisOptions
from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import ModelInputs

if TYPE_CHECKING:
    from yomiage.runtime.plan import Plan


@dataclass(frozen=True)
class VoiceCredits:
    """What a voice's publisher says about it (AIVMX voices carry this): shown wherever the
    voice is listed, so a user can see what its licence allows before using it."""

    name: str
    version: str = ""
    uuid: str = ""
    license: str | None = None  # the licence text as published; None if the file gives none
    description: str = ""
    source_format: str = "AIVMX"
    sha256: str = ""  # of the file it came from
    # Each speaker's uuid in the publisher's manifest (VOICEVOX style ids are made from it).
    speaker_uuids: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, str | None]:
        return {
            "name": self.name, "version": self.version, "uuid": self.uuid,
            "license": self.license, "description": self.description,
            "format": self.source_format, "sha256": self.sha256,
        }  # fmt: skip


@dataclass(frozen=True)
class VoiceInfo:
    """What a loaded voice is: its rates, and what callers may choose."""

    sample_rate: int
    hop_length: int
    styles: tuple[str, ...]
    speakers: Mapping[str, int]
    n_speakers: int
    add_blank: bool = True
    # The voice makes a sentence's audio in one graph call (no flow spans, no windows).
    whole_utterance: bool = False
    # Which engine runs its graphs and in what precision, for people (logs, /v1/voices).
    runtime: str = "fp32 on onnxruntime"  # what decodes it, for people to read
    credits: VoiceCredits | None = None  # the publisher's metadata, when the voice has some
    # Each style's row in the style vectors (AIVMX: the manifest's local style id);
    # empty: the rows are the styles' positions.
    style_rows: Mapping[str, int] = field(default_factory=dict)

    def check_speaker(self, options: SynthesisOptions) -> None:
        """OptionError listing the voice's speakers when ``options.speaker_id`` is not one."""
        if not 0 <= options.speaker_id < self.n_speakers:
            names = ", ".join(f"{n}={i}" for n, i in self.speakers.items())
            raise OptionError(
                "speaker_id", f"unknown speaker_id {options.speaker_id}; this voice has {names}"
            )


@dataclass(frozen=True)
class EncodedSentence:
    """One sentence after the text encoder and duration predictors.

    ``inputs`` are the ids the voice read (blanks included); ``durations`` the
    frames of each of them, known before any audio is made; ``state`` is the
    voice's own data for :meth:`Voice.decode_windows` (arrays on its device).
    """

    phonemes: Phonemes
    inputs: ModelInputs
    durations: npt.NDArray[np.int64]
    state: Any

    @property
    def n_frames(self) -> int:
        return max(1, int(self.durations.sum()))


@dataclass(frozen=True)
class Durations:
    """Frames per input token of a reading, without its audio (for pauses)."""

    inputs: ModelInputs
    frames: npt.NDArray[np.int64]


class Voice(Protocol):
    """One loaded voice. Safe to call from several threads."""

    @property
    def info(self) -> VoiceInfo: ...

    @property
    def plan(self) -> Plan | None:
        """The plan its graphs run by (a CPU bundle's: engine, precision and windows of
        its decoder, and why; :mod:`yomiage.runtime.plan`), None for a voice without one."""
        ...

    def encode(
        self,
        sentences: Sequence[Phonemes],
        features: Sequence[Any],
        options: SynthesisOptions,
        rng: Any,
    ) -> list[EncodedSentence]:
        """Each sentence with its BERT features (from the backend) through the encoder."""
        ...

    def durations(
        self, phonemes: Phonemes, features: Any, options: SynthesisOptions, rng: Any
    ) -> Durations | None:
        """How long each token of ``phonemes`` is held, or None if the voice cannot tell."""
        ...

    def with_durations(
        self, encoded: EncodedSentence, durations: npt.NDArray[np.int64]
    ) -> EncodedSentence | None:
        """``encoded`` to be read with ``durations`` (frames per token) instead of the
        predicted ones; None for a voice whose audio does not follow them."""
        ...

    def decode_windows(
        self,
        encoded: EncodedSentence,
        options: SynthesisOptions,
        rng: Any,
        *,
        lead_frames: int = 0,
    ) -> Iterator[npt.NDArray[np.float32]]:
        """The sentence's audio (float32, ``n_frames * hop`` samples) in consecutive
        pieces, each as soon as it is made. ``lead_frames``: audio the stream has
        already made; a voice ahead of its listener may start with larger pieces."""
        ...


class SynthesisBackend(Protocol):
    """Loads voices from folders; owns the BERT (and its tokenizer) they share."""

    def load_voice(self, folder: Path) -> Voice: ...

    def bert_features(self, sentences: Sequence[Phonemes]) -> Sequence[Any]:
        """BERT features of each sentence (one batched call), in the backend's array type."""
        ...

    def join_bert_features(self, features: Sequence[Any]) -> Any:
        """Consecutive sentences' features as one text's: the first's ``[CLS]``, every
        sentence's own tokens, the last's ``[SEP]`` (see ``synthesis.pauses.joined_reading``)."""
        ...

    def new_rng(self, seed: int | None) -> Any:
        """Random state for one sentence: encode draws from it first, decode second."""
        ...

    def compile(self) -> None:
        """Ahead-of-time work that makes later calls faster (nothing, for most backends)."""
        ...


def encode(
    backend: SynthesisBackend,
    voice: Voice,
    sentences: Sequence[Phonemes],
    options: SynthesisOptions,
    rng: Any,
) -> list[EncodedSentence]:
    """BERT and the encoder in one call (benchmarks and tests; the pipeline calls them apart)."""
    return voice.encode(sentences, backend.bert_features(sentences), options, rng)


def decode(voice: Voice, encoded: EncodedSentence, options: SynthesisOptions, rng: Any) -> Any:
    """A sentence's audio in one array (benchmarks and tests)."""
    return np.concatenate(list(voice.decode_windows(encoded, options, rng)))
