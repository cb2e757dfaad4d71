"""``yomiage serve``'s flags: network and safety limits, the APIs, voices on the wire,
the run-time voice store and the engine (:mod:`yomiage.cli.engine_options`)."""

from __future__ import annotations

import argparse
import os

from yomiage.cli.engine_options import add_engine_arguments


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    """Every flag of ``yomiage serve``."""
    net = p.add_argument_group("network and safety")
    net.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    net.add_argument(
        "--port",
        type=int,
        default=None,
        help="port (default 8000, or 10101 with --compat aivisspeech; 0: any free)",
    )
    net.add_argument(
        "--api-key",
        metavar="KEY",
        default=os.environ.get("YOMIAGE_API_KEY"),
        help="require 'Authorization: Bearer KEY' (default: $YOMIAGE_API_KEY; none if unset)",
    )
    net.add_argument(
        "--max-chars",
        type=int,
        default=4096,
        metavar="N",
        help="longest input in characters, more gets 413 (default 4096)",
    )
    net.add_argument(
        "--max-concurrency",
        type=int,
        default=2,
        metavar="N",
        help="requests synthesized at once (default 2)",
    )
    net.add_argument(
        "--max-queue",
        type=int,
        default=16,
        metavar="N",
        help="requests waiting for a slot; more get 429 (default 16)",
    )
    net.add_argument(
        "--queue-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="longest wait for a slot before 503 (default 60 s)",
    )
    net.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow browser calls from ORIGIN (repeatable; local apps are allowed anyway)",
    )
    net.add_argument(
        "--cors-local-apps",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="allow pages on localhost/127.0.0.1 and desktop editors (app://), as VOICEVOX "
        "does (default on; --no-cors-local-apps to refuse them)",
    )
    net.add_argument(
        "--dict-api",
        choices=["off", "read", "write"],
        default="read",
        help="user dictionary routes: off, read (list only; default) or write",
    )
    models = p.add_argument_group("voices installed while serving (AivisSpeech's /aivm_models)")
    models.add_argument(
        "--models-dir",
        metavar="DIR",
        help="the folder of installed AIVMX voices, all loaded at start (default: "
        "$YOMIAGE_MODELS_DIR, else models/ in the user data folder)",
    )
    models.add_argument(
        "--model-api",
        choices=["off", "read", "write"],
        default="read",
        help="/aivm_models routes: off, read (list, load and unload; default) or write "
        "(install, update and uninstall too)",
    )
    models.add_argument(
        "--max-upload-mb",
        type=float,
        default=1024.0,
        metavar="MB",
        help="largest voice file an install may upload or download (default 1024 MB)",
    )
    net.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name requests may carry, e.g. the name a proxy passes on (repeatable; "
        "default: localhost and the loopback addresses on a loopback bind, any otherwise)",
    )
    net.add_argument(
        "--max-audio-seconds",
        type=float,
        default=900.0,
        metavar="S",
        help="most audio one request may make (default 900); a sentence at most 180",
    )
    net.add_argument(
        "--header-timeout",
        type=float,
        default=20.0,
        metavar="S",
        help="a request head must arrive within S seconds, else 408 and closed (default 20)",
    )
    net.add_argument(
        "--body-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="a request body must arrive within S seconds, else 408 (default 60)",
    )
    net.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        metavar="N",
        help="open connections at most; a new one closes the oldest idle one (default 1000, "
        "lowered to fit the open-file limit)",
    )
    net.add_argument(
        "--worker-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="a worker call may take S seconds plus 1 s per character of its text before the "
        "worker counts as hung and is restarted (default 60)",
    )
    net.add_argument("--no-playground", action="store_true", help="no page at /")
    net.add_argument(
        "--api",
        default="openai,voicevox",
        metavar="LIST",
        help="client APIs besides /tts: openai (/v1/...), voicevox (VOICEVOX's engine routes; "
        "docs/voicevox.md); default both",
    )
    net.add_argument(
        "--compat",
        choices=["voicevox", "aivisspeech"],
        default="voicevox",
        help="whose meanings the VOICEVOX routes give an AudioQuery's fields: voicevox "
        "(default) or aivisspeech (AivisSpeech Engine's: intonationScale is the style "
        "strength, tempoDynamicsScale the tempo dynamics; docs/voicevox.md)",
    )
    net.add_argument(
        "--presets",
        metavar="FILE",
        help="keep the VOICEVOX presets in FILE (JSON, written on each change; default: memory)",
    )
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
    voices = p.add_argument_group("voices on the wire")
    voices.add_argument(
        "--default-voice",
        metavar="NAME",
        help="for OpenAI voice names and /tts without a voice (default: first)",
    )
    voices.add_argument(
        "--voice-alias",
        action="append",
        default=[],
        metavar="ALIAS=NAME",
        help="a name requests may use for a voice, e.g. alloy=jvnv-F1-jp",
    )
    voices.add_argument(
        "--no-warmup", action="store_true", help="no warm-up sentence before the port opens"
    )
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
