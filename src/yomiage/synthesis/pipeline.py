"""Text to a stream of audio chunks: the one path every public call goes through.

Order of work for a request, chosen so the first audio leaves early:

1. split into sentences and run g2p on each (fails early on unreadable text);
2. BERT + encoder for the first sentence alone, then its audio window by window;
3. BERT for the following sentences in batched calls of up to
   :data:`BERT_GROUP` sentences, each made when the stream reaches it;
4. the whole text once through BERT + encoder for the pauses (spec §8.3),
   needed only before the second sentence starts;
5. each later sentence: the pause (zeros), then its audio window by window.

Every backend call holds the engine's :class:`ComputeGate` only while it runs,
so concurrent requests interleave window by window instead of oversubscribing
the cores; a cancelled request (its ``cancel`` event set) stops before its
next call, even while it waits for the gate. Each sentence draws its noise
from its own generator derived from the request's seed, so a result never
depends on how requests interleave. Each sentence's predicted length is held
to the engine's :class:`~yomiage.limits.Limits` before its audio is made.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from yomiage.audio import AudioChunk
from yomiage.audio.timings import Timings, sentence_timings
from yomiage.errors import Cancelled, ModelLoadError, TextError
from yomiage.limits import Limits
from yomiage.options import SynthesisOptions
from yomiage.runtime.types import EncodedSentence, SynthesisBackend
from yomiage.synthesis.pauses import boundary_frames, gap_samples, trailing_silence
from yomiage.synthesis.pitch import adjust_pitch, require_world
from yomiage.text.frontend import Frontend
from yomiage.text.g2p import Phonemes
from yomiage.text.sentences import ends_at_comma, first_clause
from yomiage.text.symbols import to_model_inputs

log = logging.getLogger(__name__)
T = TypeVar("T")
_PAUSE_STREAM = 2**32 - 1  # sub-seed of the whole-text pause prediction
MAX_BERT_TOKENS = 512  # DeBERTa-v2's position range, [CLS] and [SEP] included
BERT_GROUP = 8  # sentences per batched BERT call after the first sentence
# Voices that make a sentence's audio in one graph (HayaKoe's) cannot cut their
# flow (see runtime.chunking), so their sentences are cut shorter instead: at
# about ten frames a character, this many characters at speed 1 stay near the
# span the flow reads at once elsewhere; slower speech gets proportionally fewer.
WHOLE_UTTERANCE_CHARS = 100
_MIN_SENTENCE_CHARS = 20
# The longest reading (normalized text) of one sentence; 200 ordinary characters
# stay below it, a sentence of digits or letters read out is cut further.
MAX_READING_CHARS = 300
_WAIT_POLL_SECONDS = 0.05


class ComputeGate:
    """At most ``slots`` backend calls at once, whoever asks.

    Each call already uses every intra-op thread, so running more at a time
    only makes threads fight for cores; waiting callers queue here instead.
    """

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError("a compute gate needs at least one slot")
        self._slots = threading.BoundedSemaphore(slots)

    def run(self, fn: Callable[..., T], *args: Any, cancel: threading.Event | None = None) -> T:
        """``fn(*args)`` in a slot; :class:`Cancelled` as soon as ``cancel`` is set."""
        if cancel is None:
            with self._slots:
                return fn(*args)
        while not self._slots.acquire(timeout=_WAIT_POLL_SECONDS):
            if cancel.is_set():
                raise Cancelled("the synthesis was cancelled")
        try:
            if cancel.is_set():
                raise Cancelled("the synthesis was cancelled")
            return fn(*args)
        finally:
            self._slots.release()


def sentence_seed(seed: int, index: int) -> int:
    """An independent 63-bit seed for sentence ``index`` of a request seeded ``seed``."""
    state = np.random.SeedSequence([seed, index]).generate_state(2, np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


@dataclass(frozen=True)
class _Sentence:
    phonemes: Phonemes
    seed: int
    clause: bool = False  # ends at a comma: the next piece follows without a pause


@dataclass(frozen=True)
class _Run:
    """One request's way to the backend: the engine's gate and the request's cancel event."""

    gate: ComputeGate
    cancel: threading.Event | None

    def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return self.gate.run(fn, *args, cancel=self.cancel)


