"""The PyTorch backend: our JP-Extra model and DeBERTa on CPU or CUDA.

One BERT is loaded per backend and shared by all its voices. BERT features
stay on the device from BERT to the synthesizer; only the final audio comes
back to the CPU. Everything runs in float32: the SDP's spline and the flow
break in half precision (spec §11).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from yomiage.bert.features import join_token_rows
from yomiage.bert.torch_bert import TorchBert, expand_to_phones_torch
from yomiage.errors import ModelLoadError
from yomiage.model import Encoded, TorchVoice, load_voice
from yomiage.options import SynthesisOptions
from yomiage.runtime.chunking import (
    DEFAULT_FIRST_WINDOW_FRAMES,
    DEFAULT_WINDOW_FRAMES,
    Window,
    Windowing,
    receptive_field_frames,
    windows,
)
from yomiage.runtime.voice import EncodedSentence, VoiceInfo
from yomiage.runtime.voice_steps import WindowedVoice
from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import to_model_inputs


class TorchBackend:
    """One BERT shared by the voices it loads, on ``device`` ("cpu" or "cuda")."""

    def __init__(
        self,
        bert_dir: Path | str,
        *,
        tokenizer_dir: Path | str | None = None,
        device: str = "cpu",
        threads: int | None = None,
    ) -> None:
        """``tokenizer_dir`` defaults to ``bert_dir`` (the hub's layout keeps them together)."""
        if device.startswith("cuda"):
            _check_cuda_device(device)
            # cuDNN runs float32 convolutions in TF32 by default: on an H100 that moved
            # the reference audio by 8e-4 and a duration by one frame, for no measurable
            # speed (benchmarks/cuda.py). A process-wide flag, read at every convolution.
            torch.backends.cudnn.allow_tf32 = False
        if threads is not None:
            torch.set_num_threads(threads)
        self.device = torch.device(device)
        self.bert = TorchBert(bert_dir, tokenizer_dir, device=self.device)

    def load_voice(self, folder: Path | str) -> PyTorchVoice:
        """An SBV2 JP-Extra folder (``config.json``, ``*.safetensors``, ``style_vectors.npy``)."""
        loaded = load_voice(folder, self.device)
        if loaded.bert_dim != self.bert.hidden_size:
            raise ModelLoadError(
                f"{folder}: the voice expects BERT features of width {loaded.bert_dim}, "
                f"but the loaded BERT gives {self.bert.hidden_size}"
            )
        return PyTorchVoice(loaded, self.device)

    def compile(self) -> None:
        """``torch.compile`` the BERT (worth it on CUDA; the first call then compiles)."""
        self.bert.compile()

    def new_rng(self, seed: int | None) -> torch.Generator:
        rng = torch.Generator(device=self.device)
        if seed is None:
            rng.seed()
        else:
            rng.manual_seed(seed)
        return rng

    def bert_features(self, sentences: Sequence[Phonemes]) -> list[torch.Tensor]:
        """``[n_tok, C]`` features of each sentence, from one batched BERT call, on the device."""
        return self.bert.features([p.bert_text for p in sentences])

    def join_bert_features(self, features: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.cat(join_token_rows(features))


def _check_cuda_device(device: str) -> None:
    """ModelLoadError unless PyTorch can use ``device`` ("cuda" or "cuda:N"): without
    this a missing GPU shows up later as a CUDA runtime error from inside torch."""
    if not torch.cuda.is_available():
        raise ModelLoadError(f"device {device!r} was asked for but PyTorch sees no CUDA device")
    index = torch.device(device).index
    count = torch.cuda.device_count()
    if index is not None and index >= count:
        valid = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise ModelLoadError(
            f"device {device!r} was asked for but PyTorch sees {count} CUDA device(s) ({valid})"
        )


class PyTorchVoice(WindowedVoice):
    """Our JP-Extra model of one SBV2 folder. Everything runs in float32: the SDP's
    spline and the flow break in half precision (spec §11)."""

    plan = None  # PyTorch runs it as it is: no plan

    def __init__(self, loaded: TorchVoice, device: torch.device) -> None:
        c = loaded.config
        self.loaded = loaded
        self.device = device
        self.info = VoiceInfo(
            sample_rate=c.sampling_rate,
            hop_length=c.hop_length,
            styles=tuple(c.style2id),
            speakers=dict(c.spk2id),
            n_speakers=c.n_speakers,
            add_blank=c.add_blank,
            runtime=f"fp32 on torch {device}",
        )
        # Decoder windows: small on CPU for early audio; on a GPU one window
        # covers most sentences (memory stays bounded on longer ones).
        on_gpu = device.type == "cuda"
        self.windowing = Windowing(
            window_frames=4096 if on_gpu else DEFAULT_WINDOW_FRAMES,
            first_window_frames=4096 if on_gpu else DEFAULT_FIRST_WINDOW_FRAMES,
        )
        self.context = receptive_field_frames(c.model)

    def encode_sentence(
        self, phonemes: Phonemes, features: torch.Tensor, options: SynthesisOptions, rng: Any
    ) -> EncodedSentence:
        self.info.check_speaker(options)
        v = self.loaded
        style = torch.from_numpy(v.styles.vector(options.style, options.style_weight))
        style = style[None].to(self.device)
        sid = torch.tensor([options.speaker_id], device=self.device)
        inputs = to_model_inputs(
            phonemes.phones, phonemes.tones, phonemes.word2ph, add_blank=v.config.add_blank
        )
        with torch.inference_mode():
            bert = expand_to_phones_torch(features, inputs.word2ph)[None]
            phone_ids, tone_ids, language_ids = (
                torch.from_numpy(a)[None].to(self.device)
                for a in (inputs.phone_ids, inputs.tone_ids, inputs.language_ids)
            )
            encoded = v.model.encode(
                phone_ids,
                tone_ids,
                language_ids,
                bert,
                style,
                sid,
                sdp_ratio=options.sdp_ratio,
                noise_scale_w=options.noise_w,
                length_scale=options.speed,
                generator=rng,
            )
            durations = encoded.durations[0, 0].to("cpu", torch.int64).numpy()
        return EncodedSentence(phonemes, inputs, durations, encoded)

    def with_durations(
        self, encoded: EncodedSentence, durations: npt.NDArray[np.int64]
    ) -> EncodedSentence:
        """The prior is spread over the frames of ``state.durations``: both change."""
        state = encoded.state
        frames = torch.from_numpy(np.asarray(durations, np.int64)).to(
            state.durations.device, state.durations.dtype
        )[None, None]
        return replace(encoded, durations=durations, state=replace(state, durations=frames))

    def decode(
        self, encoded: EncodedSentence, options: SynthesisOptions, rng: Any
    ) -> npt.NDArray[np.float32]:
        """The whole sentence in one call, as SBV2 decodes it (the conformance reference)."""
        with torch.inference_mode():
            decoded = self.loaded.model.decode(
                encoded.state, noise_scale=options.noise, generator=rng
            )
            audio: npt.NDArray[np.float32] = decoded.audio[0, 0].to("cpu").numpy()
        return audio

    def _prior(
        self, state: Encoded, frames: npt.NDArray[np.int64], options: SynthesisOptions, rng: Any
    ) -> torch.Tensor:
        """From the durations in ``state`` (:meth:`with_durations` keeps them in step)."""
        return self.loaded.model.prior_sample(state, noise_scale=options.noise, generator=rng)

    def _flow(self, z_p: torch.Tensor, state: Encoded) -> torch.Tensor:
        return self.loaded.model.flow_reverse(z_p, state.g)

    def _windows(self, n_frames: int, lead_frames: int) -> Iterator[tuple[Window, int]]:
        """The same windows for every sentence: on a GPU, where the decoder is not the
        bottleneck, one covers most sentences."""
        w = self.windowing
        each = windows(n_frames, w.window_frames, self.context, w.first_window_frames)
        return ((window, 0) for window in each)

    def _decode(
        self, z: torch.Tensor, window: Window, zeros: int, state: Encoded
    ) -> npt.NDArray[np.float32]:
        audio = self.loaded.model.dec(z, state.g)[0, 0]
        piece: npt.NDArray[np.float32] = audio[window.crop(self.info.hop_length)].to("cpu").numpy()
        return piece

    def _empty_like(self, z_p: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(z_p)

    def _decoding(self) -> AbstractContextManager[Any]:
        return torch.inference_mode()
