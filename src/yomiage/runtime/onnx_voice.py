"""A yomiage voice bundle: encoder, flow, windowed decoder, each an ONNX graph.

Each graph runs where :mod:`yomiage.runtime.engines.placement` puts it (ONNX Runtime,
or OpenVINO for the decoder) through :class:`~yomiage.runtime.engines.sessions.Sessions`.
Noise is drawn with numpy from the request's generator and fed to the graphs,
so a seed reproduces the audio exactly. The decoder runs over windows padded
by the generator's receptive field that grow from a small first one
(:mod:`yomiage.runtime.chunking`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.bert.features import expand_to_phones
from yomiage.errors import ModelLoadError
from yomiage.options import SynthesisOptions
from yomiage.runtime.bundle import DECODER_GRAPHS, VoiceManifest, read_manifest
from yomiage.runtime.chunking import (
    Window,
    fixed_windows,
    window_lengths,
    windows,
)
from yomiage.runtime.engines.memory import release_free_memory
from yomiage.runtime.engines.placement import ORT_BF16, ORT_FP32, Placement
from yomiage.runtime.engines.sessions import Sessions, probe_speaker
from yomiage.runtime.flow_lengths import (
    FLOW_BUCKETS,
    FRAME_MASK_INPUT,
    flow_bucket,
    flow_buckets_up_to,
    padded_span,
)
from yomiage.runtime.integrity import used_files, verify_files
from yomiage.runtime.plan import Plan
from yomiage.runtime.stage_trims import TRIM_INPUT, StageTrims
from yomiage.runtime.voice import EncodedSentence, VoiceCredits, VoiceInfo
from yomiage.runtime.voice_steps import WindowedVoice
from yomiage.sbv2.styles import StyleTable, load_styles
from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import ModelInputs, to_model_inputs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SentenceFeeds:
    """What every ONNX voice reads for one sentence."""

    inputs: ModelInputs
    bert: npt.NDArray[np.float32]  # [1, C, T]
    style: npt.NDArray[np.float32]  # [1, 256]
    speaker_id: int


def sentence_feeds(
    info: VoiceInfo,
    styles: StyleTable,
    phonemes: Phonemes,
    hidden: npt.NDArray[np.float32],
    options: SynthesisOptions,
) -> SentenceFeeds:
    """The model inputs of one sentence: ids (with blanks), its BERT rows spread over its
    phones, the style vector and the speaker."""
    info.check_speaker(options)
    inputs = to_model_inputs(
        phonemes.phones, phonemes.tones, phonemes.word2ph, add_blank=info.add_blank
    )
    style = styles.vector(options.style, options.style_weight)[None]
    bert = expand_to_phones(hidden, inputs.word2ph)[None]
    return SentenceFeeds(inputs, bert, style, options.speaker_id)


class BundleVoice(WindowedVoice):
    """A bundle from ``yomiage convert``: durations first, audio window by window."""

    def __init__(
        self, folder: Path, sessions: Sessions, plan: Plan, *, verified_dir: Path | None = None
    ) -> None:
        """The bundle in ``folder`` as ``plan`` runs it (:class:`~yomiage.runtime.plan.Plan`:
        each graph's engine and precision, the decoder's graph file and windows, the
        threads). ``verified_dir``: where to remember files already checked (see
        :mod:`yomiage.runtime.integrity`); every file read is checked either way."""
        m: VoiceManifest = read_manifest(folder)
        own = DECODER_GRAPHS[plan.decoder.precision]
        if not m.file(own).is_file():
            raise ModelLoadError(
                f"{folder} has no {own}: convert the voice with "
                f"`yomiage convert ... --decoder int8` for decoder_precision='int8'"
            )
        verify_files(
            folder, m.files, used_files(m.files, own, DECODER_GRAPHS.values()), verified_dir
        )
        self.manifest = m
        self.plan = plan
        self.windowing = plan.windowing
        threads = plan.threads
        self.encoder = sessions.open(m.file("encoder.onnx"), plan.encoder, threads=threads)
        # No compiled-graph cache for the flow: loading its compiled blob back peaked
        # higher than compiling it, for a fraction of a second saved.
        self.flow = sessions.open(plan.flow_file(m), plan.flow, threads=threads,
                                  frame_mask=True)  # fmt: skip
        graph = plan.decoder_file(m)
        sha256 = m.files.get(own) if graph == m.file(own) else None
        self.decoder = sessions.open(graph, plan.decoder.placement, sha256=sha256, threads=threads)
        runtime = _runtime(self.decoder.placement, self.flow.placement)
        if (self.decoder.placement, self.flow.placement) != (plan.decoder.placement, plan.flow):
            # OpenVINO missing, or refusing a graph: ONNX Runtime float32 runs it instead.
            log.warning("voice %s runs %s, not the plan's %s", m.name, runtime,
                        _runtime(plan.decoder.placement, plan.flow))  # fmt: skip
        if threads != sessions.threads:  # the plan measured another count faster
            runtime += f", {threads} thread{'s' * (threads != 1)} (measured)"
        if plan.decoder_graph is not None and plan.decoder.layout:
            runtime += f", decoder 2-D from {plan.decoder.layout} channels (measured)"
        self.info = VoiceInfo(
            sample_rate=m.sampling_rate,
            hop_length=m.hop_length,
            styles=tuple(m.style2id),
            speakers=dict(m.spk2id),
            n_speakers=m.n_speakers,
            add_blank=m.add_blank,
            runtime=runtime,
            credits=_credits(m.aivm),
            style_rows=dict(m.style2id),
        )
        self._settle()
        self.bert_dim = m.bert_dim
        self.styles: StyleTable = load_styles(m.file("style_vectors.npy"), m.style2id)

    def warm_shapes(self) -> None:
        """Run the decoder once at each window length its schedule uses, and the flow at
        each of its lengths, so no request pays for compiling one (OpenVINO compiles
        per input length: the decoder 1-4 s each). Nothing to do for an engine that
        does not keep shapes."""
        self.warm_flow()
        if self.decoder.few_shapes:
            self._warm_decoder(self._decoder_lengths())
            release_free_memory()

    def _decoder_lengths(self) -> tuple[int, ...]:
        """The window lengths the decoder's schedule runs at, smallest first."""
        w = self.windowing
        context = self.manifest.receptive_field_frames
        return window_lengths(w.window_frames, context, min(w.first_window_frames, w.window_frames))

    def _warm_decoder(self, lengths: Sequence[int]) -> None:
        context = self.manifest.receptive_field_frames
        speaker = probe_speaker(self.decoder, np.random.default_rng(0))
        trims = self._stage_trims()
        for length in lengths:
            z = np.zeros((1, self.manifest.inter_channels, length), np.float32)
            feeds = {"z": z, **speaker}
            if trims is not None:  # the one set of stage sizes each length meets
                feeds[TRIM_INPUT] = trims.amounts(context, context)[0]
            self.decoder.run(feeds)

    def warm_flow(self) -> None:
        """Run the flow once at each length it may run at, where it runs padded to a few
        (OpenVINO: ~10-40 ms more on the first call at each, and what it keeps for
        them, ~2.5 MB each, is then held from the start, as a server will anyway).
        Spans made longer than the last of them meet their lengths as they come."""
        if self._flow_padded:
            longest = min(self.windowing.flow_frames, FLOW_BUCKETS[-1])
            self._warm_flow(flow_buckets_up_to(longest, self.plan.flow_floor))
            release_free_memory()

    def _warm_flow(self, lengths: Sequence[int]) -> None:
        speaker = probe_speaker(self.flow, np.random.default_rng(0))
        for length in lengths:
            self.flow_span(np.zeros((1, self.manifest.inter_channels, length), np.float32), speaker)

    def _settle(self) -> None:
        """One call of each graph on an engine that keeps shapes, as the voice loads, at
        a length every plan of it meets. OpenVINO finishes preparing a compiled graph
        at its first call and holds more while it does: paid here, before a request's
        own memory is in use, it no longer sets the peak of a voice's first request
        (measured: benchmarks/history/issue-32.md, eleventh pass)."""
        if self._flow_padded:
            self._warm_flow([flow_bucket(1, self.plan.flow_floor)])
        if self.decoder.few_shapes:
            self._warm_decoder(self._decoder_lengths()[:1])
        release_free_memory()

    @property
    def _flow_padded(self) -> bool:
        """Whether the flow runs padded to a few lengths (:mod:`yomiage.runtime.flow_lengths`)."""
        return self.flow.few_shapes and FRAME_MASK_INPUT in self.flow.input_names

    def flow_span(
        self, z_p: npt.NDArray[np.float32], speaker: Mapping[str, Any]
    ) -> npt.NDArray[np.float32]:
        """The flow of one span ``z_p`` ``[1, C, frames]``: padded to its bucket where
        the engine keeps state per shape, its real frames kept."""
        if not self._flow_padded:
            return self.flow.run({"z_p": z_p, **speaker})[0]
        padded, mask = padded_span(z_p, self.plan.flow_floor)
        z = self.flow.run({"z_p": padded, FRAME_MASK_INPUT: mask, **speaker})[0]
        return z[:, :, : z_p.shape[2]]

    def _stage_trims(self) -> StageTrims | None:
        """The trims the decoder takes, where its graph has them
        (:mod:`yomiage.runtime.stage_trims`); an engine that keeps state per shape is
        fed them balanced (:meth:`~yomiage.runtime.stage_trims.StageTrims.balanced`)."""
        if TRIM_INPUT not in self.decoder.input_names:
            return None
        return self.manifest.stage_trims

    def _trims_for(
        self, trims: StageTrims, window: Window, zeros: int
    ) -> tuple[npt.NDArray[np.int64], int]:
        """The trims fed with ``window`` (``zeros`` appended) and the samples they leave
        out before the window's own."""
        left, right = window.start - window.pad_start, window.pad_stop - window.stop + zeros
        if self.decoder.few_shapes:
            balanced = trims.balanced(left, right, self.manifest.receptive_field_frames)
            if balanced is not None:
                return balanced[0], balanced[1]
            # Not with fixed_windows' spans; elsewhere a new set of shapes is the cost.
        amounts, lost, _ = trims.amounts(left, right)
        return amounts, lost

    def encode_sentence(
        self,
        phonemes: Phonemes,
        features: npt.NDArray[np.float32],
        options: SynthesisOptions,
        rng: Any,
    ) -> EncodedSentence:
        x = sentence_feeds(self.info, self.styles, phonemes, features, options)
        t = x.inputs.length
        noise = rng.standard_normal((1, 2, t), dtype=np.float32) * np.float32(options.noise_w)
        feeds = {
            "phone_ids": x.inputs.phone_ids[None],
            "tone_ids": x.inputs.tone_ids[None],
            "language_ids": x.inputs.language_ids[None],
            "bert": x.bert,
            "style": x.style,
            "sid": np.array([x.speaker_id], dtype=np.int64),
            "sdp_noise": noise,
            "sdp_ratio": np.array([options.sdp_ratio], dtype=np.float32),
            "length_scale": np.array([options.speed], dtype=np.float32),
        }
        m_p, logs_p, g, durations = self.encoder.run(feeds)
        # The flow and decoder take the speaker as sid (their speaker tables) or, in a
        # bundle made before those, as g; each graph takes the one it names.
        speaker = {"g": g, "sid": feeds["sid"]}
        state = (m_p, logs_p, speaker)
        return EncodedSentence(phonemes, x.inputs, durations[0, 0].astype(np.int64), state)

    def _prior(
        self, state: Any, frames: npt.NDArray[np.int64], options: SynthesisOptions, rng: Any
    ) -> npt.NDArray[np.float32]:
        m_p, logs_p, _ = state
        mean = np.repeat(m_p, frames, axis=2)
        scale = np.exp(np.repeat(logs_p, frames, axis=2))
        eps = rng.standard_normal(mean.shape, dtype=np.float32)
        z_p: npt.NDArray[np.float32] = mean + eps * scale * np.float32(options.noise)
        return z_p.astype(np.float32)

    def _flow(self, z_p: npt.NDArray[np.float32], state: Any) -> npt.NDArray[np.float32]:
        return self.flow_span(z_p, state[2])

    def _windows(self, n_frames: int, lead_frames: int) -> Iterator[tuple[Window, int]]:
        w = self.windowing
        context = self.manifest.receptive_field_frames
        first = min(w.first_window_frames, w.window_frames)
        # Small first windows are for the stream's first audio; once the listener
        # has audio to hear, a sentence can start with windows as long as that.
        step = first
        while 2 * step <= min(lead_frames, w.window_frames):
            step *= 2
        if self.decoder.few_shapes:
            # Balanced trims need every span padded by the whole context, zeros or not.
            padding = 2 * context if self._stage_trims() is not None else 0
            return fixed_windows(
                n_frames, w.window_frames, context, first, start=step, min_padding=padding
            )
        return ((window, 0) for window in windows(n_frames, w.window_frames, context, step))

    def _decode(
        self, z: npt.NDArray[np.float32], window: Window, zeros: int, state: Any
    ) -> npt.NDArray[np.float32]:
        if zeros:
            z = np.pad(z, ((0, 0), (0, 0), (0, zeros)))
        feeds = {"z": z, **state[2]}
        lost = 0  # samples the trims left out before the window's own
        trims = self._stage_trims()
        if trims is not None:
            feeds[TRIM_INPUT], lost = self._trims_for(trims, window, zeros)
        audio = self.decoder.run(feeds)[0]
        return np.ascontiguousarray(audio[0, 0, window.crop(self.info.hop_length, lost)])

    @contextmanager
    def _decoding(self) -> Iterator[None]:
        """The memory a sentence's windows freed goes back to the system after it."""
        try:
            yield
        finally:
            release_free_memory()


def _runtime(decoder: Placement, flow: Placement) -> str:
    """What decodes a voice, for people (logs, ``/v1/voices``)."""
    weights = " weights" if flow == ORT_BF16 else ""  # its arithmetic is float32
    moved = f", flow {flow.precision}{weights} on {flow.engine}" if flow != ORT_FP32 else ""
    return f"decoder {decoder.precision} on {decoder.engine}{moved}"


def _credits(aivm: Mapping[str, Any] | None) -> VoiceCredits | None:
    """The AIVM identity ``voice.json`` kept from an AIVMX file (:mod:`yomiage.aivmx.bundle`)."""
    if not aivm:
        return None
    licence = aivm.get("license")
    return VoiceCredits(
        name=str(aivm.get("name", "")),
        version=str(aivm.get("version", "")),
        uuid=str(aivm.get("uuid", "")),
        license=licence if isinstance(licence, str) else None,
        description=str(aivm.get("description") or ""),
        sha256=str(aivm.get("sha256", "")),
        speaker_uuids={
            str(s.get("name")): str(s.get("uuid"))
            for s in aivm.get("speakers") or ()
            if isinstance(s, dict) and s.get("uuid")
        },
    )
