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
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from yomiage.cli.serve_flags import add_serve_arguments
from yomiage.cli.serve_voices import (
    check_some_voice,
    check_something_to_serve,
    engine_service,
    installed_at_start,
    serving_line,
)
from yomiage.cli.serve_voices import check_voices as check_voices  # vvpp's, and tests'
from yomiage.cli.serve_voices import load_installed as load_installed
from yomiage.cli.serve_voices import start_worker as start_worker
from yomiage.engine_spec import EngineSpec
from yomiage.settings import declared, from_flags

if TYPE_CHECKING:
    from yomiage.server.config import ServerConfig

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
    with terminated_cleanly():
        # In-process, a crash takes the server down: there is no next worker to tell.
        journal_dir = (
            contextlib.nullcontext(None)
            if args.in_process
            else tempfile.TemporaryDirectory(prefix="yomiage-serve-")
        )
        with journal_dir as journal:
            args.load_journal = journal
            return _serve(args, config)
    return 128 + signal.SIGTERM  # terminated, where SIGTERM's own action is off


class _Terminated(BaseException):
    """SIGTERM, raised where the main thread is, so that what it holds is let go."""


@contextlib.contextmanager
def terminated_cleanly() -> Iterator[None]:
    """SIGTERM unwinds the block as Ctrl-C does (its ``with`` and ``finally`` clauses
    run: the worker is stopped, the temporary folder removed), then ends the process
    by SIGTERM, as a service manager expects. Python's default ends it at once and
    left an empty ``yomiage-serve-*`` folder in TMPDIR; uvicorn, which takes the signal
    while it serves, sends it again once it has stopped, to this handler."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    terminated = False
    try:
        yield
    except _Terminated:
        terminated = True
    finally:
        signal.signal(signal.SIGTERM, previous)
    if terminated:
        sys.stderr.flush()
        signal.raise_signal(signal.SIGTERM)  # with the handler before ours (the default)


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
        check_something_to_serve(service.voices, args.installed_voices, config)
        app = create_app(service, config, cache_dir=args.cache_dir)
        from yomiage.cli.runtime_info import log_voice_runtimes  # what runs each voice (-v)
        from yomiage.engine_spec import QUANTIZE

        runtimes = {name: card.runtime for name, card in service.voices.items()}
        log_voice_runtimes(runtimes, args.threads, QUANTIZE[args.quantize])
        sock = bind(args.host, listen_port(args))
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        serving, skipped = serving_line(service.voices, args.installed_voices, config)
        print(
            f"yomiage serve: {serving} on http://{shown}:{port}/ "
            f"(loaded in {time.perf_counter() - started:.1f} s{skipped}; Ctrl-C stops)",
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
            from yomiage.server import access_log

            logging.getLogger(access_log.ACCESS_LOGGER).setLevel(min(level, logging.INFO))
            access_log.install(query=args.access_log_query)
        server.run(sockets=[sock])
    finally:
        service.close()
        tts = getattr(service, "tts", None)
        if tts is not None:
            tts.close()
    return 0
