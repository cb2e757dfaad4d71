"""Which voices ``yomiage serve`` serves: those the command line names, those installed in
the models folder, and whether that leaves it anything to serve.

The command line's voices must load. An installed voice is only a file in the
models folder: one that does not load is skipped with a line saying why, so a
bad file never stops a start; but a server left with no voice at all, and no way
for a client to install one, refuses to start rather than say it is ready with
nothing to serve. The start line names the installed voices it loaded beside the
command line's (they are loaded whatever else is named).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yomiage.cli.engine_options import voice_sources
from yomiage.errors import ModelLoadError

if TYPE_CHECKING:
    from yomiage.aivmx.installed import InstalledVoice
    from yomiage.engine_spec import VoiceSource
    from yomiage.server.config import ServerConfig
    from yomiage.server.engine.load_journal import LoadJournal
    from yomiage.server.engine.service import LocalService, VoiceCard
    from yomiage.server.engine.worker import WorkerService

log = logging.getLogger("yomiage.serve")


def named_voices(args: argparse.Namespace) -> tuple[VoiceSource, ...]:
    """The ``--voice`` and ``--model`` voices (none named: none)."""
    return voice_sources(args) if (args.voice or args.model) else ()


def check_some_voice(args: argparse.Namespace, installed: Sequence[InstalledVoice]) -> None:
    """A server needs a voice to serve, or a way to get one: voices installed, or the
    model API's write mode to install them (it then starts with none, as AivisSpeech)."""
    if args.voice or args.model or installed or (args.models_dir and args.model_api == "write"):
        return
    try:
        voice_sources(args)  # "name a voice", with the flags that do
    except ValueError as exc:
        raise ValueError(f"{exc}, or install voices while serving (--model-api write)") from None


def installed_at_start(args: argparse.Namespace) -> tuple[InstalledVoice, ...]:
    """The voices installed in the models folder, named beside the command line's."""
    from yomiage.aivmx.installed import installed_voices

    if not args.models_dir:
        return ()
    taken = [name for name, _ in named_voices(args)]
    return installed_voices(Path(args.models_dir), taken)


def engine_service(flags: dict[str, Any]) -> LocalService:
    """The engine of ``serve``'s flags, prepared and warmed (what the worker process runs).

    Warming up here, before the port opens, means a worker restarted after a
    crash is warm too before it takes requests. The command line's voices must
    load; an installed voice that does not is skipped with one log line (a start
    must never fail, nor a restart loop, on a file in the models folder), and so
    is one that a previous worker of this server died loading.
    """
    from yomiage.cli.engine_options import engine_spec
    from yomiage.limits import Limits
    from yomiage.server.engine import request_logs
    from yomiage.server.engine.load_journal import LoadJournal
    from yomiage.server.engine.service import warmed_service

    request_logs.install()  # the engine warns per sentence: once per request is enough
    args = argparse.Namespace(**flags)
    limits = Limits(max_request_seconds=args.max_audio_seconds)
    spec = engine_spec(args, limits=limits, voices=named_voices(args))
    journal = LoadJournal(Path(args.load_journal)) if args.load_journal else None
    service = warmed_service(spec, warm=not args.no_warmup)
    try:
        load_installed(service, args.installed_voices, warm=not args.no_warmup, journal=journal)
    except BaseException:
        service.tts.close()
        raise
    return service


def load_installed(
    service: LocalService,
    voices: Sequence[InstalledVoice],
    *,
    warm: bool,
    journal: LoadJournal | None = None,
) -> None:
    """Load the installed voices beside the command line's. One that is the same model
    as a command-line voice is left to it; one that fails to load or to warm up, or
    whose VOICEVOX styles would take another voice's ids, is skipped and logged; so
    is one that ``journal`` says a worker died loading."""
    from yomiage.errors import ModelLoadError
    from yomiage.server.voicevox.synthesis import VoxCatalog

    held = {c.credits.uuid.lower(): n for n, c in service.voices.items() if c.credits}
    for voice in voices:
        if voice.uuid in held:
            log.info("%s is model %s, given on the command line as %r; not loaded twice",
                     voice.path, voice.uuid, held[voice.uuid])  # fmt: skip
            continue
        if journal is not None and journal.crashed(voice.path):
            continue  # said when the journal was opened
        try:
            with journal.loading(voice.path) if journal else contextlib.nullcontext():
                service.load_voice(voice.name, str(voice.path), warm=warm)
        except Exception as exc:
            log.warning("skipping installed voice %s: %s", voice.path, exc)
            continue
        try:
            VoxCatalog.of(service.voices.values())
        except ModelLoadError as exc:  # two styles with one VOICEVOX id
            service.unload_voice(voice.name)
            log.warning("skipping installed voice %s: %s", voice.path, exc)


