"""What the server allows (:class:`ServerConfig`): each setting declared once, with its flag.

Plain data with no FastAPI in sight (``yomiage.server`` imports its app only when
asked for it): ``yomiage serve``'s flags and the Ray app's arguments are read
from these declarations (:mod:`yomiage.settings`) before anything of the server
is imported, and the command line must start without the ``[server]`` extra.
"""

# setting() is dataclasses.field carrying the declaration; ruff knows only field().
# ruff: noqa: RUF009
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal, get_args

from yomiage.limits import DEFAULT_MAX_REQUEST_SECONDS, DEFAULT_MAX_SENTENCE_SECONDS
from yomiage.settings import check, names, non_empty, setting

DictAPI = Literal["off", "read", "write"]
ModelAPI = Literal["off", "read", "write"]
DEFAULT_MAX_UPLOAD_BYTES = 1 << 30
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# A worker call may take this plus 1 s a character before the worker counts as hung
# (server/engine/liveness.py; `yomiage serve --worker-timeout`).
WORKER_CALL_TIMEOUT = 60.0
# Routes whose body is streamed to disk under their own limits, not read whole by the guard.
STREAMED_BODY_PATHS = frozenset({"/aivm_models/install"})
# OpenAI's voice names; unless aliased, each means the default voice.
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
    "verse", "marin", "cedar",
)  # fmt: skip
MODEL_IDS = ("yomiage", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
APIS = ("openai", "voicevox")
# Whose meanings a VOICEVOX AudioQuery's fields have (docs/voicevox.md, "--compat
# aivisspeech"), and the port each engine listens on unless told otherwise.
Compat = Literal["voicevox", "aivisspeech"]
COMPAT_PORTS: Mapping[str, int] = MappingProxyType({"voicevox": 8000, "aivisspeech": 10101})
# Pages served from this machine, which VOICEVOX lets call its engine by default.
LOCAL_APP_ORIGINS = r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]+)?$"


def alias_map(value: Mapping[str, str] | Iterable[str]) -> dict[str, str]:
    """``alias -> voice`` from a mapping or from ``ALIAS=NAME`` pairs (``--voice-alias``)."""
    if isinstance(value, Mapping):
        return dict(value)
    out = {}
    for pair in value:
        alias, sep, name = pair.partition("=")
        if not sep or not alias or not name:
            raise ValueError(f"a voice alias is ALIAS=NAME (alloy=jvnv-F1-jp), not {pair!r}")
        out[alias] = name
    return out


