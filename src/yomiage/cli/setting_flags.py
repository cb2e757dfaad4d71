"""A setting's flag as its dataclass declares it (:mod:`yomiage.settings`).

``yomiage serve``'s and the engine's flags are added here from
:class:`~yomiage.server.ServerConfig`'s and :class:`~yomiage.EngineSpec`'s
fields, so a flag's default, type, choices, metavar and help are the ones
declared beside the field, and its value goes back through
:func:`yomiage.settings.from_flags`.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from yomiage.settings import declaration, flag_default

ArgumentParent = argparse.ArgumentParser | argparse._ArgumentGroup


def add_flag(parser: ArgumentParent, owner: type, name: str, **override: Any) -> argparse.Action:
    """Add the flag of ``owner``'s field ``name`` to ``parser``; ``override`` holds what a
    command deliberately does otherwise (add_argument's keywords)."""
    how = declaration(owner, name)
    default = flag_default(owner, name)
    options: dict[str, Any] = {"help": how.help}
    if isinstance(default, bool):
        if how.switch_off or not default:  # --no-warmup, --offline
            options["action"] = "store_true"
        else:  # on unless --no-X
            options.update(action=argparse.BooleanOptionalAction, default=True)
    else:
        if how.env is not None:
            default = os.environ.get(how.env, default)
        if how.repeat:
            options.update(action="append", default=list(default))
        elif isinstance(default, tuple):  # a comma-separated list
            options["default"] = ",".join(default)
        else:
            options["default"] = default
            kind = how.kind or (type(default) if isinstance(default, (int, float)) else None)
            if kind is not None:
                options["type"] = kind
        if how.choices:
            options["choices"] = list(how.choices)
        if how.metavar is not None:
            options["metavar"] = how.metavar
    options.update(override)
    return parser.add_argument(how.flag, **options)
