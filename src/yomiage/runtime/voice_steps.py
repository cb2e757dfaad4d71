"""The steps a voice takes for each sentence, written once for every runtime.

A :class:`~yomiage.runtime.voice.Voice` encodes a sentence (its durations known
before any audio), then makes its audio. :class:`SentenceVoice` is that shape,
one sentence at a time. :class:`WindowedVoice` adds SBV2's decoding as the
bundle and the PyTorch voice run it: the token priors spread over their frames
with noise, the flow over spans cut at clause ends, a span ahead of the decoder,
and the decoder over windows padded by its receptive field
(:mod:`yomiage.runtime.chunking`), each window's audio handed on as soon as it
is made. A runtime says only what its engine does: how it runs a graph, on
which arrays, over which windows. No torch here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.options import SynthesisOptions
from yomiage.runtime.chunking import Window, Windowing, clause_ends, flow_spans
from yomiage.runtime.voice import Durations, EncodedSentence, VoiceInfo
from yomiage.text.g2p import Phonemes


class SentenceVoice(ABC):
    """A voice that encodes its sentences one by one; its ``decode_windows`` is
    its own (or :class:`WindowedVoice`'s)."""

    info: VoiceInfo

    def encode(
        self,
        sentences: Sequence[Phonemes],
        features: Sequence[Any],
        options: SynthesisOptions,
        rng: Any,
    ) -> list[EncodedSentence]:
        """Each sentence in turn, so the noise drawn from ``rng`` follows their order."""
        return [
            self.encode_sentence(phonemes, hidden, options, rng)
            for phonemes, hidden in zip(sentences, features, strict=True)
        ]

    @abstractmethod
    def encode_sentence(
        self, phonemes: Phonemes, features: Any, options: SynthesisOptions, rng: Any
    ) -> EncodedSentence:
        """One sentence with its BERT features (the backend's array type) through the
        encoder and the duration predictors."""

    def durations(
        self, phonemes: Phonemes, features: Any, options: SynthesisOptions, rng: Any
    ) -> Durations | None:
        """The encoder's durations: a voice whose encoder makes no audio needs nothing
        cheaper to tell how long each token is held."""
        encoded = self.encode_sentence(phonemes, features, options, rng)
        return Durations(encoded.inputs, encoded.durations)

    def with_durations(
        self, encoded: EncodedSentence, durations: npt.NDArray[np.int64]
    ) -> EncodedSentence | None:
        """The sentence's own durations are what its decoding reads."""
        return replace(encoded, durations=durations)


class WindowedVoice(SentenceVoice):
    """A voice decoded prior → flow → decoder, window by window, so memory stays
    bounded on any sentence. The hooks take and return the runtime's own arrays
    (``[1, channels, frames]``) and see the encoder's ``state`` as it made it."""

    windowing: Windowing

    def decode_windows(
        self,
        encoded: EncodedSentence,
        options: SynthesisOptions,
        rng: Any,
        *,
        lead_frames: int = 0,
    ) -> Iterator[npt.NDArray[np.float32]]:
        """The sentence's audio window by window, the flow in spans just ahead of the
        windows that read them."""
        frames = encoded.durations
        if frames.sum() == 0:  # SBV2 makes at least one frame
            frames = frames.copy()
            frames[-1] = 1
        w = self.windowing
        breaks = clause_ends(encoded.inputs.phone_ids)
        spans = iter(flow_spans(frames, breaks, w.flow_frames, w.first_flow_frames))
        with self._decoding():
            z_p = self._prior(encoded.state, frames, options, rng)
            z = self._empty_like(z_p)
            flowed = 0  # frames of z made so far
            for window, zeros in self._windows(z_p.shape[2], lead_frames):
                while flowed < window.pad_stop:  # the flow runs a span ahead of the decoder
                    start, stop = next(spans)
                    z[:, :, start:stop] = self._flow(z_p[:, :, start:stop], encoded.state)
                    flowed = stop
                padded = z[:, :, window.pad_start : window.pad_stop]
                yield self._decode(padded, window, zeros, encoded.state)

    @abstractmethod
    def _prior(
        self, state: Any, frames: npt.NDArray[np.int64], options: SynthesisOptions, rng: Any
    ) -> Any:
        """``z_p``: each token's prior over its ``frames``, with noise from ``rng``."""

    @abstractmethod
    def _flow(self, z_p: Any, state: Any) -> Any:
        """The flow (reversed) of one span of ``z_p``."""

    @abstractmethod
    def _windows(self, n_frames: int, lead_frames: int) -> Iterable[tuple[Window, int]]:
        """The decoder's windows over ``n_frames``, each with the zero frames appended
        to it; ``lead_frames``: the audio the stream has already made."""

    @abstractmethod
    def _decode(self, z: Any, window: Window, zeros: int, state: Any) -> npt.NDArray[np.float32]:
        """The audio of ``window`` alone (float32, on the CPU) from its padded frames."""

    def _empty_like(self, z_p: Any) -> Any:
        """The buffer the flow writes into, span by span."""
        return np.empty_like(z_p)

    def _decoding(self) -> AbstractContextManager[Any]:
        """What holds while a sentence decodes (grad off, memory handed back after)."""
        return nullcontext()
