"""The engine a batch worker holds: built once per worker process, used for many items.

:class:`BatchSpec` is plain data (it crosses to worker processes and to other
machines), and :class:`ItemSynthesizer` is what each worker builds from it:
one ``TTS`` with the job's voices, and the item-to-audio step.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yomiage.batch.audio_file import AudioFileWriter
from yomiage.batch.items import BatchInputError, BatchItem
from yomiage.batch.outputs import Made
from yomiage.engine_spec import EngineSpec
from yomiage.errors import YomiageError
from yomiage.options import SynthesisOptions

if TYPE_CHECKING:
    from yomiage.engine import TTS


class WorkerStartError(YomiageError, RuntimeError):
    """A worker could not build its engine: no item can be made, so the job stops."""


@dataclass(frozen=True)
class BatchSpec:
    """What every worker of a job builds and makes: its engine, the synthesis options
    every item starts from (an item's own override them) and the audio format.
    The first of the engine's voices reads items that name none."""

    engine: EngineSpec
    fmt: str = "wav"
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def voice_names(self) -> tuple[str, ...]:
        return self.engine.voice_names


@dataclass(frozen=True)
class ItemProgress:
    """How far a worker is into an item: ``characters`` of its ``total`` read so far
    (the sentences begun) and the ``seconds`` of audio made."""

    item_id: str
    characters: int
    total: int
    seconds: float


class ItemSynthesizer:
    """One engine and the step from an item to its encoded audio."""

    def __init__(self, spec: BatchSpec) -> None:
        self.spec = spec
        try:
            self.tts: TTS | None = spec.engine.build()
            self.problem: str | None = None
        except Exception as exc:  # reported on the first item, so the driver stops the job
            self.tts = None
            self.problem = f"{type(exc).__name__}: {exc}"

    def ready(self) -> bool:
        """Answers once this worker is up: a restarted actor's first call waits for
        its voices to load (see :meth:`yomiage.batch.on_ray.RayItemPool.restart`)."""
        return True

    def write(
        self,
        item: BatchItem,
        into: Path,
        on_progress: Callable[[ItemProgress], None] | None = None,
    ) -> Made:
        """Make ``item``'s audio into a temporary file in the folder ``into``, chunk by
        chunk as it is decoded (the worker never holds the whole item's audio); the
        :class:`Made` names that file, for the driver to rename into place."""
        if self.tts is None:
            raise WorkerStartError(f"a worker could not load the voices: {self.problem}")
        voice = item.voice or self.spec.voice_names[0]
        speaker = self.tts.speakers.get(voice)
        if speaker is None:
            raise BatchInputError(
                f"item {item.id!r} asks for voice {voice!r}; this job loads "
                f"{', '.join(self.spec.voice_names)}"
            )
        fields = {**self.spec.options, **item.options}
        options = speaker.options(SynthesisOptions.from_fields(fields))
        final = into / f"{item.id}.{self.spec.fmt}"
        total = len(item.text.strip())
        read = 0
        # early_audio=False: the largest windows from the start, as speaker.generate.
        chunks = speaker.stream(item.text, options, early_audio=False)
        with AudioFileWriter(final, self.spec.fmt, speaker.sample_rate) as out:
            for chunk in chunks:
                if chunk.timings.phonemes:  # a sentence's first chunk
                    read = min(total, read + len(chunk.text))
                out.add(chunk.samples)
                if on_progress is not None:
                    on_progress(ItemProgress(item.id, read, total, out.seconds))
            path = out.finish()
        return Made(item.id, b"", out.seconds, path=str(path))

    def make(self, item: BatchItem) -> Made:
        """``item``'s encoded audio as bytes (for workers on other machines, which share
        no folder with the driver); made as :meth:`write` makes it."""
        with tempfile.TemporaryDirectory(prefix="yomiage-batch-") as folder:
            made = self.write(item, Path(folder))
            data = Path(made.path or "").read_bytes()
        return Made(item.id, data, made.seconds)

    def close(self) -> None:
        if self.tts is not None:
            self.tts.close()
