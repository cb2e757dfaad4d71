"""Text to a stream of audio chunks: the one path every public call goes through.

Order of work for a request, chosen so the first audio leaves early:

1. split into sentences; g2p reads each as the stream reaches it (a group
   ahead), so a book's first audio does not wait for its last sentence
   (:mod:`yomiage.synthesis.reading`; a text with nothing readable fails at
   the call);
2. BERT + encoder for the first sentence alone, then its audio window by window;
3. BERT for the following sentences in batched calls of up to
   :data:`BERT_GROUP` sentences, each made when the stream reaches it;
4. the pauses (spec §8.3), needed only before the second sentence starts: the
   encoder and duration predictor over the whole text, fed the sentences'
   own BERT features joined (so a text that fits one BERT pass has all its
   sentences read and their BERT made at this point; a longer one is read only
   as far as it takes to tell); with ``exact_pauses`` (SBV2's reading)
   the whole text goes through g2p and BERT once more, as SBV2 does;
5. each later sentence: the pause (zeros), then its audio window by window.

Every backend call goes through the engine's compute gate
(:mod:`yomiage.synthesis.gate`), so concurrent requests interleave window by
window and a cancelled request stops before its next call. Each sentence
draws its noise from its own generator derived from the request's seed, so a
result never depends on how requests interleave. Each sentence's predicted
length is held to the engine's :class:`~yomiage.limits.Limits` before its
audio is made.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.audio.results import AudioChunk
from yomiage.audio.timings import Timings, sentence_timings
from yomiage.errors import ModelLoadError, OptionError, TextError
from yomiage.limits import Limits
from yomiage.options import SynthesisOptions
from yomiage.runtime.voice import Durations, EncodedSentence, SynthesisBackend, Voice
from yomiage.synthesis.gate import ComputeGate, GatedCalls
from yomiage.synthesis.lengths import PhoneLengths, edited_durations
from yomiage.synthesis.pauses import (
    boundary_frames,
    gap_samples,
    joined_reading,
    trailing_silence,
)
from yomiage.synthesis.pitch import adjust_pitch, require_world
from yomiage.synthesis.reading import (
    Sentence,
    SentenceReader,
    read_sentences,
    sentence_length,
)
from yomiage.synthesis.seeds import PAUSE_STREAM, draw_seed, sentence_seed
from yomiage.text.frontend import Frontend
from yomiage.text.g2p import Phonemes

MAX_BERT_TOKENS = 512  # DeBERTa-v2's position range, [CLS] and [SEP] included
BERT_GROUP = 8  # sentences per batched BERT call after the first sentence
# A request whose first sentence, extrapolated over its text, reaches this share of the
# request limit has all its durations predicted before any audio (see _check_request).
PRECHECK_SHARE = 0.5
_NO_HURRY = 2**31  # lead frames for a caller that waits for the whole text


@dataclass(frozen=True)
class _Job:
    """One request: its voice, options (seed drawn), sentences and gated calls."""

    voice: Voice
    text: str
    options: SynthesisOptions
    seed: int  # options.seed, or the one drawn for this request
    sentences: SentenceReader  # read as the stream reaches them
    calls: GatedCalls
    early_audio: bool = True  # small first windows (see Pipeline.stream)
    # BERT features made ahead of their sentence's encoding, by index (see _features)
    features: dict[int, Any] = field(default_factory=dict)
    lengths: Sequence[PhoneLengths | None] | None = None  # a caller's, per sentence


class Pipeline:
    """Runs requests on the voices of one backend; shared by all threads of an engine."""

    def __init__(
        self,
        backend: SynthesisBackend,
        frontend: Frontend,
        gate: ComputeGate,
        limits: Limits | None = None,
        *,
        exact_pauses: bool = False,
    ) -> None:
        """``exact_pauses``: predict the pauses from the whole text read and run
        through BERT again, exactly as SBV2 does (spec §8.3), instead of from the
        sentences' own features joined (one BERT pass; see :meth:`_pauses`)."""
        self.backend = backend
        self.frontend = frontend
        self.gate = gate
        self.limits = limits or Limits()
        self.exact_pauses = exact_pauses

    def stream(
        self,
        voice: Voice,
        text: str,
        options: SynthesisOptions,
        *,
        cancel: threading.Event | None = None,
        early_audio: bool = True,
        reading: Sequence[Phonemes] | None = None,
        lengths: Sequence[PhoneLengths | None] | None = None,
    ) -> Iterator[AudioChunk]:
        """Chunks of ``text`` read by ``voice``; validates everything before the first.

        Setting ``cancel`` stops the work at the next backend call with
        :class:`~yomiage.errors.Cancelled` (a server sets it when its client leaves).
        Every chunk carries ``options`` with the seed actually used.
        ``early_audio``: start with small decoder windows so the first chunk
        comes soon; a caller that waits for the whole text anyway passes False
        and gets the largest windows from the start (faster overall; the audio
        agrees with the streamed one to within the decoder's precision).
        ``reading``: the sentences' phonemes as the caller made them (an editor's
        accents and moras), read instead of ``text``, which then only names them.
        ``lengths``: with ``reading``, each sentence's phoneme lengths as the caller
        wants them heard (:mod:`yomiage.synthesis.lengths`; None: predicted).
        """
        if options.changes_pitch:
            require_world()
        max_length = sentence_length(voice.info.whole_utterance, options.speed)
        if lengths is not None and (reading is None or len(lengths) != len(reading)):
            raise OptionError("lengths", "lengths need a reading, one entry per sentence")
        if reading is not None:
            if not reading:
                raise TextError("the reading is empty")
            sentences = SentenceReader.of([Sentence(p.text, p) for p in reading])
        else:
            sentences = SentenceReader(
                self.frontend, text, quick_start=options.quick_start, max_length=max_length
            )
        seed = draw_seed() if options.seed is None else options.seed
        options = replace(options, seed=seed)
        job = _Job(voice, text, options, seed, sentences, GatedCalls(self.gate, cancel),
                   early_audio, lengths=lengths)  # fmt: skip
        # Encode the first sentence here, so that bad options (and a first
        # sentence beyond the limits) fail at the call.
        first = self._encode(job, 0, 1)[0]
        self._check_limits(job, first[0], 0, 0.0)
        self._check_request(job, first[0])
        return self._chunks(job, first)

    def predict(
        self, voice: Voice, text: str, options: SynthesisOptions
    ) -> list[tuple[Sentence, Durations | None]]:
        """Each sentence of ``text`` with the frames the duration predictor gives its
        tokens, without making audio (None for a voice that cannot tell)."""
        sentences = read_sentences(self.frontend, text, max_length=sentence_length(
            voice.info.whole_utterance, options.speed))  # fmt: skip
        seed = draw_seed() if options.seed is None else options.seed
        calls = GatedCalls(self.gate, None)
        features = calls(self.backend.bert_features, [s.phonemes for s in sentences])
        out = []
        for i, (sentence, feature) in enumerate(zip(sentences, features, strict=True)):
            rng = self.backend.new_rng(sentence_seed(seed, i))
            out.append((sentence, calls(voice.durations, sentence.phonemes, feature, options, rng)))
        return out

    def _features(self, job: _Job, start: int, stop: int) -> list[Any]:
        """BERT features of sentences ``start:stop``: those made before, the rest in one batch."""
        stop = job.sentences.count_to(stop)
        missing = [i for i in range(start, stop) if i not in job.features]
        if missing:
            made = job.calls(
                self.backend.bert_features, [job.sentences[i].phonemes for i in missing]
            )
            job.features.update(zip(missing, made, strict=True))
        return [job.features[i] for i in range(start, stop)]

    def _encode(self, job: _Job, start: int, stop: int) -> list[tuple[EncodedSentence, Any]]:
        """Sentences ``start:stop`` through BERT (one batch) and the encoder."""
        group = job.sentences.span(start, stop)
        features = self._features(job, start, stop)
        out = []
        for i, (sentence, feature) in enumerate(zip(group, features, strict=True)):
            rng = self.backend.new_rng(sentence_seed(job.seed, start + i))
            [encoded] = job.calls(
                job.voice.encode, [sentence.phonemes], [feature], job.options, rng
            )
            out.append((self._edited(job, start + i, encoded), rng))
        return out

    def _edited(self, job: _Job, index: int, encoded: EncodedSentence) -> EncodedSentence:
        """Sentence ``index`` with the caller's phoneme lengths, where it gave some and
        the voice can take them (a HayaKoe synthesizer makes its own: unchanged)."""
        lengths = job.lengths[index] if job.lengths is not None else None
        if lengths is None:
            return encoded
        info = job.voice.info
        durations = edited_durations(encoded.durations, lengths,
                                     frame_seconds=info.hop_length / info.sample_rate,
                                     add_blank=info.add_blank)  # fmt: skip
        return job.voice.with_durations(encoded, durations) or encoded

    def _check_limits(self, job: _Job, encoded: EncodedSentence, index: int, before: float) -> None:
        """Sentence ``index`` may not last too long, nor take the request past its limit
        (``before``: seconds of audio already made)."""
        info = job.voice.info
        seconds = encoded.n_frames * info.hop_length / info.sample_rate
        self.limits.check_sentence(seconds, index)
        self.limits.check_request(before + seconds)

    def _check_request(self, job: _Job, first: EncodedSentence) -> None:
        """Refuse a request whose audio would pass the request limit before making any.

        The limit is otherwise met sentence by sentence, after the sentences before
        were decoded (a server's 900 s took over a minute of work to reach). The
        first sentence's rate, extrapolated over the text's phonemes, says whether
        the request may come near the limit; only then are every sentence's
        durations predicted (BERT and the duration predictor, a small share of the
        work) and summed, pauses left out, so nothing that fits is refused.
        """
        limit = self.limits.max_request_seconds
        if limit is None or len(job.sentences) < 2:
            return
        info = job.voice.info
        seconds = first.n_frames * info.hop_length / info.sample_rate
        phones = [len(s.phonemes.phones) for s in job.sentences]
        if seconds / max(1, phones[0]) * sum(phones) < PRECHECK_SHARE * limit:
            return
        for start in range(1, len(job.sentences), BERT_GROUP):
            group = job.sentences.span(start, start + BERT_GROUP)
            features = job.calls(self.backend.bert_features, [s.phonemes for s in group])
            for i, (sentence, feature) in enumerate(zip(group, features, strict=True)):
                rng = self.backend.new_rng(sentence_seed(job.seed, start + i))
                durations = job.calls(
                    job.voice.durations, sentence.phonemes, feature, job.options, rng
                )
                if durations is None:  # a voice that cannot tell: checked as it goes
                    return
                seconds += max(1, int(durations.frames.sum())) * info.hop_length / info.sample_rate
                self.limits.check_request(seconds)

    def _chunks(self, job: _Job, first: tuple[EncodedSentence, Any]) -> Iterator[AudioChunk]:
        info = job.voice.info
        sr, hop = info.sample_rate, info.hop_length
        offset = 0
        pending: Iterator[tuple[EncodedSentence, Any]] = iter([first])
        pauses: list[float | None] = []
        previous: npt.NDArray[np.float32] | None = None
        boundary = 0  # sentence ends met so far (clause cuts are not sentence ends)
        for index, sentence in enumerate(job.sentences):
            if index == 1:
                pauses = self._pauses(job)
            if index >= 1:
                job.features.pop(index - 1, None)  # encoded, and the pauses are known
                job.sentences.forget_before(index - 1)  # only its clause mark is asked for
            if index >= 1 and (index - 1) % BERT_GROUP == 0:
                # The next sentences' BERT in one batch, a bounded group at a time:
                # one batch of a whole book would hold the stream (and its slot) for
                # seconds between two sentences.
                pending = iter(self._encode(job, index, index + BERT_GROUP))
            encoded, rng = next(pending)
            gap = 0
            if previous is not None and not job.sentences[index - 1].clause:
                predicted = pauses[boundary] if boundary < len(pauses) else None
                gap = gap_samples(
                    predicted,
                    trailing_silence(previous, sr),
                    sr,
                    chosen=job.options.pause_seconds,
                    scale=job.options.pause_scale,
                )
                boundary += 1
            if index:  # the first was checked before the stream began
                self._check_limits(job, encoded, index, (offset + gap) / sr)
            timings = sentence_timings(
                encoded.phonemes,
                encoded.inputs,
                encoded.durations,
                hop_length=hop,
                sample_rate=sr,
                offset=offset + gap,
            )
            pieces: list[npt.NDArray[np.float32]] = []
            # Audio already made lets a sentence start with larger windows.
            lead = offset // hop if job.early_audio else _NO_HURRY
            for piece in self._decode(job, encoded, rng, lead):
                first_piece = not pieces
                pieces.append(piece)
                # The sentence's first chunk starts with its pause and carries its timings.
                samples = (
                    np.concatenate([np.zeros(gap, np.float32), piece])
                    if first_piece and gap
                    else piece
                )
                chunk = AudioChunk(
                    samples, sr, offset, index, timings if first_piece else Timings(),
                    text=sentence.text, options=job.options,
                )  # fmt: skip
                offset += len(samples)
                yield chunk
            previous = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)

    def _decode(
        self, job: _Job, encoded: EncodedSentence, rng: Any, lead_frames: int = 0
    ) -> Iterator[npt.NDArray[np.float32]]:
        options = job.options
        windows = job.voice.decode_windows(encoded, options, rng, lead_frames=lead_frames)
        try:
            if options.changes_pitch:
                whole = np.concatenate(list(self._gated(job, windows)))
                yield job.calls(
                    lambda: adjust_pitch(
                        whole,
                        job.voice.info.sample_rate,
                        pitch_scale=options.pitch_scale,
                        intonation_scale=options.intonation_scale,
                    )
                )
            else:
                yield from self._gated(job, windows)
        finally:
            close = getattr(windows, "close", None)
            if close is not None:
                close()

    def _gated(
        self, job: _Job, windows: Iterator[npt.NDArray[np.float32]]
    ) -> Iterator[npt.NDArray[np.float32]]:
        """Each window made in a gate slot; non-finite audio (corrupt weights) is an error."""
        done = object()
        while True:
            piece = job.calls(next, windows, done)
            if piece is done:
                return
            if not np.isfinite(piece).all():
                raise ModelLoadError(
                    "the voice made non-finite audio (NaN or infinity): its weights are "
                    "probably corrupt; convert or download it again"
                )
            yield piece

    def _pauses(self, job: _Job) -> list[float | None]:
        """Predicted pause (s) after each sentence but the last, from one whole-text reading.

        By default the whole text is the sentences' readings joined, with
        their own BERT features (made here in the groups :meth:`_encode` would
        make them in, so each sentence's audio is what it would be anyway):
        what the second BERT pass cost, 5-10% of a paragraph's time, is saved.
        BERT then sees each sentence alone rather than the text, which moves a
        pause by a frame or so (``benchmarks/pause_reading.py``). Texts too long
        for one g2p or BERT pass get no prediction (the floor of
        :data:`yomiage.synthesis.pauses.MIN_PAUSE_SECONDS` applies), nor does a
        request that chose its pauses.
        """
        if job.options.pause_seconds is not None:
            return []
        # Too long for one BERT pass: no prediction, and no need to read the whole text
        # to know (twice the room for SBV2's own reading of it, which differs a little).
        room = MAX_BERT_TOKENS - 2
        if not job.sentences.fits(2 * room if self.exact_pauses else room):
            return []
        n_sentences = sum(not s.clause for s in job.sentences)
        if n_sentences < 2:
            return []
        if self.exact_pauses:
            try:
                whole = self.frontend.g2p(job.text)
            except TextError:
                return []
            if len(whole.bert_text) + 2 > MAX_BERT_TOKENS:
                return []
            [features] = job.calls(self.backend.bert_features, [whole])
        else:
            parts = [s.phonemes for s in job.sentences.read_all()]
            whole = joined_reading(parts)
            if len(whole.bert_text) + 2 > MAX_BERT_TOKENS:
                return []
            for start in range(1, len(parts), BERT_GROUP):
                self._features(job, start, start + BERT_GROUP)
            features = self.backend.join_bert_features([job.features[i] for i in range(len(parts))])
        rng = self.backend.new_rng(sentence_seed(job.seed, PAUSE_STREAM))
        durations = job.calls(job.voice.durations, whole, features, job.options, rng)
        if durations is None:
            return []
        info = job.voice.info
        frames = boundary_frames(durations.inputs.phone_ids, durations.frames)
        return [f * info.hop_length / info.sample_rate for f in frames[: n_sentences - 1]]
