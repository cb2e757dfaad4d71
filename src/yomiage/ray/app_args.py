"""The arguments of the Ray Serve application, checked, and what they turn into.

``serve run yomiage.ray:app model=hf://owner/repo/voice threads=2`` passes
strings; a ``serve`` config file's ``args:`` passes YAML values. Both arrive
here, so lists also accept comma-separated strings. The names follow
``yomiage serve``'s flags, so one page (docs/server.md) explains both, and
the arguments become the same :class:`~yomiage.EngineSpec` and
:class:`~yomiage.server.ServerConfig` that command builds.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yomiage.engine_spec import QUANTIZE, EngineSpec, parse_voices
from yomiage.limits import Limits
from yomiage.server.config import APIS, LOOPBACK_HOSTS, ServerConfig

# How long Serve waits for a replica's own health check before replacing it.
HEALTH_CHECK_PERIOD_S = 10.0
HEALTH_CHECK_TIMEOUT_S = 30.0


def _listed(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class AppArgs(BaseModel):
    """Everything ``yomiage.ray:app`` takes (docs/scale.md explains each)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # voices and engine, as `yomiage serve`
    voice: list[str] = Field(default_factory=list)
    model: list[str] = Field(default_factory=list)
    bert: str | None = None
    threads: int = Field(1, ge=1, le=256)
    quantize: Literal["q8", "q4", "none"] = "q8"
    decoder: Literal["auto", "fp32", "bf16", "int8"] = "auto"
    reading: Literal["natural", "sbv2"] = "natural"
    cache_dir: str | None = None
    offline: bool = False
    user_dict: str | None = None
    # requests
    max_chars: int = Field(4096, ge=1)
    max_audio_seconds: float = Field(900.0, gt=0)
    max_concurrency: int = Field(2, ge=1)
    queue_timeout: float = Field(60.0, gt=0)
    api_key: str | None = None
    allowed_host: list[str] = Field(default_factory=lambda: list(LOOPBACK_HOSTS))
    cors_origin: list[str] = Field(default_factory=list)
    cors_local_apps: bool = True
    dict_api: Literal["off", "read"] = "read"
    api: list[str] = Field(default_factory=lambda: list(APIS))
    voice_alias: dict[str, str] = Field(default_factory=dict)
    default_voice: str | None = None
    playground: bool = True
    # replicas
    replicas: int | None = Field(None, ge=1)
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(4, ge=1)
    target_ongoing_requests: float | None = Field(None, gt=0)
    max_queued_requests: int = Field(64, ge=-1)

    _split = field_validator("voice", "model", "allowed_host", "cors_origin", "api", mode="before")(
        _listed
    )

    @field_validator("voice_alias", mode="before")
    @classmethod
    def _aliases(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        out = {}
        for pair in _listed(value):
            alias, sep, name = pair.partition("=")
            if not sep or not alias or not name:
                raise ValueError(f"voice_alias takes ALIAS=NAME pairs, not {pair!r}")
            out[alias] = name
        return out

    @model_validator(mode="after")
    def _consistent(self) -> AppArgs:
        names = [name for name, _ in parse_voices(self.voice, self.model)]  # none, or twice
        for alias, target in {"default_voice": self.default_voice, **self.voice_alias}.items():
            if target is not None and target not in names:
                known = ", ".join(names)
                raise ValueError(f"{alias} names voice {target!r}; the voices are {known}")
        self.server_config()  # its own checks (APIs, hosts, key), before any replica starts
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) exceeds max_replicas ({self.max_replicas})"
            )
        return self

    def engine_spec(self) -> EngineSpec:
        """The engine every replica builds (one per replica, ``threads`` intra-op threads)."""
        return EngineSpec(
            voices=parse_voices(self.voice, self.model),
            bert_source=self.bert,
            threads=self.threads,
            bert_precision=QUANTIZE[self.quantize],
            decoder_precision=self.decoder,
            reading=self.reading,
            cache_dir=self.cache_dir,
            offline=self.offline,
            user_dictionary=self.user_dict,
            limits=Limits(max_request_seconds=self.max_audio_seconds),
        )

    def server_config(self) -> ServerConfig:
        """Each replica's app settings. The replica warms its voices before Serve marks it
        running, so the app itself skips warm-up; its queue holds only what Serve may
        send it (``max_ongoing_requests``), the rest waits in Serve's queue where any
        replica, a new one included, can take it."""
        return ServerConfig(
            api_key=self.api_key or os.environ.get("YOMIAGE_API_KEY") or None,
            max_input_chars=self.max_chars,
            max_concurrency=self.max_concurrency,
            max_queue=self.max_concurrency,
            queue_timeout=self.queue_timeout,
            cors_origins=tuple(self.cors_origin),
            cors_local_apps=self.cors_local_apps,
            dict_api=self.dict_api,
            voice_aliases=dict(self.voice_alias),
            default_voice=self.default_voice,
            warmup=False,
            playground=self.playground,
            allowed_hosts=tuple(self.allowed_host),
            apis=tuple(self.api),
            max_audio_seconds=self.max_audio_seconds,
        )

    def deployment_options(self) -> dict[str, Any]:
        """Serve's options for the deployment: CPUs, replicas, admission, health."""
        options: dict[str, Any] = {
            "ray_actor_options": {"num_cpus": self.threads},
            # the requests a replica runs plus as many waiting (its app's own queue)
            "max_ongoing_requests": 2 * self.max_concurrency,
            "max_queued_requests": self.max_queued_requests,
            "health_check_period_s": HEALTH_CHECK_PERIOD_S,
            "health_check_timeout_s": HEALTH_CHECK_TIMEOUT_S,
        }
        if self.replicas is not None:
            options["num_replicas"] = self.replicas
        else:
            options["autoscaling_config"] = {
                "min_replicas": self.min_replicas,
                "initial_replicas": max(1, self.min_replicas),
                "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests or self.max_concurrency,
            }
        return options
