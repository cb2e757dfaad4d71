"""``yomiage serve``: load voices, then answer HTTP on 127.0.0.1 unless told otherwise.

The engine runs in a supervised worker process by default
(:mod:`yomiage.server.engine.worker`): a crash in a native library costs the
requests in flight and a restart, never the server. ``--in-process`` keeps
it in the server's process (less memory, no protection).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import ipaddress
import logging
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yomiage.cli.engine_options import voice_sources
from yomiage.cli.serve_flags import add_serve_arguments
from yomiage.engine_spec import EngineSpec
from yomiage.settings import declared, from_flags

if TYPE_CHECKING:
    from yomiage.aivmx.installed import InstalledVoice
    from yomiage.engine_spec import VoiceSource
    from yomiage.server.config import ServerConfig
    from yomiage.server.engine.load_journal import LoadJournal
    from yomiage.server.engine.service import LocalService
    from yomiage.server.engine.worker import WorkerService

log = logging.getLogger("yomiage.serve")

EXAMPLES = """examples:
  yomiage serve --voice jvnv-F1-jp
  yomiage serve --model ./voices/mine --model narrator=hf://owner/repo/narrator --port 8080
  YOMIAGE_API_KEY=secret yomiage serve --voice jvnv-F1-jp --host 0.0.0.0 \\
      --voice-alias alloy=jvnv-F1-jp
  curl -s localhost:8000/v1/audio/speech -H 'Content-Type: application/json' \\
       -d '{"model":"tts-1","voice":"jvnv-F1-jp","input":"こんにちは。","response_format":"wav"}' \\
       -o hello.wav

Open http://127.0.0.1:8000/ for the playground; docs/server.md has the routes.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the HTTP server (OpenAI-compatible; needs yomiage[server])",
        description="Serve the voices over HTTP: OpenAI's /v1/audio/speech, /tts, a playground "
        "page at /, /health, /ready and /metrics.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_serve_arguments(p)
    p.set_defaults(func=run)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen_port(args: argparse.Namespace) -> int:
    """``--port``, else the port of the engine ``--compat`` stands in for (AivisSpeech's
    10101, where its clients look), else 8000. ``--port 0`` stays 0: any free port."""
    from yomiage.server.config import COMPAT_PORTS

    return int(args.port) if args.port is not None else COMPAT_PORTS[args.compat]


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, so the real port is known before serving (``--port 0``)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


