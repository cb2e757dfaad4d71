"""The engine a batch worker holds: built once per worker process, used for many items.

:class:`BatchSpec` is plain data (it crosses to worker processes and to other
machines), and :class:`ItemSynthesizer` is what each worker builds from it:
one ``TTS`` with the job's voices, and the item-to-audio step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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

    def make(self, item: BatchItem) -> Made:
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
        audio = speaker.generate(item.text, options)
        return Made(item.id, audio.to_bytes(self.spec.fmt), audio.duration)

    def close(self) -> None:
        if self.tts is not None:
            self.tts.close()
