"""yomiage on Ray Serve: the server's routes on as many replicas as the load needs.

``serve run yomiage.ray:app model=./voices/mine threads=2`` (or a ``serve``
config file naming ``yomiage.ray:app``, docs/scale.md) deploys the same
FastAPI app ``yomiage serve`` runs, one engine per replica, each replica
asking Ray for as many CPUs as its engine has threads. Importing this module
imports Ray (``pip install 'yomiage[ray]'``); ``import yomiage`` never does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

try:
    from ray import serve
except ImportError as exc:  # pragma: no cover - depends on the environment
    from yomiage.errors import MissingExtraError

    raise MissingExtraError("yomiage on Ray Serve", "ray", exc.name or "ray") from None

from yomiage.ray.app_args import AppArgs
from yomiage.ray.replica import SPEECH_DEPLOYMENT, SpeechReplica

__all__ = ["SPEECH_DEPLOYMENT", "AppArgs", "SpeechReplica", "app"]


def app(args: Mapping[str, Any] | AppArgs) -> serve.Application:
    """The application for ``serve run``/``serve deploy``: ``args`` are :class:`AppArgs`
    fields (strings from the command line, values from a config file).

    Bad arguments raise ValueError naming each field, before anything is deployed.
    """
    checked = args if isinstance(args, AppArgs) else AppArgs.model_validate(dict(args))
    deployment = SPEECH_DEPLOYMENT.options(**checked.deployment_options())
    application: serve.Application = deployment.bind(checked.engine_spec(), checked.server_config())
    return application