# What the worker process needs of the flags: the engine's settings and the voices
# (the installed ones as found once at start, so that every worker start loads the same).
# With a worker process, ``load_journal`` is the folder where it records which installed
# voice it is loading (:mod:`yomiage.server.engine.load_journal`).
_ENGINE_FLAGS = (*(how.dest for how in declared(EngineSpec).values()), "voice", "model",
                 "max_audio_seconds", "no_warmup", "installed_voices",
                 "load_journal")  # fmt: skip


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The server settings the flags give (:func:`~yomiage.settings.from_flags`), but for
    what this command decides itself: the Host names (without ``--allowed-host``, those
    of a loopback bind, else any), no warm-up in the app (:func:`engine_service` warms
    before the port opens) and no more connections than the open-file limit allows."""
    from yomiage.server.config import LOOPBACK_HOSTS, ServerConfig
    from yomiage.server.runner import connection_cap

    hosts = tuple(args.allowed_host) or (LOOPBACK_HOSTS if _is_loopback(args.host) else ("*",))
    return from_flags(
        ServerConfig,
        vars(args),
        allowed_hosts=hosts,
        warmup=False,
        max_connections=connection_cap(args.max_connections),
    )


def models_dir(args: argparse.Namespace) -> Path | None:
    """The installed voices' folder: ``--models-dir``, else the per-user one, except with
    ``--model-api off`` and no ``--models-dir`` (then none: no voices are installed)."""
    from yomiage.aivmx.installed import default_models_dir

    if args.models_dir:
        return Path(args.models_dir).expanduser().absolute()
    return None if args.model_api == "off" else default_models_dir().absolute()


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
    from yomiage.server.engine.load_journal import LoadJournal
    from yomiage.server.engine.service import warmed_service

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


def gpu_device(device: str) -> str:
    """The device ``--use_gpu`` means: ``--device`` where it names a CUDA device, else
    "cuda". Where PyTorch sees none it is an error, never a quiet fall-back to the CPU:
    who asked for the GPU would otherwise not learn why synthesis is slow."""
    from yomiage.errors import MissingExtraError, ModelLoadError

    try:
        import torch
    except ImportError:
        raise MissingExtraError("--use_gpu", "torch", "torch") from None
    if not torch.cuda.is_available():
        raise ModelLoadError(
            "--use_gpu: PyTorch sees no CUDA device; run without it (CPU) or on a machine "
            "with an NVIDIA GPU and a CUDA build of PyTorch"
        )
    return device if device.startswith("cuda") else "cuda"


def run(args: argparse.Namespace) -> int:
    if args.use_gpu:
        args.device = gpu_device(args.device)
    folder = models_dir(args)
    args.models_dir = str(folder) if folder is not None else None
    check_voices(args)
    args.installed_voices = installed_at_start(args)
    check_some_voice(args, args.installed_voices)
    try:
        import python_multipart  # noqa: F401  (the [server] extra: said before anything loads)
        import uvicorn  # noqa: F401

        from yomiage.server import create_app  # noqa: F401  (imports FastAPI)
    except ImportError as exc:
        from yomiage.errors import MissingExtraError

        raise MissingExtraError("yomiage serve", "server", exc.name or "fastapi") from None
    config = server_config(args)
    if not _is_loopback(args.host) and config.api_key is None:
        log.warning(
            "listening on %s without an API key: anyone who can reach it may use it "
            "(set --api-key or YOMIAGE_API_KEY)",
            args.host,
        )
    # In-process, a crash takes the server down: there is no next worker to tell.
    journal_dir = (
        contextlib.nullcontext(None)
        if args.in_process
        else tempfile.TemporaryDirectory(prefix="yomiage-serve-")
    )
    with journal_dir as journal:
        args.load_journal = journal
        return _serve(args, config)


def _serve(args: argparse.Namespace, config: ServerConfig) -> int:
    from yomiage.server import create_app
    from yomiage.server.runner import Server, uvicorn_config

    flags = {name: getattr(args, name) for name in _ENGINE_FLAGS}
    started = time.perf_counter()
    if args.in_process:
        service: Any = engine_service(flags)
    else:
        print("yomiage serve: loading the voices in a worker process...", file=sys.stderr,
              flush=True)  # fmt: skip
        service = start_worker(
            functools.partial(engine_service, flags),
            journal=Path(args.load_journal),
            installed=len(args.installed_voices),
            worker_timeout=args.worker_timeout,
        )
    try:
        app = create_app(service, config, cache_dir=args.cache_dir)
        from yomiage.cli.runtime_info import log_voice_runtimes  # what runs each voice (-v)
        from yomiage.engine_spec import QUANTIZE

        runtimes = {name: card.runtime for name, card in service.voices.items()}
        log_voice_runtimes(runtimes, args.threads, QUANTIZE[args.quantize])
        sock = bind(args.host, listen_port(args))
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        serving = ", ".join(service.voices) or "no voice yet (install one: docs/voicevox.md)"
        print(
            f"yomiage serve: {serving} on http://{shown}:{port}/ "
            f"(loaded in {time.perf_counter() - started:.1f} s; Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )
        level = logging.getLogger().getEffectiveLevel()
        server = Server(
            uvicorn_config(
                app,
                config,
                log_level=logging.getLevelName(max(level, logging.INFO)).lower(),
                log_config=None,  # keep the CLI's logging set-up
                timeout_graceful_shutdown=5,
                access_log=args.access_log,
            ),
            app.state.yomiage,
        )
        if args.access_log:  # on by default, also where the level hides uvicorn's other logs
            logging.getLogger("uvicorn.access").setLevel(min(level, logging.INFO))
        server.run(sockets=[sock])
    finally:
        service.close()
        tts = getattr(service, "tts", None)
        if tts is not None:
            tts.close()
    return 0
