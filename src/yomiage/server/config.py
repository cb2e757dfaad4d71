"""Server settings: safe defaults, every one a ``yomiage serve`` flag (docs/server.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

DictAPI = Literal["off", "read", "write"]
ModelAPI = Literal["off", "read", "write"]
# Routes whose body is streamed to disk under their own limits, not read whole by the guard.
STREAMED_BODY_PATHS = frozenset({"/aivm_models/install"})
DEFAULT_MAX_UPLOAD_BYTES = 1 << 30
# OpenAI's voice names; unless aliased, each means the default voice.
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
    "verse", "marin", "cedar",
)  # fmt: skip
MODEL_IDS = ("yomiage", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


APIS = ("openai", "voicevox")
# Whose meanings a VOICEVOX AudioQuery's fields have (docs/voicevox.md, "--compat
# aivisspeech"), and the port each engine listens on unless told otherwise.
Compat = Literal["voicevox", "aivisspeech"]
COMPAT_PORTS: Mapping[str, int] = MappingProxyType({"voicevox": 8000, "aivisspeech": 10101})
# Pages served from this machine, which VOICEVOX lets call its engine by default.
LOCAL_APP_ORIGINS = r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]+)?$"


@dataclass(frozen=True)
class ServerConfig:
    """What the server allows.

    ``api_key``: when set, every route but ``/``, ``/health`` and ``/ready``
    needs ``Authorization: Bearer <key>``. ``max_input_chars``: longer input
    gets 413. ``max_concurrency`` requests synthesize at once and up to
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
    at most ``max_upload_bytes``.
    The audio a request may make is bounded by the engine's
    :class:`~yomiage.limits.Limits` (``yomiage serve --max-audio-seconds``).
    Slow clients: a request head must arrive within ``header_timeout`` s of
    the connection (or of the last response), a body within ``body_timeout``
    s of its head (408 otherwise), and at most ``max_connections`` are open
    at once (the oldest idle one is closed for a new one), so stalled sockets
    cannot use up the file descriptors (docs/server.md, "Limits and timeouts").
    """

    api_key: str | None = None
    max_input_chars: int = 4096
    max_concurrency: int = 2
    max_queue: int = 16
    queue_timeout: float = 60.0
    cors_origins: tuple[str, ...] = ()
    cors_local_apps: bool = True
    dict_api: DictAPI = "read"
    voice_aliases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    default_voice: str | None = None
    warmup: bool = True
    playground: bool = True
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    apis: tuple[str, ...] = ("openai", "voicevox")
    presets_path: Path | None = None  # VOICEVOX presets file (None: kept in memory)
    # Audio one VOICEVOX request may make, silences included, checked before it is made
    # (None: the in-process engine's limit, else 900 s); the engine checks its own.
    max_audio_seconds: float | None = None
    header_timeout: float = 20.0
    body_timeout: float = 60.0
    max_connections: int = 1000
    compat: Compat = "voicevox"
    models_dir: Path | None = None
    model_api: ModelAPI = "read"
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES

    def __post_init__(self) -> None:
        if self.max_audio_seconds is not None and not self.max_audio_seconds > 0:
            raise ValueError("max_audio_seconds must be positive (or None)")
        if self.max_input_chars < 1:
            raise ValueError("max_input_chars must be at least 1")
        if self.max_concurrency < 1 or self.max_queue < 0 or self.queue_timeout <= 0:
            raise ValueError("need max_concurrency >= 1, max_queue >= 0, queue_timeout > 0")
        for name in ("dict_api", "model_api"):
            if getattr(self, name) not in ("off", "read", "write"):
                raise ValueError(f"{name} must be off, read or write, not {getattr(self, name)!r}")
        if self.max_upload_bytes < 1:
            raise ValueError("max_upload_bytes must be positive")
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("an empty API key would let everyone in; leave it unset instead")
        unknown = set(self.apis) - set(APIS)
        if unknown:
            raise ValueError(f"unknown API {sorted(unknown)[0]!r}; choose from {', '.join(APIS)}")
        if self.header_timeout <= 0 or self.body_timeout <= 0 or self.max_connections < 2:
            raise ValueError("need header_timeout > 0, body_timeout > 0, max_connections >= 2")
        if self.compat not in COMPAT_PORTS:
            raise ValueError(f"compat must be {' or '.join(COMPAT_PORTS)}, not {self.compat!r}")
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
