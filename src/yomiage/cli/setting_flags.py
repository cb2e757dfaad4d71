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
import sys
from collections.abc import Sequence
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
    action = parser.add_argument(how.flag, **options)
    for old in how.formerly:  # taken still, unlisted, with a word about the new name
        kept = {k: v for k, v in options.items() if k in ("type", "choices", "metavar")}
        parser.add_argument(old, dest=action.dest, help=argparse.SUPPRESS, action=_Renamed,
                            new_flag=how.flag, default=argparse.SUPPRESS, **kept)  # fmt: skip
    return action


class _Renamed(argparse.Action):
    """A flag's earlier name: stores its value under the flag's dest and says the new name."""

    def __init__(self, *args: Any, new_flag: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new_flag = new_flag

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(f"yomiage: {option_string} is now {self.new_flag}; the old name will go",
              file=sys.stderr)  # fmt: skip
        setattr(namespace, self.dest, values)
