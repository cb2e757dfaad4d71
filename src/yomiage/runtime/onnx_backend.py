"""The ONNX Runtime backend: CPU synthesis with onnxruntime, numpy and tokenizers only.

One BERT session serves every voice. Voices are yomiage bundles
(:class:`~yomiage.runtime.onnx_voice.BundleVoice`: windowed decoding,
reproducible noise) or HayaKoe speaker folders
(:class:`~yomiage.runtime.hayakoe.HayakoeVoice`), chosen by what the folder holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.bert.features import expand_to_phones
from yomiage.errors import ModelLoadError
from yomiage.options import SynthesisOptions
from yomiage.runtime.chunking import (
    DEFAULT_FIRST_WINDOW_FRAMES,
    DEFAULT_WINDOW_FRAMES,
    FIRST_FLOW_SPAN_FRAMES,
    FLOW_SPAN_FRAMES,
)
from yomiage.runtime.hayakoe import HayakoeVoice
from yomiage.runtime.layouts import VoiceLayout, detect_layout
from yomiage.runtime.onnx_bert import BERT_PRECISIONS, OnnxBert
from yomiage.runtime.onnx_session import session_options
from yomiage.runtime.onnx_voice import DECODERS, BundleVoice, SentenceFeeds, Windowing
from yomiage.runtime.types import EncodedSentence, VoiceInfo, VoiceTable, check_speaker
from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import to_model_inputs

__all__ = ["BERT_PRECISIONS", "OnnxBackend", "session_options"]


OnnxVoice = BundleVoice | HayakoeVoice


class OnnxBackend:
    """Voices sharing one BERT; safe to call from several threads."""

    def __init__(
        self,
        bert_dir: Path | str,
        *,
        precision: str = "q8",
        threads: int | None = None,
        tokenizer_dir: Path | str | None = None,
        window_frames: int = DEFAULT_WINDOW_FRAMES,
        first_window_frames: int = DEFAULT_FIRST_WINDOW_FRAMES,
        decoder_precision: str = "fp32",
        flow_frames: int = FLOW_SPAN_FRAMES,
        first_flow_frames: int = FIRST_FLOW_SPAN_FRAMES,
        verified_dir: Path | None = None,
    ) -> None:
        """``decoder_precision="int8"`` runs the opt-in int8 decoder of bundles that have one.
        Bundles are checked against their recorded sha256 as they load; ``verified_dir``
        remembers which files were (:mod:`yomiage.runtime.integrity`)."""
        self.verified_dir = verified_dir
        if decoder_precision not in DECODERS:
            raise ValueError(f"decoder_precision must be one of {', '.join(DECODERS)}")
        self.decoder_precision = decoder_precision
        if min(window_frames, first_window_frames, flow_frames, first_flow_frames) < 1:
            raise ValueError("decoder windows and flow spans need at least one frame")
        self.options = session_options(threads)
        self.windowing = Windowing(
            window_frames, first_window_frames, flow_frames, first_flow_frames
        )
        self.bert = OnnxBert(
            Path(bert_dir),
            self.options,
            precision=precision,
            tokenizer_dir=Path(tokenizer_dir) if tokenizer_dir is not None else None,
            verified_dir=verified_dir,
        )
        self._voices: VoiceTable[OnnxVoice] = VoiceTable()

    def add_voice(self, name: str, folder: Path | str) -> OnnxVoice:
        """Load a yomiage bundle (``voice.json``) or a HayaKoe speaker folder."""
        folder = Path(folder)
        voice: OnnxVoice
        if detect_layout(folder) is VoiceLayout.HAYAKOE:
            if self.decoder_precision != "fp32":
                raise ModelLoadError(
                    f"{folder}: decoder_precision={self.decoder_precision!r} needs a bundle "
                    "from `yomiage convert --decoder int8`, not a HayaKoe export"
                )
            voice = HayakoeVoice(folder, self.options)
        else:
            voice = BundleVoice(
                folder,
                self.options,
                decoder_precision=self.decoder_precision,
                verified_dir=self.verified_dir,
            )
        if voice.bert_dim != self.bert.hidden_size:
            raise ModelLoadError(
                f"{folder}: the voice expects BERT features of width {voice.bert_dim}, "
                f"the BERT gives {self.bert.hidden_size}"
            )
        return self._voices.add(name, voice)

    def voice(self, name: str) -> OnnxVoice:
        return self._voices.get(name)

    def voice_names(self) -> tuple[str, ...]:
        return self._voices.names()

    def voice_info(self, voice: str) -> VoiceInfo:
        return self.voice(voice).info

    def sample_rate(self, voice: str) -> int:
        return self.voice(voice).info.sample_rate

    def hop_length(self, voice: str) -> int:
        return self.voice(voice).hop_length

    def new_rng(self, seed: int | None) -> np.random.Generator:
        return np.random.default_rng(seed)

    def bert_features(self, sentences: Sequence[Phonemes]) -> list[npt.NDArray[np.float32]]:
        """``[n_tok, C]`` features per sentence from one padded batch."""
        return self.bert.features([p.bert_text for p in sentences])

    def encode(
        self, voice: str, sentences: Sequence[Phonemes], options: SynthesisOptions, rng: Any
    ) -> list[EncodedSentence]:
        return self.encode_features(voice, sentences, self.bert_features(sentences), options, rng)

    def _feeds(
        self,
        v: OnnxVoice,
        phonemes: Phonemes,
        hidden: npt.NDArray[np.float32],
        options: SynthesisOptions,
    ) -> SentenceFeeds:
        inputs = to_model_inputs(
            phonemes.phones, phonemes.tones, phonemes.word2ph, add_blank=v.add_blank
        )
        style = v.styles.vector(options.style, options.style_weight)[None]
        return SentenceFeeds(
            inputs, expand_to_phones(hidden, inputs.word2ph)[None], style, options.speaker_id
        )

    def encode_features(
        self,
        voice: str,
        sentences: Sequence[Phonemes],
        features: Sequence[npt.NDArray[np.float32]],
        options: SynthesisOptions,
        rng: Any,
    ) -> list[EncodedSentence]:
        v = self.voice(voice)
        check_speaker(options, v.n_speakers, v.info.speakers)
        out = []
        for phonemes, hidden in zip(sentences, features, strict=True):
            feeds = self._feeds(v, phonemes, hidden, options)
            durations, state = v.encode(feeds, options, rng)
            out.append(EncodedSentence(phonemes, feeds.inputs, durations, state))
        return out

    def predict_durations(
        self,
        voice: str,
        phonemes: Phonemes,
        features: npt.NDArray[np.float32],
        options: SynthesisOptions,
        rng: Any,
    ) -> npt.NDArray[np.int64] | None:
        """Token durations without audio (for pauses); None if the voice cannot tell."""
        v = self.voice(voice)
        check_speaker(options, v.n_speakers, v.info.speakers)
        return v.predict_durations(self._feeds(v, phonemes, features, options), options, rng)

    def decode_windows(
        self, voice: str, encoded: EncodedSentence, options: SynthesisOptions, rng: Any
    ) -> Iterator[npt.NDArray[np.float32]]:
        """The sentence's audio, window by window (first window after the flow)."""
        v = self.voice(voice)
        return v.decode_windows(
            encoded.state, encoded.inputs, encoded.durations, options, rng, self.windowing
        )

    def decode(
        self, voice: str, encoded: EncodedSentence, options: SynthesisOptions, rng: Any
    ) -> npt.NDArray[np.float32]:
        return np.concatenate(list(self.decode_windows(voice, encoded, options, rng)))
