"""One voice of a :class:`yomiage.TTS`: generate, stream, and their async forms.

Streaming is the primitive; :meth:`Speaker.generate` collects a stream. The
async forms run every step of inference in a worker thread and hand control
back to the event loop between chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from yomiage.audio import Audio, AudioChunk
from yomiage.audio.timings import Timings, sentence_timings
from yomiage.errors import ModelLoadError
from yomiage.options import SynthesisOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from yomiage.options import OptionFields
    from yomiage.runtime.plan.value import Plan
    from yomiage.runtime.voice import Voice
    from yomiage.synthesis.lengths import PhoneLengths
    from yomiage.synthesis.pipeline import Pipeline
    from yomiage.text.g2p import Phonemes

_DONE = object()


# What warming a voice synthesizes: its first call pays for the allocations.
WARMUP_TEXT = "こんにちは。"


class Speaker:
    """A loaded voice. Safe to use from many threads and coroutines at once.

    Every method takes the options as one :class:`SynthesisOptions` and/or as
    keyword overrides of its fields: ``generate(text, seed=1)``,
    ``generate(text, options)``, ``generate(text, options, speed=1.2)``.
    """

    def __init__(self, name: str, voice: Voice, pipeline: Pipeline) -> None:
        info = voice.info
        self.name = name
        self.sample_rate = info.sample_rate
        self.styles = info.styles
        self.speaker_ids: Mapping[str, int] = MappingProxyType(dict(info.speakers))
        # Each style's row in the voice's style vectors (an AIVMX voice's local style id).
        self.style_ids: Mapping[str, int] = MappingProxyType(
            dict(info.style_rows) or {s: i for i, s in enumerate(info.styles)}
        )
        # Which engine and precision decode it, e.g. "decoder bf16 on openvino".
        self.runtime = info.runtime
        # The publisher's name, version and licence text (AIVMX voices), else None.
        self.credits = info.credits
        # The plan its graphs run by (CPU bundles; None for other voices): engine,
        # precision and windows of the decoder, and why (yomiage.runtime.plan).
        self.plan = voice.plan
        self._voice = voice
        self._pipeline = pipeline

    def __repr__(self) -> str:
        return f"Speaker({self.name!r}, styles={list(self.styles)})"

    def warm(self, text: str = WARMUP_TEXT) -> None:
        """Synthesize ``text`` once and run the decoder at every input length its plan
        uses (for engines that compile per length), so no request pays for first calls."""
        self.generate(text, seed=0)
        warm_shapes = getattr(self._voice, "warm_shapes", None)
        if warm_shapes is not None:
            warm_shapes()

    def _relabel(self, plan: Plan) -> None:
        """The plan it runs by, as found anew: the same engines, windows and threads on
        another basis (this machine's measurements chose what the shipped ones had)."""
        self.plan = plan

    def _when_released(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once the voice's weights are freed: after it is unloaded and
        the last stream still reading it is done (streams hold the weights, not this)."""
        weakref.finalize(self._voice, callback)

    def options(
        self, options: SynthesisOptions | None = None, **overrides: Unpack[OptionFields]
    ) -> SynthesisOptions:
        """``options`` (default: the API's defaults) with ``overrides``, checked for this
        voice: OptionError names a field out of range, an unknown style or speaker
        (an unknown keyword is a TypeError, as for any Python call)."""
        base = SynthesisOptions() if options is None else options
        if not isinstance(base, SynthesisOptions):
            raise TypeError(f"options must be a SynthesisOptions, not {type(base).__name__}")
        merged = replace(base, **overrides) if overrides else base
        return merged.check_voice(self.name, self.styles, self.speaker_ids)

    def stream(
        self,
        text: str,
        options: SynthesisOptions | None = None,
        *,
        cancel: threading.Event | None = None,
        early_audio: bool = True,
        **overrides: Unpack[OptionFields],
    ) -> Iterator[AudioChunk]:
        """Audio chunks as they are decoded; the first comes after one decoder window.

        Text and options are checked before this returns. Stopping early (or
        ``close()`` on the iterator) releases everything the stream held.
        Setting ``cancel`` from another thread stops the work at its next step,
        even before the first chunk, with :class:`~yomiage.errors.Cancelled`.
        ``early_audio=False``: nobody listens yet (a file being written), so
        decode in the largest windows from the start, as :meth:`generate` does.
        """
        checked = self.options(options, **overrides)
        return self._pipeline.stream(
            self._voice, text, checked, cancel=cancel, early_audio=early_audio
        )

    def generate(
        self, text: str, options: SynthesisOptions | None = None, **overrides: Unpack[OptionFields]
    ) -> Audio:
        """The whole text as one :class:`Audio`, sentences joined with natural pauses.

        Nobody hears it before it is done, so it is decoded in the largest
        windows from the start rather than in :meth:`stream`'s small first ones:
        faster, and equal to the streamed audio within the decoder's precision
        (bit for bit only where the windows fall alike)."""
        chunks = self.stream(text, options, early_audio=False, **overrides)
        return Audio.from_chunks(chunks, self.sample_rate)

    def generate_reading(
        self,
        reading: Sequence[Phonemes],
        options: SynthesisOptions | None = None,
        *,
        lengths: Sequence[PhoneLengths | None] | None = None,
        **overrides: Unpack[OptionFields],
    ) -> Audio:
        """The audio of a reading made by the caller, one :class:`Phonemes` per sentence
        (an editor's own accents and moras; :class:`~yomiage.text.Frontend` ``.g2p``
        makes one from text). Pauses and timings as for :meth:`generate`; ``lengths``
        as for :meth:`stream_reading`."""
        chunks = self.stream_reading(reading, options, lengths=lengths, **overrides)
        return Audio.from_chunks(chunks, self.sample_rate)

    def stream_reading(
        self,
        reading: Sequence[Phonemes],
        options: SynthesisOptions | None = None,
        *,
        cancel: threading.Event | None = None,
        early_audio: bool = False,
        lengths: Sequence[PhoneLengths | None] | None = None,
        **overrides: Unpack[OptionFields],
    ) -> Iterator[AudioChunk]:
        """:meth:`generate_reading` a chunk at a time; ``cancel`` and ``early_audio`` as
        for :meth:`stream` (a server stops an editor's synthesis when its client leaves).
        ``lengths``: each sentence's phoneme lengths in seconds, one per phoneme between
        the pads (None for the predicted one), as an editor set them
        (:mod:`yomiage.synthesis.lengths`)."""
        checked = self.options(options, **overrides)
        text = "".join(p.text for p in reading)
        return self._pipeline.stream(
            self._voice, text, checked, cancel=cancel, early_audio=early_audio,
            reading=list(reading), lengths=lengths,
        )  # fmt: skip

    def predict(
        self, text: str, options: SynthesisOptions | None = None, **overrides: Unpack[OptionFields]
    ) -> list[tuple[Phonemes, Timings]]:
        """Each sentence's phonemes and the timings the duration predictor gives them,
        without making audio (cheap: BERT and the text encoder only). Each sentence's
        timings start at 0; the pauses between sentences are not included."""
        checked = self.options(options, **overrides)
        info = self._voice.info
        out = []
        for sentence, durations in self._pipeline.predict(self._voice, text, checked):
            if durations is None:
                raise ModelLoadError(f"voice {self.name!r} cannot predict durations")
            timings = sentence_timings(
                sentence.phonemes, durations.inputs, durations.frames,
                hop_length=info.hop_length, sample_rate=info.sample_rate, offset=0,
            )  # fmt: skip
            out.append((sentence.phonemes, timings))
        return out

    async def astream(
        self, text: str, options: SynthesisOptions | None = None, **overrides: Unpack[OptionFields]
    ) -> AsyncIterator[AudioChunk]:
        """:meth:`stream` for asyncio: inference runs in worker threads, one chunk at a time."""
        checked = self.options(options, **overrides)
        # aclosing: stopping this stream awaits the inner one's close (compute stopped).
        async with contextlib.aclosing(self._astream(text, checked, True)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _astream(
        self, text: str, checked: SynthesisOptions, early_audio: bool
    ) -> AsyncGenerator[AudioChunk, None]:
        loop = asyncio.get_running_loop()
        start = functools.partial(
            self._pipeline.stream, self._voice, text, checked, early_audio=early_audio
        )
        chunks = await loop.run_in_executor(None, start)
        steps = _Steps(chunks)
        try:
            while True:
                chunk = await loop.run_in_executor(None, steps.next)
                if chunk is _DONE:
                    return
                yield chunk  # type: ignore[misc]
        finally:
            # The close runs in a worker, after any step still in flight. A
            # consumer that stopped (aclose) waits for it, so compute has stopped
            # when it returns; a cancelled one does not wait (it must not block).
            closing = loop.run_in_executor(None, steps.close)
            task = asyncio.current_task()
            cancelling = getattr(task, "cancelling", None)  # Python 3.11+
            if cancelling is not None and not cancelling():
                await closing

    async def agenerate(
        self, text: str, options: SynthesisOptions | None = None, **overrides: Unpack[OptionFields]
    ) -> Audio:
        """:meth:`generate` for asyncio; cancelling it stops the synthesis."""
        checked = self.options(options, **overrides)
        async with contextlib.aclosing(self._astream(text, checked, False)) as stream:
            chunks = [chunk async for chunk in stream]
        return Audio.from_chunks(chunks, self.sample_rate)


class _Steps:
    """A chunk iterator advanced and closed from worker threads, one thing at a time."""

    def __init__(self, chunks: Iterator[AudioChunk]) -> None:
        self._chunks = chunks
        self._lock = threading.Lock()

    def next(self) -> object:
        with self._lock:
            return next(self._chunks, _DONE)

    def close(self) -> None:
        with self._lock:
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()