def start_worker(
    factory: Callable[[], LocalService], *, journal: Path, installed: int, worker_timeout: float
) -> WorkerService:
    """The worker process, started again while each failed start died loading one of the
    ``installed`` voices: the next start skips that one (see ``journal``), so a bad
    file in the models folder costs a start, at most once per installed voice."""
    from yomiage.server.engine.liveness import Liveness
    from yomiage.server.engine.load_journal import died_loading
    from yomiage.server.engine.worker import WorkerService, WorkerStartError

    liveness = Liveness(call_timeout=worker_timeout)
    for _ in range(installed):
        try:
            return WorkerService(factory, liveness=liveness)
        except WorkerStartError:
            if not died_loading(journal):
                raise
            log.warning("the synthesis worker died loading an installed voice; "
                        "starting it again without that voice")  # fmt: skip
    return WorkerService(factory, liveness=liveness)


def can_install(config: ServerConfig) -> bool:
    """Whether clients may install voices into this server (``POST /aivm_models/install``)."""
    writable = config.model_api == "write" and config.models_dir is not None
    return writable and "voicevox" in config.apis


def _not_loaded(
    voices: Mapping[str, VoiceCard], installed: Sequence[InstalledVoice]
) -> list[InstalledVoice]:
    """The installed voices the engine skipped (one that is the same model as a
    command-line voice is served by it, so it is not among them)."""
    served = {c.credits.uuid.lower() for c in voices.values() if c.credits is not None}
    return [v for v in installed if v.name not in voices and v.uuid not in served]


def check_something_to_serve(
    voices: Mapping[str, VoiceCard], installed: Sequence[InstalledVoice], config: ServerConfig
) -> None:
    """A server that loaded no voice must be one clients can install voices into; any
    other would answer every request 404 while ``/ready`` said 200 (installed voices
    that all failed to load)."""
    if voices or can_install(config):
        return
    skipped = _not_loaded(voices, installed)
    where = f" in {config.models_dir}" if config.models_dir is not None else ""
    raise ModelLoadError(
        f"no voice loaded: the {len(skipped)} installed voice(s){where} could not be loaded "
        "(the lines above say why); name a voice: --voice NAME or --model PATH, or install "
        "voices while serving (--model-api write)"
    )


def serving_line(
    voices: Mapping[str, VoiceCard], installed: Sequence[InstalledVoice], config: ServerConfig
) -> tuple[str, str]:
    """What the start line says is served (the command line's voices, then the installed
    ones with their folder: an installed voice is loaded whatever else is named), and a
    note on the installed voices that were not loaded (empty if none)."""
    mine = {v.name for v in installed}
    named = [name for name in voices if name not in mine]
    loaded = [name for name in voices if name in mine]
    parts = [", ".join(named)] if named else []
    if loaded:
        parts.append(f"{', '.join(loaded)} (installed in {config.models_dir})")
    skipped = len(_not_loaded(voices, installed))
    note = f"; {skipped} installed voice(s) not loaded, see above" if skipped else ""
    if parts:
        return ", ".join(parts), note
    return "no voice yet (install one: POST /aivm_models/install; docs/voicevox.md)", note


def check_voices(args: argparse.Namespace) -> None:
    """Fail in one line, before a worker starts, for what the flags alone show: no voice
    named, an unknown catalog name, a local path that does not exist, and (offline) a
    voice that is not in the cache. Loading may still fail; the worker then says why."""
    from yomiage.errors import SourceNotFoundError
    from yomiage.sources import LocalSource, lookup, offline_mode, parse, resolve_name

    offline = offline_mode(True if args.offline else None)
    for name, source in named_voices(args):
        src = parse(source) if source is not None else None
        if isinstance(src, LocalSource):
            if not src.path.expanduser().exists():
                raise SourceNotFoundError(
                    f"voice {name!r}: no such folder or file {src.path}", source=str(source)
                )
        elif offline:
            resolve_name(
                source or name,
                format="sbv2" if args.device.startswith("cuda") else "onnx",
                cache_dir=args.cache_dir,
                offline=True if args.offline else None,  # None: the environment's reason
            )
        elif source is None:
            lookup(name)
