"""The engine a batch worker holds: built once per worker process, used for many items.

:class:`EngineSpec` is plain data (it crosses to worker processes and, later,
to other machines), and :class:`ItemSynthesizer` is what each worker builds
from it: one ``TTS`` with the job's voices, and the item-to-audio step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yomiage.batch.items import BatchInputError, BatchItem
from yomiage.batch.outputs import Made
from yomiage.errors import YomiageError
from yomiage.options import SynthesisOptions

if TYPE_CHECKING:
    from yomiage.engine import TTS


class WorkerStartError(YomiageError, RuntimeError):
    """A worker could not build its engine: no item can be made, so the job stops."""


@dataclass(frozen=True)
class EngineSpec:
    """How to build a worker's engine, and the job's synthesis options and format.

    ``voices``: ``(name, source)`` pairs (source None: a catalog name), the first
    being the voice of items that name none. ``options``: SynthesisOptions fields
    every item starts from (an item's own override them)."""

    voices: tuple[tuple[str, str | None], ...]
    fmt: str = "wav"
    options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    bert_source: str | None = None
    threads: int | None = None
    bert_precision: str = "q8"
    decoder_precision: str = "auto"
    cache_dir: str | None = None
    offline: bool = False
    user_dictionary: str | None = None

    @property
    def voice_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.voices)

    def build(self) -> TTS:
        """The engine, loaded and warmed (raises what loading raises)."""
        from yomiage.engine import TTS

        tts = TTS(
            self.device,
            cache_dir=self.cache_dir,
            bert_source=self.bert_source,
            threads=self.threads,
            bert_precision=self.bert_precision,
            user_dictionary=self.user_dictionary,
            offline=True if self.offline else None,
            decoder_precision=self.decoder_precision,
        )
        try:
            for name, source in self.voices:
                tts.load(name, source=source)
            return tts.prepare()
        except BaseException:
            tts.close()
            raise


class ItemSynthesizer:
    """One engine and the step from an item to its encoded audio."""

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec
        try:
            self.tts: TTS | None = spec.build()
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