class Pipeline:
    """Runs requests for the voices of one backend; shared by all threads of an engine."""

    def __init__(
        self,
        backend: SynthesisBackend,
        frontend: Frontend,
        gate: ComputeGate,
        limits: Limits | None = None,
    ) -> None:
        self.backend = backend
        self.frontend = frontend
        self.gate = gate
        self.limits = limits or Limits()

    def sentences(
        self, text: str, *, quick_start: bool = False, max_length: int | None = None
    ) -> list[tuple[Phonemes, bool]]:
        """The text's sentences through g2p (spec §8.1), each with whether it ends at a
        comma (a clause cut from a longer sentence); TextError if nothing is readable."""
        if not isinstance(text, str):
            raise TextError(f"text must be a string, not {type(text).__name__}")
        parts = [s.strip() for s in self.frontend.split_sentences(text, max_length)]
        parts = [s for s in parts if s]
        if not parts:
            raise TextError("the text is empty")
        if quick_start:
            parts = first_clause(parts[0]) + parts[1:]
        out = []
        for part in parts:
            try:
                out += self._read(part, ends_at_comma(part))
            except TextError:
                if len(parts) == 1:
                    raise
                log.debug("skipping unreadable sentence %r", part)
        if not out:
            raise TextError(f"nothing readable in the text: {text[:80]!r}")
        return out

    def _read(self, part: str, clause: bool) -> list[tuple[Phonemes, bool]]:
        """``part`` through g2p, cut in halves while its reading is too long: digits and
        letters read out can make 200 characters into 600 and more, and the text
        encoder's cost grows with the square of that."""
        phonemes = self.frontend.g2p(part)
        if len(phonemes.bert_text) <= MAX_READING_CHARS or len(part) < 2:
            return [(phonemes, clause)]
        halves = [h for h in self.frontend.split_sentences(part, (len(part) + 1) // 2) if h]
        out: list[tuple[Phonemes, bool]] = []
        for i, half in enumerate(halves):
            # Inside a sentence: the next half follows without a sentence pause.
            out += self._read(half, clause if i == len(halves) - 1 else True)
        return out

    def stream(
        self,
        voice: str,
        text: str,
        options: SynthesisOptions,
        *,
        cancel: threading.Event | None = None,
    ) -> Iterator[AudioChunk]:
        """Chunks of ``text`` read by ``voice``; validates everything before the first.

        Setting ``cancel`` stops the work at the next backend call with
        :class:`~yomiage.errors.Cancelled` (a server sets it when its client leaves).
        """
        if options.changes_pitch:
            require_world()
        run = _Run(self.gate, cancel)
        info = self.backend.voice_info(voice)
        max_length = None
        if info.whole_utterance:
            max_length = max(
                _MIN_SENTENCE_CHARS, int(WHOLE_UTTERANCE_CHARS / max(1.0, options.speed))
            )
        phonemes = self.sentences(text, quick_start=options.quick_start, max_length=max_length)
        seed = options.seed
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
        sentences = [
            _Sentence(p, sentence_seed(seed, i), clause) for i, (p, clause) in enumerate(phonemes)
        ]
        # Encode the first sentence here, so that bad options (and a first
        # sentence beyond the limits) fail at the call.
        first = self._encode(run, voice, sentences[:1], options)[0]
        seconds = first[0].n_frames * self.backend.hop_length(voice) / info.sample_rate
        self.limits.check_sentence(seconds, 0)
        self.limits.check_request(seconds)
        return self._chunks(run, voice, text, sentences, first, options, seed)

    def _encode(
        self,
        run: _Run,
        voice: str,
        sentences: Sequence[_Sentence],
        options: SynthesisOptions,
    ) -> list[tuple[EncodedSentence, Any]]:
        phonemes = [s.phonemes for s in sentences]
        features = run(self.backend.bert_features, phonemes)
        out = []
        for sentence, feature in zip(sentences, features, strict=True):
            rng = self.backend.new_rng(sentence.seed)
            [encoded] = run(
                self.backend.encode_features, voice, [sentence.phonemes], [feature], options, rng
            )
            out.append((encoded, rng))
        return out

    def _chunks(
        self,
        run: _Run,
        voice: str,
        text: str,
        sentences: list[_Sentence],
        first: tuple[EncodedSentence, Any],
        options: SynthesisOptions,
        seed: int,
    ) -> Iterator[AudioChunk]:
        sr = self.backend.sample_rate(voice)
        hop = self.backend.hop_length(voice)
        offset = 0
        pending: Iterator[tuple[EncodedSentence, Any]] = iter([first])
        pauses: list[float | None] = []
        previous: npt.NDArray[np.float32] | None = None
        boundary = 0  # sentence ends met so far (clause cuts are not sentence ends)
        for index in range(len(sentences)):
            if index == 1:
                n_sentences = sum(not s.clause for s in sentences)
                pauses = self._pauses(run, voice, text, n_sentences, options, seed, sr, hop)
            if index >= 1 and (index - 1) % BERT_GROUP == 0:
                # The next sentences' BERT in one batch, a bounded group at a time:
                # one batch of a whole book would hold the stream (and its slot) for
                # seconds between two sentences.
                group = sentences[index : index + BERT_GROUP]
                pending = iter(self._encode(run, voice, group, options))
            encoded, rng = next(pending)
            gap = 0
            if previous is not None and not sentences[index - 1].clause:
                predicted = pauses[boundary] if boundary < len(pauses) else None
                gap = gap_samples(predicted, trailing_silence(previous, sr), sr)
                boundary += 1
            # Held to the limits before any of the sentence's audio is made.
            seconds = encoded.n_frames * hop / sr
            self.limits.check_sentence(seconds, index)
            self.limits.check_request((offset + gap) / sr + seconds)
            timings = sentence_timings(
                encoded.phonemes,
                encoded.inputs,
                encoded.durations,
                hop_length=hop,
                sample_rate=sr,
                offset=offset + gap,
            )
            pieces: list[npt.NDArray[np.float32]] = []
            for piece in self._decode(run, voice, encoded, options, rng, sr):
                if not pieces:
                    piece_out = np.concatenate([np.zeros(gap, np.float32), piece]) if gap else piece
                    chunk = AudioChunk(piece_out, sr, offset, index, timings)
                else:
                    chunk = AudioChunk(piece, sr, offset, index, Timings())
                pieces.append(piece)
                offset += len(chunk.samples)
                yield chunk
            previous = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)

    def _decode(
        self,
        run: _Run,
        voice: str,
        encoded: EncodedSentence,
        options: SynthesisOptions,
        rng: Any,
        sample_rate: int,
    ) -> Iterator[npt.NDArray[np.float32]]:
        windows = self.backend.decode_windows(voice, encoded, options, rng)
        try:
            if options.changes_pitch:
                whole = np.concatenate(list(self._gated(run, windows)))
                yield run(
                    lambda: adjust_pitch(
                        whole,
                        sample_rate,
                        pitch_scale=options.pitch_scale,
                        intonation_scale=options.intonation_scale,
                    )
                )
            else:
                yield from self._gated(run, windows)
        finally:
            close = getattr(windows, "close", None)
            if close is not None:
                close()

    def _gated(self, run: _Run, windows: Iterator[npt.NDArray[np.float32]]) -> Iterator[Any]:
        """Each window made in a gate slot; non-finite audio (corrupt weights) is an error."""
        done = object()
        while True:
            piece = run(next, windows, done)
            if piece is done:
                return
            if not np.isfinite(piece).all():
                raise ModelLoadError(
                    "the voice made non-finite audio (NaN or infinity): its weights are "
                    "probably corrupt; convert or download it again"
                )
            yield piece

    def _pauses(
        self,
        run: _Run,
        voice: str,
        text: str,
        n_sentences: int,
        options: SynthesisOptions,
        seed: int,
        sample_rate: int,
        hop: int,
    ) -> list[float | None]:
        """Predicted pause (s) after each sentence but the last, from one whole-text reading.

        Texts too long for one g2p or BERT pass get no prediction (the floor
        of :data:`yomiage.synthesis.pauses.MIN_PAUSE_SECONDS` applies).
        """
        if n_sentences < 2:
            return []
        try:
            whole = self.frontend.g2p(text)
        except TextError as exc:
            log.debug("no pause prediction for this text: %s", exc)
            return []
        if len(whole.bert_text) + 2 > MAX_BERT_TOKENS:
            log.debug("no pause prediction: %d characters exceed BERT's range", len(text))
            return []
        [features] = run(self.backend.bert_features, [whole])
        rng = self.backend.new_rng(sentence_seed(seed, _PAUSE_STREAM))
        durations = run(self.backend.predict_durations, voice, whole, features, options, rng)
        if durations is None:
            return []
        add_blank = self.backend.voice_info(voice).add_blank
        inputs = to_model_inputs(whole.phones, whole.tones, whole.word2ph, add_blank=add_blank)
        frames = boundary_frames(inputs.phone_ids, durations)
        return [f * hop / sample_rate for f in frames[: n_sentences - 1]]
