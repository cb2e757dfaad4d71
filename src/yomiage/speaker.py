"""One voice of a :class:`yomiage.TTS`: generate, stream, and their async forms.

Streaming is the primitive; :meth:`Speaker.generate` collects a stream. The
async forms run every step of inference in a worker thread and hand control
back to the event loop between chunks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from yomiage.audio import Audio, AudioChunk
from yomiage.options import SynthesisOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from yomiage.options import OptionFields
    from yomiage.synthesis.pipeline import Pipeline

_DONE = object()


class Speaker:
    """A loaded voice. Safe to use from many threads and coroutines at once."""

    def __init__(
        self,
        name: str,
        pipeline: Pipeline,
        *,
        sample_rate: int,
        styles: tuple[str, ...],
        speaker_ids: Mapping[str, int],
    ) -> None:
        self.name = name
        self.sample_rate = sample_rate
        self.styles = styles
        self.speaker_ids: Mapping[str, int] = MappingProxyType(dict(speaker_ids))
        self._pipeline = pipeline

    def __repr__(self) -> str:
        return f"Speaker({self.name!r}, styles={list(self.styles)})"

    def options(self, **fields: Unpack[OptionFields]) -> SynthesisOptions:
        """Checked options for this voice; OptionError names the field and what it may be
        (an unknown keyword is a TypeError, as for any Python call)."""
        options = SynthesisOptions(**fields)
        return options.check_voice(self.name, self.styles, self.speaker_ids)

    def stream(
        self,
        text: str,
        *,
        cancel: threading.Event | None = None,
        **fields: Unpack[OptionFields],
    ) -> Iterator[AudioChunk]:
        """Audio chunks as they are decoded; the first comes after one decoder window.

        Text and options are checked before this returns. Stopping early (or
        ``close()`` on the iterator) releases everything the stream held.
        Setting ``cancel`` from another thread stops the work at its next step,
        even before the first chunk, with :class:`~yomiage.errors.Cancelled`.
        """
        return self._pipeline.stream(self.name, text, self.options(**fields), cancel=cancel)

    def generate(self, text: str, **fields: Unpack[OptionFields]) -> Audio:
        """The whole text as one :class:`Audio`, sentences joined with natural pauses."""
        return Audio.from_chunks(self.stream(text, **fields), self.sample_rate)

    async def astream(self, text: str, **fields: Unpack[OptionFields]) -> AsyncIterator[AudioChunk]:
        """:meth:`stream` for asyncio: inference runs in worker threads, one chunk at a time."""
        loop = asyncio.get_running_loop()
        options = self.options(**fields)
        chunks = await loop.run_in_executor(None, self._pipeline.stream, self.name, text, options)
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

    async def agenerate(self, text: str, **fields: Unpack[OptionFields]) -> Audio:
        """:meth:`generate` for asyncio; cancelling it stops the synthesis."""
        chunks = [chunk async for chunk in self.astream(text, **fields)]
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
