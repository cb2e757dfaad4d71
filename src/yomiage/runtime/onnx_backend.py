"""The ONNX Runtime backend: CPU synthesis with onnxruntime, numpy and tokenizers only.

One BERT session serves every voice. Noise is drawn with numpy from the
request's seed. Audio is decoded in windows padded by the generator's
receptive field (:mod:`yomiage.runtime.chunking`), so memory stays bounded on
long text and :meth:`OnnxBackend.decode_windows` can hand out audio as it is made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from yomiage.bert.features import expand_to_phones
from yomiage.bert.tokenizer import CharTokenizer
from yomiage.errors import ModelLoadError
from yomiage.runtime.bundle import BERT_FORMAT, VoiceManifest, read_manifest
from yomiage.runtime.chunking import windows
from yomiage.runtime.cpu import physical_cores
from yomiage.runtime.memory import release_free_memory
from yomiage.runtime.types import (
    EncodedSentence,
    SynthesisOptions,
    VoiceInfo,
    VoiceTable,
    check_speaker,
)
from yomiage.sbv2.styles import StyleTable, load_styles
from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import to_model_inputs

BERT_PRECISIONS = {"fp32": "bert.onnx", "q8": "bert_q8.onnx", "q4": "bert_q4.onnx"}
# Decoder windows, measured on a full-size voice (650 frames, 2 threads, decoder
# alone): 32 frames 3.1x real time, 64 4.1x, 128 4.8x, 256 4.7x, whole 4.8x;
# each window recomputes the receptive field (15 frames) on both sides. End to
# end on 39 s of text (q8, heap trimmed after each sentence): 64 gave 3.06x at
# 1,017 MB peak RSS, 128 3.28x at 1,008 MB, 256 3.40x at 1,037 MB. The first
# window is smaller so audio starts sooner.
DEFAULT_WINDOW_FRAMES = 128
DEFAULT_FIRST_WINDOW_FRAMES = 32


def session_options(threads: int | None) -> ort.SessionOptions:
    """Options shared by every session (chosen for steady memory on varied lengths).

    The memory arena and memory patterns are off: with inputs of a new length
    every request, they grow instead of being reused. Graphs come optimized
    from ``yomiage convert``; only the CPU-specific passes run at load.
    """
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or physical_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    return options


def _session(path: Path, options: ort.SessionOptions) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ModelLoadError(f"cannot load ONNX graph {path}: {exc}") from exc


@dataclass(frozen=True)
class OnnxVoice:
    manifest: VoiceManifest
    styles: StyleTable
    encoder: ort.InferenceSession
    flow: ort.InferenceSession
    decoder: ort.InferenceSession
    encoder_inputs: frozenset[str]


class OnnxBackend:
    """Voice bundles sharing one BERT bundle; safe to call from several threads."""

    def __init__(
        self,
        bert_dir: Path | str,
        *,
        precision: str = "q8",
        threads: int | None = None,
        window_frames: int = DEFAULT_WINDOW_FRAMES,
        first_window_frames: int = DEFAULT_FIRST_WINDOW_FRAMES,
    ) -> None:
        bert_dir = Path(bert_dir)
        if precision not in BERT_PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(BERT_PRECISIONS)}")
        manifest_path = bert_dir / "bert.json"
        try:
            manifest = json.loads(manifest_path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelLoadError(
                f"{bert_dir} is not a BERT bundle ({manifest_path}: {exc}); make one with "
                "`yomiage convert SBV2_DIR OUT_DIR --bert BERT_DIR`"
            ) from exc
        if manifest.get("format") != BERT_FORMAT:
            raise ModelLoadError(f"{manifest_path}: not a {BERT_FORMAT} manifest")
        graph = bert_dir / BERT_PRECISIONS[precision]
        if not graph.is_file():
            have = ", ".join(sorted(manifest.get("graphs", {})))
            raise ModelLoadError(
                f"{bert_dir} has no {precision} BERT ({graph.name}); it has {have}"
            )
        self.options = session_options(threads)
        self.window_frames = window_frames
        self.first_window_frames = first_window_frames
        self.tokenizer = CharTokenizer.from_dir(bert_dir)
        self.bert = _session(graph, self.options)
        self.hidden_size = int(manifest["hidden_size"])
        self._voices: VoiceTable[OnnxVoice] = VoiceTable()

    def add_voice(self, name: str, bundle_dir: Path | str) -> OnnxVoice:
        manifest = read_manifest(Path(bundle_dir))
        if manifest.bert_dim != self.hidden_size:
            raise ModelLoadError(
                f"{bundle_dir}: the voice expects BERT features of width {manifest.bert_dim}, "
                f"the BERT bundle gives {self.hidden_size}"
            )
        encoder = _session(manifest.file("encoder.onnx"), self.options)
        voice = OnnxVoice(
            manifest,
            load_styles(manifest.file("style_vectors.npy"), manifest.style2id),
            encoder,
            _session(manifest.file("flow.onnx"), self.options),
            _session(manifest.file("decoder.onnx"), self.options),
            frozenset(i.name for i in encoder.get_inputs()),
        )
        return self._voices.add(name, voice)

    def voice(self, name: str) -> OnnxVoice:
        return self._voices.get(name)

    def voice_names(self) -> tuple[str, ...]:
        return self._voices.names()

    def voice_info(self, voice: str) -> VoiceInfo:
        m = self.voice(voice).manifest
        return VoiceInfo(m.sampling_rate, tuple(m.style2id), dict(m.spk2id))

    def sample_rate(self, voice: str) -> int:
        return self.voice(voice).manifest.sampling_rate

    def hop_length(self, voice: str) -> int:
        return self.voice(voice).manifest.hop_length

    def new_rng(self, seed: int | None) -> np.random.Generator:
        return np.random.default_rng(seed)

    def bert_features(self, sentences: Sequence[Phonemes]) -> list[npt.NDArray[np.float32]]:
        """``[n_tok, C]`` features per sentence from one padded batch."""
        if not sentences:
            return []
        ids, mask = self.tokenizer.encode_batch([p.bert_text for p in sentences])
        hidden = self.bert.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        lengths = mask.sum(axis=1)
        return [hidden[i, : int(n)] for i, n in enumerate(lengths)]

    def encode(
        self, voice: str, sentences: Sequence[Phonemes], options: SynthesisOptions, rng: Any
    ) -> list[EncodedSentence]:
        return self.encode_features(voice, sentences, self.bert_features(sentences), options, rng)

    def encode_features(
        self,
        voice: str,
        sentences: Sequence[Phonemes],
        features: Sequence[npt.NDArray[np.float32]],
        options: SynthesisOptions,
        rng: Any,
    ) -> list[EncodedSentence]:
        v = self.voice(voice)
        m = v.manifest
        check_speaker(options, m.n_speakers, m.spk2id)
        style = v.styles.vector(options.style, options.style_weight)[None]
        out = []
        for phonemes, hidden in zip(sentences, features, strict=True):
            inputs = to_model_inputs(
                phonemes.phones, phonemes.tones, phonemes.word2ph, add_blank=m.add_blank
            )
            t = inputs.length
            noise = rng.standard_normal((1, 2, t), dtype=np.float32) * np.float32(options.noise_w)
            feeds = {
                "phone_ids": inputs.phone_ids[None],
                "tone_ids": inputs.tone_ids[None],
                "language_ids": inputs.language_ids[None],
                "bert": expand_to_phones(hidden, inputs.word2ph)[None],
                "style": style,
                "sid": np.array([options.speaker_id], dtype=np.int64),
                "sdp_noise": noise,
                "sdp_ratio": np.array([options.sdp_ratio], dtype=np.float32),
                "length_scale": np.array([options.speed], dtype=np.float32),
            }
            m_p, logs_p, g, durations = v.encoder.run(
                None, {k: x for k, x in feeds.items() if k in v.encoder_inputs}
            )
            frames = durations[0, 0].astype(np.int64)
            out.append(EncodedSentence(phonemes, inputs, frames, (m_p, logs_p, g)))
        return out

    def decode_windows(
        self, voice: str, encoded: EncodedSentence, options: SynthesisOptions, rng: Any
    ) -> Iterator[npt.NDArray[np.float32]]:
        """The sentence's audio, window by window (first window after the flow)."""
        v = self.voice(voice)
        m_p, logs_p, g = encoded.state
        durations = encoded.durations
        if durations.sum() == 0:  # SBV2 makes at least one frame
            durations = durations.copy()
            durations[-1] = 1
        mean = np.repeat(m_p, durations, axis=2)
        scale = np.exp(np.repeat(logs_p, durations, axis=2))
        eps = rng.standard_normal(mean.shape, dtype=np.float32)
        z_p = (mean + eps * scale * np.float32(options.noise)).astype(np.float32)
        z = v.flow.run(None, {"z_p": z_p, "g": g})[0]
        hop = v.manifest.hop_length
        context = v.manifest.receptive_field_frames
        first = min(self.first_window_frames, self.window_frames)
        try:
            for w in windows(z.shape[2], self.window_frames, context, first):
                audio = v.decoder.run(None, {"z": z[:, :, w.pad_start : w.pad_stop], "g": g})[0]
                yield np.ascontiguousarray(audio[0, 0, w.crop(hop)])
        finally:
            release_free_memory()

    def decode(
        self, voice: str, encoded: EncodedSentence, options: SynthesisOptions, rng: Any
    ) -> npt.NDArray[np.float32]:
        return np.concatenate(list(self.decode_windows(voice, encoded, options, rng)))