def _path(value: str | Path | None) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True)
class ServerConfig:
    """What the server allows.

    ``api_key``: when set, every route but ``/``, ``/health`` and ``/ready``
    needs ``Authorization: Bearer <key>``. ``max_input_chars``: longer input
    gets 413. ``max_concurrency`` requests synthesize at once, taking turns on the
    engine call by call (so a short one is not held behind long ones), and up to
    ``max_queue`` wait (at most ``queue_timeout`` s); more get 429.
    ``cors_origins``: browser origins allowed to call the API, besides the
    local apps that ``cors_local_apps`` allows (VOICEVOX's ``localapps``
    default: pages on ``localhost``/``127.0.0.1`` and desktop editors'
    ``app://`` origin; requests without an Origin are never affected).
    ``dict_api``: the user-dictionary routes are ``off``, ``read`` (list
    only, the default) or ``write`` (add and remove too).
    ``voice_aliases`` maps request voice names (e.g. OpenAI's ``alloy``) to
    loaded voices; ``default_voice`` is used for OpenAI names not aliased and
    for ``/tts`` without a voice (default: the first voice loaded).
    ``warmup``: synthesize one sentence per voice at start-up before ``/ready``.
    ``allowed_hosts``: Host header names the server answers to (``"*"``: any).
    The default, loopback names only, keeps a page on another site from
    reaching a keyless server on 127.0.0.1 by pointing its own name there (DNS
    rebinding); behind a proxy that passes its public Host, add that name.
    ``apis``: which client APIs to serve besides ``/tts``: ``openai``
    (``/v1/...``) and ``voicevox`` (VOICEVOX's engine routes, docs/voicevox.md);
    ``presets_path``: where the VOICEVOX presets are kept (default: memory only).
    ``compat``: whose meanings the VOICEVOX routes give an AudioQuery's fields:
    ``voicevox`` (VOICEVOX's) or ``aivisspeech`` (AivisSpeech Engine's:
    ``intonationScale`` is the style strength, ``tempoDynamicsScale`` the SDP
    ratio, pauses the voice's own) and which engine ``/engine_manifest`` resembles.
    ``models_dir``: the folder of AIVMX voices installed at run time through
    AivisSpeech's ``/aivm_models`` routes (None: no such routes); ``model_api``
    guards them like ``dict_api``: ``off``, ``read`` (list, load and unload: the
    default) or ``write`` (install, update and uninstall too); an upload may be
    at most ``max_upload_bytes``, and an install's upload or download must end
    within ``install_timeout`` s (the change lock is taken only after it).
    ``max_audio_seconds``: the audio one VOICEVOX request may make, silences
    included, checked before it is made (None: the in-process engine's limit,
    else 900 s); the engine checks its own (:class:`~yomiage.limits.Limits`).
    Slow clients: a request head must arrive within ``header_timeout`` s of
    the connection (or of the last response), a body within ``body_timeout``
    s of its head (408 otherwise), and at most ``max_connections`` are open
    at once (the oldest idle one is closed for a new one), so stalled sockets
    cannot use up the file descriptors (docs/server.md, "Limits and timeouts");
    a client that takes none of its response for ``send_timeout`` s while the
    server waits to send is disconnected, so it holds no slot and no memory.

    Each field is declared once with its ``yomiage serve`` flag and bounds
    (:func:`~yomiage.settings.setting`); build one from flag or argument values
    with :func:`yomiage.settings.from_flags`.
    """

    api_key: str | None = setting(
        None, "--api-key",
        "require 'Authorization: Bearer KEY' (default: $YOMIAGE_API_KEY; none if unset)",
        metavar="KEY", env="YOMIAGE_API_KEY", parse=non_empty,
    )  # fmt: skip
    max_input_chars: int = setting(
        4096, "--max-chars", "longest input in characters, more gets 413 (default %(default)s)",
        metavar="N", ge=1,
    )  # fmt: skip
    max_concurrency: int = setting(
        8, "--max-concurrency",
        "requests synthesized at once, sharing the engine call by call (default %(default)s)",
        metavar="N", ge=1,
    )  # fmt: skip
    max_queue: int = setting(
        16, "--max-queue", "requests waiting for a slot; more get 429 (default %(default)s)",
        metavar="N", ge=0,
    )  # fmt: skip
    queue_timeout: float = setting(
        60.0, "--queue-timeout", "longest wait for a slot before 503 (default %(default)g s)",
        metavar="S", gt=0,
    )  # fmt: skip
    cors_origins: tuple[str, ...] = setting(
        (), "--cors-origin",
        "allow browser calls from ORIGIN (repeatable; local apps are allowed anyway)",
        metavar="ORIGIN", repeat=True, parse=names,
    )  # fmt: skip
    cors_local_apps: bool = setting(
        True, "--cors-local-apps",
        "allow pages on localhost/127.0.0.1 and desktop editors (app://), as VOICEVOX does "
        "(default on; --no-cors-local-apps to refuse them)",
    )  # fmt: skip
    dict_api: DictAPI = setting(
        "read", "--dict-api",
        "user dictionary routes: off, read (list only) or write (add and remove too); "
        "default %(default)s",
        choices=get_args(DictAPI),
    )  # fmt: skip
    voice_aliases: Mapping[str, str] = setting(
        MappingProxyType({}), "--voice-alias",
        "a name requests may use for a voice, e.g. alloy=jvnv-F1-jp",
        metavar="ALIAS=NAME", repeat=True, parse=alias_map,
        factory=lambda: MappingProxyType({}),
    )  # fmt: skip
    default_voice: str | None = setting(
        None, "--default-voice",
        "for OpenAI voice names and /tts without a voice (default: first)", metavar="NAME",
    )  # fmt: skip
    warmup: bool = setting(True, "--no-warmup", "no warm-up sentence before the port opens")
    playground: bool = setting(True, "--no-playground", "no page at /")
    allowed_hosts: tuple[str, ...] = setting(
        LOOPBACK_HOSTS, "--allowed-host",
        "a Host name requests may carry, e.g. the name a proxy passes on (repeatable; default: "
        "localhost and the loopback addresses on a loopback bind, any otherwise)",
        metavar="NAME", repeat=True, parse=names,
    )  # fmt: skip
    apis: tuple[str, ...] = setting(
        APIS, "--api",
        "client APIs besides /tts: openai (/v1/...), voicevox (VOICEVOX's engine routes; "
        "docs/voicevox.md); default %(default)s",
        metavar="LIST", parse=names,
    )  # fmt: skip
    presets_path: Path | None = setting(
        None, "--presets",
        "keep the VOICEVOX presets in FILE (JSON, written on each change; default: memory)",
        metavar="FILE", parse=_path,
    )  # fmt: skip
    max_audio_seconds: float | None = setting(
        None, "--max-audio-seconds",
        "most audio one request may make (default %(default)g); a sentence at most "
        f"{DEFAULT_MAX_SENTENCE_SECONDS:g}",
        metavar="S", gt=0, flag_default=DEFAULT_MAX_REQUEST_SECONDS,
    )  # fmt: skip
    header_timeout: float = setting(
        20.0, "--header-timeout",
        "a request head must arrive within S seconds, else 408 and closed (default %(default)g)",
        metavar="S", gt=0,
    )  # fmt: skip
    body_timeout: float = setting(
        60.0, "--body-timeout",
        "a request body must arrive within S seconds, else 408 (default %(default)g)",
        metavar="S", gt=0,
    )  # fmt: skip
    max_connections: int = setting(
        1000, "--max-connections",
        "open connections at most; a new one closes the oldest idle one (default %(default)s, "
        "lowered to fit the open-file limit)",
        metavar="N", ge=2,
    )  # fmt: skip
    send_timeout: float = setting(
        60.0, "--send-timeout",
        "a client must take some of its response within S seconds whenever the server "
        "waits to send, else the connection is closed and its synthesis stopped "
        "(default %(default)g)",
        metavar="S", gt=0,
    )  # fmt: skip
    compat: Compat = setting(
        "voicevox", "--compat",
        "whose meanings the VOICEVOX routes give an AudioQuery's fields: voicevox or "
        "aivisspeech (AivisSpeech Engine's: intonationScale is the style strength, "
        "tempoDynamicsScale the tempo dynamics; docs/voicevox.md); default %(default)s",
        choices=get_args(Compat),
    )  # fmt: skip
    models_dir: Path | None = setting(
        None, "--models-dir",
        "the folder of installed AIVMX voices, all loaded at start (default: "
        "$YOMIAGE_MODELS_DIR, else models/ in the user data folder)",
        metavar="DIR", parse=_path,
    )  # fmt: skip
    model_api: ModelAPI = setting(
        "read", "--model-api",
        "/aivm_models routes: off, read (list, load and unload) or write (install, update and "
        "uninstall too); default %(default)s",
        choices=get_args(ModelAPI),
    )  # fmt: skip
    max_upload_bytes: int = setting(
        DEFAULT_MAX_UPLOAD_BYTES, "--max-upload-mb",
        "largest voice file an install may upload or download (default %(default)g MB)",
        metavar="MB", scale=1 << 20, ge=1,
    )  # fmt: skip
    install_timeout: float = setting(
        1800.0, "--install-timeout",
        "an install's upload or download must end within S seconds, else 408 (an upload) or "
        "504 (a download) and nothing is kept (default %(default)g)",
        metavar="S", gt=0,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check(self)  # the declared bounds and choices
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("an empty API key would let everyone in; leave it unset instead")
        unknown = set(self.apis) - set(APIS)
        if unknown:
            raise ValueError(f"unknown API {sorted(unknown)[0]!r}; choose from {', '.join(APIS)}")
        if not self.allowed_hosts or not all(h.strip() for h in self.allowed_hosts):
            raise ValueError("allowed_hosts needs at least one non-empty name (or '*')")

    def origin_allowed(self, origin: str) -> bool:
        """Whether a browser page on ``origin`` may call the API (what CORS allows)."""
        if "*" in self.cors_origins or origin in self.cors_origins:
            return True
        return self.cors_local_apps and (
            origin == "app://." or re.fullmatch(LOCAL_APP_ORIGINS, origin) is not None
        )

    @property
    def max_body_bytes(self) -> int:
        """Largest request body read: the input at 4 bytes a character, plus the other fields."""
        return self.max_input_chars * 4 + 64 * 1024

    @property
    def max_head_bytes(self) -> int:
        """Largest request head (request line and header fields; 431 past it): a text of
        ``max_input_chars`` in the URL at 12 bytes a character (VOICEVOX's routes take it
        there, percent-encoded: 4 UTF-8 bytes of 3 each), plus 16 KiB of header fields."""
        return self.max_input_chars * 12 + 16 * 1024
