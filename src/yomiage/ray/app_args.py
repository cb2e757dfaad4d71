"""The arguments of the Ray Serve application, checked, and what they turn into.

``serve run yomiage.ray:app model=hf://owner/repo/voice threads=2`` passes
strings; a ``serve`` config file's ``args:`` passes YAML values. Both arrive
here, so lists also accept comma-separated strings. The names follow
``yomiage serve``'s flags, so one page (docs/server.md) explains both, and
the arguments become the same :class:`~yomiage.EngineSpec` and
:class:`~yomiage.server.ServerConfig` that command builds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from yomiage.engine_spec import EngineSpec, parse_voices
from yomiage.limits import Limits
from yomiage.server.config import ServerConfig, alias_map
from yomiage.settings import (
    declaration,
    field_default,
    flag_default,
    from_flags,
    one_of,
    renamed,
)

log = logging.getLogger(__name__)

# How long Serve waits for a replica's own health check before replacing it.
HEALTH_CHECK_PERIOD_S = 10.0
HEALTH_CHECK_TIMEOUT_S = 30.0


def _listed(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def argument(owner: type, name: str, **override: Any) -> Any:
    """The argument for ``owner``'s field ``name`` as declared there: its default in the
    flag's words and units, its bounds, its choices (the schema's ``enum``, checked by
    :meth:`AppArgs._one_of`). ``override`` holds what the Ray app deliberately does
    otherwise, as ``Field``'s keywords (and ``choices``)."""
    how = declaration(owner, name)
    bounds = {"ge": how.ge, "gt": how.gt, "le": how.le}
    options: dict[str, Any] = {key: bound for key, bound in bounds.items() if bound is not None}
    choices = override.pop("choices", how.choices)
    if choices:
        options["json_schema_extra"] = {"enum": list(choices)}
    options.update(override)
    # a --no-X flag's argument is the field itself (playground=false)
    own = field_default(owner, name) if how.switch_off else flag_default(owner, name)
    default = options.pop("default", own)
    if isinstance(default, Mapping):
        return Field(default_factory=lambda: dict(default), **options)
    if isinstance(default, tuple):
        return Field(default_factory=lambda: list(default), **options)
    return Field(default, **options)


class AppArgs(BaseModel):
    """Everything ``yomiage.ray:app`` takes (docs/scale.md explains each).

    An argument named after a ``yomiage serve`` flag is that flag's setting, with the
    default and bounds declared once on :class:`~yomiage.EngineSpec` or
    :class:`~yomiage.server.ServerConfig`. Where the app differs it says so here:
    one thread per replica (Serve scales by replicas), the dictionary never written
    (each replica would keep its own), and in :meth:`server_config`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # voices and engine, as `yomiage serve`
    voice: list[str] = Field(default_factory=list)
    model: list[str] = Field(default_factory=list)
    bert: str | None = argument(EngineSpec, "bert_source")
    threads: int = argument(EngineSpec, "threads", default=1, le=256)
    quantize: str = argument(EngineSpec, "bert_precision")
    decoder: str = argument(EngineSpec, "decoder_precision")
    memory_budget_mb: int = argument(EngineSpec, "memory_budget_mb")
    reading: str = argument(EngineSpec, "reading")
    cache_dir: str | None = argument(EngineSpec, "cache_dir")
    offline: bool = argument(EngineSpec, "offline")
    user_dict: str | None = argument(EngineSpec, "user_dictionary")
    # requests
    max_chars: int = argument(ServerConfig, "max_input_chars")
    max_audio_seconds: float = argument(ServerConfig, "max_audio_seconds")
    max_concurrency: int = argument(ServerConfig, "max_concurrency")
    queue_timeout: float = argument(ServerConfig, "queue_timeout")
    api_key: str | None = argument(ServerConfig, "api_key")
    allowed_host: list[str] = argument(ServerConfig, "allowed_hosts")
    cors_origin: list[str] = argument(ServerConfig, "cors_origins")
    cors_local_apps: bool = argument(ServerConfig, "cors_local_apps")
    dict_api: str = argument(ServerConfig, "dict_api", choices=("off", "read"))
    api: list[str] = argument(ServerConfig, "apis")
    voice_alias: dict[str, str] = argument(ServerConfig, "voice_aliases")
    default_voice: str | None = argument(ServerConfig, "default_voice")
    playground: bool = argument(ServerConfig, "playground")
    # replicas
    replicas: int | None = Field(None, ge=1)
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(4, ge=1)
    target_ongoing_requests: float | None = Field(None, gt=0)
    max_queued_requests: int = Field(64, ge=-1)

    _split = field_validator("voice", "model", "allowed_host", "cors_origin", "api", mode="before")(
        _listed
    )

    @model_validator(mode="before")
    @classmethod
    def _former_names(cls, values: Any) -> Any:
        """An argument under its earlier name (``memory_budget``) is taken, with a warning."""
        if not isinstance(values, Mapping):
            return values
        out, said = renamed((EngineSpec, ServerConfig), values)
        for line in said:
            log.warning("yomiage.ray: %s", line)
        return out

    @field_validator("voice_alias", mode="before")
    @classmethod
    def _aliases(cls, value: Any) -> Any:
        return alias_map(_listed(value)) if isinstance(value, str) else value

    @field_validator("*")
    @classmethod
    def _one_of(cls, value: Any, info: ValidationInfo) -> Any:
        """An argument with choices (its schema's ``enum``) takes one of them."""
        extra = cls.model_fields[info.field_name or ""].json_schema_extra
        choices = extra.get("enum") if isinstance(extra, dict) else None
        if isinstance(choices, list) and value not in choices:
            raise ValueError(f"{info.field_name} must be {one_of(tuple(choices))}, not {value!r}")
        return value

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
        return from_flags(
            EngineSpec,
            self.model_dump(),
            voices=parse_voices(self.voice, self.model),
            limits=Limits(max_request_seconds=self.max_audio_seconds),
        )

    def server_config(self) -> ServerConfig:
        """Each replica's app settings. The replica warms its voices before Serve marks it
        running, so the app itself skips warm-up; its queue holds only what Serve may
        send it (``max_ongoing_requests``), the rest waits in Serve's queue where any
        replica, a new one included, can take it."""
        key = declaration(ServerConfig, "api_key").env or ""
        return from_flags(
            ServerConfig,
            self.model_dump(),
            api_key=self.api_key or os.environ.get(key) or None,
            max_queue=self.max_concurrency,
            warmup=False,
            playground=self.playground,
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
