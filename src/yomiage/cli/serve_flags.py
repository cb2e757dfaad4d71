"""``yomiage serve``'s flags: network and safety limits, the APIs, voices on the wire,
the run-time voice store and the engine (:mod:`yomiage.cli.engine_options`).

Every flag that sets a :class:`~yomiage.server.ServerConfig` field is read from
that field's declaration (:func:`~yomiage.cli.setting_flags.add_flag`): its
default, bounds and help are written once, in :mod:`yomiage.server.config`.
The rest (where to listen, the worker, logging) belong to this command alone.
"""

from __future__ import annotations

import argparse

from yomiage.cli.engine_options import add_engine_arguments
from yomiage.cli.setting_flags import add_flag
from yomiage.server.config import COMPAT_PORTS, WORKER_CALL_TIMEOUT, ServerConfig


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    """Every flag of ``yomiage serve``."""
    net = p.add_argument_group("network and safety")
    net.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    net.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port (default {COMPAT_PORTS['voicevox']}, or {COMPAT_PORTS['aivisspeech']} with "
        "--compat aivisspeech; 0: any free)",
    )
    for name in ("api_key", "max_input_chars", "max_concurrency", "max_queue", "queue_timeout",
                 "cors_origins", "cors_local_apps", "dict_api"):  # fmt: skip
        add_flag(net, ServerConfig, name)
    models = p.add_argument_group("voices installed while serving (AivisSpeech's /aivm_models)")
    for name in ("models_dir", "model_api", "max_upload_bytes", "install_timeout"):
        add_flag(models, ServerConfig, name)
    # empty: the names of a loopback bind, else any (yomiage.cli.serve.server_config)
    add_flag(net, ServerConfig, "allowed_hosts", default=[])
    for name in ("max_audio_seconds", "header_timeout", "body_timeout", "send_timeout",
                 "max_connections"):  # fmt: skip
        add_flag(net, ServerConfig, name)
    net.add_argument(
        "--worker-timeout",
        type=float,
        default=WORKER_CALL_TIMEOUT,
        metavar="S",
        help="a worker call may take S seconds plus 1 s per character of its text before the "
        "worker counts as hung and is restarted (default %(default)g)",
    )
    for name in ("playground", "apis", "compat", "presets_path"):
        add_flag(net, ServerConfig, name)
    net.add_argument(
        "--in-process",
        action="store_true",
        help="run the engine in the server's own process (no crash protection)",
    )
    net.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one line per request on stderr (default on; --no-access-log for none)",
    )
    net.add_argument(
        "--access-log-query",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="show each request's query string in the access log (default off: VOICEVOX's "
        "routes carry the text read there, shown as ?…)",
    )
    voices = p.add_argument_group("voices on the wire")
    for name in ("default_voice", "voice_aliases", "warmup"):
        add_flag(voices, ServerConfig, name)
    p.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more logging"
    )
    add_engine_arguments(p, many=True)
    p.add_argument(
        "--use_gpu",
        "--use-gpu",
        dest="use_gpu",
        action="store_true",
        help="run the voices on the GPU (--device cuda); an error where PyTorch sees no CUDA "
        "device. The VOICEVOX editor passes it in GPU mode",
    )
