"""How to build an engine, as plain data: the one recipe every way of running yomiage shares.

``yomiage generate``/``serve`` build their engine from flags, batch workers
from a spec pickled into another process or onto a Ray node, and a Ray Serve
replica from its deployment's arguments. All of them go through
:class:`EngineSpec`, so a flag means the same engine everywhere and a new
engine setting is added in one place: each field declares its default, its
flag and its bounds (:func:`~yomiage.settings.setting`), which the command
line's flags and the Ray app's arguments read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from yomiage.limits import Limits
from yomiage.runtime.plan.request import (
    DECODER_PRECISIONS,
    DEFAULT_MEMORY_BUDGET_MB,
    MIN_MEMORY_BUDGET_MB,
)
from yomiage.settings import check, setting
from yomiage.text.openjtalk import DEFAULT_READING, READINGS

if TYPE_CHECKING:
    from yomiage.engine import TTS

VoiceSource = tuple[str, str | None]  # (name, source); source None: a catalog name
_NAME = re.compile(r"[\w.-]+")  # fullmatch: "$" accepts a trailing newline
# The command line's --quantize (and the Ray app's quantize) to TTS's bert_precision.
QUANTIZE = {"q8": "q8", "q4": "q4", "none": "fp32"}


@dataclass(frozen=True)
class EngineSpec:
    """An engine's settings and voices (the arguments of :class:`~yomiage.TTS` and its
    :meth:`~yomiage.TTS.load` calls). Picklable: it crosses processes and machines.
    ``voices`` may be empty only for an engine that loads its voices later (``yomiage
    serve`` with a models folder): :meth:`build` needs one."""

    voices: tuple[VoiceSource, ...]
    device: str = setting("cpu", "--device", "cpu (ONNX Runtime), cuda or cuda:N (PyTorch)")
    bert_source: str | None = setting(
        None, "--bert", "BERT folder or source (default: beside the voice)", metavar="SOURCE"
    )
    threads: int | None = setting(
        None, "--threads", "intra-op threads (default: one per core, or as the plan measured)",
        metavar="N", ge=1, kind=int,
    )  # fmt: skip
    bert_precision: str = setting(
        "q8", "--quantize", "BERT precision on CPU: q8, q4 or none (float32); default %(default)s",
        choices=tuple(sorted(QUANTIZE)), parse=QUANTIZE.__getitem__,
    )  # fmt: skip
    decoder_precision: str = setting(
        "auto", "--decoder",
        "decoder precision on CPU: auto (the fastest plan measured within --memory-budget-mb), "
        "fp32, bf16 (OpenVINO), or int8 (needs a bundle converted with --decoder int8); "
        "default %(default)s",
        choices=DECODER_PRECISIONS,
    )  # fmt: skip
    memory_budget_mb: int = setting(
        DEFAULT_MEMORY_BUDGET_MB, "--memory-budget-mb",
        "peak memory (MB) one voice with its BERT may hold: the fastest plan measured on this "
        "CPU within it is chosen (default %(default)s)",
        metavar="MB", ge=MIN_MEMORY_BUDGET_MB, kind=int, formerly=("--memory-budget",),
    )  # fmt: skip
    cache_dir: str | None = setting(
        None, "--cache-dir", "cache root (default: $YOMIAGE_CACHE)", metavar="DIR"
    )
    offline: bool = setting(False, "--offline", "never touch the network (use the cache only)")
    user_dictionary: str | None = setting(
        None, "--user-dict", "user dictionary JSON (default: the per-user one of `yomiage dict`)",
        metavar="PATH",
    )  # fmt: skip
    limits: Limits | None = None
    # When each voice's plan is measured (TTS's measure_plan): None, never at load;
    # True, at load where nothing is kept (``yomiage bench``).
    measure_plan: bool | None = None
    reading: str = setting(
        DEFAULT_READING, "--reading",
        "natural: words read as people read them; sbv2: exactly the reading SBV2 voices were "
        "trained with (default %(default)s)",
        choices=READINGS,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check(self)  # the declared bounds and choices

    @property
    def voice_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.voices)

    def declare(self) -> TTS:
        """The engine with its voices declared, nothing loaded yet (``prepare()`` loads)."""
        from yomiage.engine import TTS

        tts = TTS(
            self.device,
            limits=self.limits,
            cache_dir=self.cache_dir,
            bert_source=self.bert_source,
            threads=self.threads,
            bert_precision=self.bert_precision,
            user_dictionary=self.user_dictionary,
            offline=True if self.offline else None,
            decoder_precision=self.decoder_precision,
            memory_budget_mb=self.memory_budget_mb,
            measure_plan=self.measure_plan,
            reading=self.reading,
        )
        try:
            for name, source in self.voices:
                tts.load(name, source=source)
        except BaseException:
            tts.close()
            raise
        return tts

    def build(self) -> TTS:
        """The engine, loaded and prepared (raises what loading raises, leaving nothing open)."""
        if not self.voices:
            raise ValueError("an engine needs at least one voice")
        tts = self.declare()
        try:
            return tts.prepare()
        except BaseException:
            tts.close()
            raise


def parse_voices(names: Iterable[str] = (), models: Iterable[str] = ()) -> tuple[VoiceSource, ...]:
    """``(name, source)`` pairs from catalog names and ``[NAME=]SOURCE`` models (the
    ``--voice``/``--model`` syntax); raises ValueError for none or a name used twice."""
    out: list[VoiceSource] = [(n, None) for n in names]
    for model in models:
        name, sep, source = model.partition("=")
        if not sep or not _NAME.fullmatch(name):
            name, source = model_name(model), model
        out.append((name, source))
    if not out:
        raise ValueError("name a voice: --voice NAME (see `yomiage voices`) or --model SOURCE")
    seen = set()
    for name, _ in out:
        if name in seen:
            raise ValueError(f"two voices are called {name!r}; use --model NAME=SOURCE")
        seen.add(name)
    return tuple(out)


def model_name(source: str) -> str:
    """A voice name for a source: for a local voice the name its model gives itself
    (:func:`~yomiage.runtime.layouts.declared_name`), else its last path part
    (``hf://o/r/jvnv-F1-jp`` → ``jvnv-F1-jp``; ``voices/mine.aivmx`` → ``mine``)."""
    if "://" not in source:
        from yomiage.runtime.layouts import declared_name

        declared = declared_name(Path(source).expanduser())
        if declared:
            return declared
    path = source.split("://", 1)[-1].split("@", 1)[0].rstrip("/\\")
    last = re.split(r"[/\\]", path)[-1]
    if last.lower().endswith(".aivmx"):
        last = last[: -len(".aivmx")]
    return last or "voice"
