"""Voices in the layout HayaKoe publishes: one whole-utterance ONNX synthesizer.

``onnx/speakers/<name>/`` holds ``config.json``, ``style_vectors.npy``,
``synthesizer.onnx`` (spec §9.1) and, in newer exports,
``duration_predictor.onnx`` (§9.2). The synthesizer draws its noise inside
the graph, so ``seed`` cannot make these voices reproducible, and it makes a
sentence's audio in one piece: streaming starts per sentence, not per window.
Durations come from the synthesizer's second output when it has one, else
from the duration predictor (equal when noise is off); pauses need the
duration predictor and fall back to the floor without it (as the reference).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.errors import ModelLoadError
from yomiage.options import SynthesisOptions
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.layouts import DURATION_PREDICTOR, SYNTHESIZER
from yomiage.runtime.onnx_voice import SentenceFeeds, sentence_feeds
from yomiage.runtime.voice import Durations, EncodedSentence, VoiceInfo
from yomiage.runtime.voice_steps import SentenceVoice
from yomiage.sbv2.config import load_config
from yomiage.sbv2.styles import StyleTable, load_styles
from yomiage.text.g2p import Phonemes


class HayakoeVoice(SentenceVoice):
    """A HayaKoe ONNX speaker folder: its one graph makes a sentence's audio as it
    encodes it, so decoding only hands that audio on."""

    plan = None  # one graph on ONNX Runtime float32: nothing to plan

    def __init__(self, folder: Path, sessions: Sessions) -> None:
        config = load_config(folder / "config.json")
        self.info = VoiceInfo(
            sample_rate=config.sampling_rate,
            hop_length=config.hop_length,
            styles=tuple(config.style2id),
            speakers=dict(config.spk2id),
            n_speakers=config.n_speakers,
            add_blank=config.add_blank,
            runtime="one graph, fp32 on onnxruntime",
            whole_utterance=True,
        )
        self.styles: StyleTable = load_styles(folder / "style_vectors.npy", config.style2id)
        self.synthesizer = sessions.open(folder / SYNTHESIZER)
        self._inputs = self.synthesizer.input_names
        required = {"x", "x_lengths", "sid", "tone", "language", "bert", "style_vec"}
        if not required <= self._inputs:
            raise ModelLoadError(
                f"{folder / SYNTHESIZER}: inputs {sorted(self._inputs)} lack "
                f"{sorted(required - self._inputs)} (not a HayaKoe/SBV2 synthesizer export)"
            )
        bert_shape = self.synthesizer.input_shape("bert")
        if not isinstance(bert_shape[1], int):
            raise ModelLoadError(f"{folder / SYNTHESIZER}: the bert input has no fixed width")
        self.bert_dim = bert_shape[1]
        self._outputs = self.synthesizer.output_names
        dp_path = folder / DURATION_PREDICTOR
        self.duration_predictor = sessions.open(dp_path) if dp_path.is_file() else None
        if "durations" not in self._outputs and self.duration_predictor is None:
            raise ModelLoadError(
                f"{folder}: the synthesizer has no durations output and there is no "
                f"{DURATION_PREDICTOR}; timings cannot be known"
            )

    def _feeds(self, x: SentenceFeeds, options: SynthesisOptions) -> dict[str, Any]:
        t = x.inputs.length
        scalar = {
            "noise_scale": options.noise,
            "length_scale": options.speed,
            "noise_scale_w": options.noise_w,
            "sdp_ratio": options.sdp_ratio,
        }
        feeds: dict[str, Any] = {
            "x": x.inputs.phone_ids[None],
            "x_lengths": np.array([t], dtype=np.int64),
            "sid": np.array([x.speaker_id], dtype=np.int64),
            "tone": x.inputs.tone_ids[None],
            "language": x.inputs.language_ids[None],
            "bert": x.bert,
            "style_vec": x.style,
        }
        feeds.update({k: np.array([v], dtype=np.float32) for k, v in scalar.items()})
        return feeds

    def encode_sentence(
        self,
        phonemes: Phonemes,
        features: npt.NDArray[np.float32],
        options: SynthesisOptions,
        rng: Any,
    ) -> EncodedSentence:
        """Runs the whole synthesizer: its audio is the state, its durations the timings."""
        x = sentence_feeds(self.info, self.styles, phonemes, features, options)
        feeds = self._feeds(x, options)
        outputs = dict(zip(self._outputs, self.synthesizer.run(feeds), strict=True))
        audio = np.ascontiguousarray(outputs[self._outputs[0]][0, 0], dtype=np.float32)
        if "durations" in outputs:
            durations = outputs["durations"][0].astype(np.int64)
        else:
            predicted = self._predicted(feeds)
            if predicted is None:  # load refuses such a folder; kept for a clear error
                raise ModelLoadError("this HayaKoe voice gives no durations")
            durations = predicted
        return EncodedSentence(phonemes, x.inputs, durations, audio)

    def durations(
        self,
        phonemes: Phonemes,
        features: npt.NDArray[np.float32],
        options: SynthesisOptions,
        rng: Any,
    ) -> Durations | None:
        """The duration predictor alone (no audio made); None without one."""
        x = sentence_feeds(self.info, self.styles, phonemes, features, options)
        frames = self._predicted(self._feeds(x, options))
        return None if frames is None else Durations(x.inputs, frames)

    def with_durations(self, encoded: EncodedSentence, durations: npt.NDArray[np.int64]) -> None:
        """None: HayaKoe's synthesizer is one graph that makes its own durations."""
        return None

    def _predicted(self, feeds: dict[str, Any]) -> npt.NDArray[np.int64] | None:
        if self.duration_predictor is None:
            return None
        return np.asarray(self.duration_predictor.run(feeds)[0][0], dtype=np.int64)

    def decode_windows(
        self,
        encoded: EncodedSentence,
        options: SynthesisOptions,
        rng: Any,
        *,
        lead_frames: int = 0,
    ) -> Iterator[npt.NDArray[np.float32]]:
        """The audio the synthesizer made while encoding, in one piece."""
        yield encoded.state
