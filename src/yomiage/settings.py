"""Each setting declared once: the dataclass field carries its default, bounds, flag and help.

:class:`~yomiage.server.ServerConfig` and :class:`~yomiage.EngineSpec` declare
their fields with :func:`setting`. The command line's flags
(:func:`yomiage.cli.setting_flags.add_flag`), the Ray app's arguments
(:mod:`yomiage.ray.app_args`) and the dataclasses' own checks (:func:`check`)
read that declaration, and :func:`from_flags` turns either front end's values
back into the dataclass, so a number, a choice or a unit is written in one
place. Where a front end differs on purpose (the Ray app's one thread and no
queue of its own) it says so as an override where it builds, not as a second
default. Standard library only: the command line reads this before it knows
which command runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass
from typing import Any, TypeVar

T = TypeVar("T")
_KEY = "yomiage.setting"


class _Unset:
    """The flag's default is the field's (dataclasses' own MISSING means "required")."""


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Setting:
    """How one dataclass field is set from outside.

    ``flag``: its command-line name; the flag's dest (``--max-chars``:
    ``max_chars``) is also the Ray app's argument. ``--no-X`` is a switch that
    turns the field off. ``help``: argparse help, where ``%(default)s`` (or
    ``%(default)g``) is the flag's default, so no number is written twice.
    ``choices``: the words the flag takes. ``parse`` turns a flag's or an
    argument's value into the field's (a word into a precision, a list into a
    tuple); ``scale``: the field is the flag times this, as an int
    (``--max-upload-mb`` sets bytes). ``ge``/``gt``/``le``: bounds, checked by
    :func:`check` and given to pydantic. ``flag_default``: the flag's and the
    Ray argument's default where it is not the field's (the library's None
    "no limit" is a server's 900 s). ``env``: the environment variable the
    flag defaults to. ``repeat``: the flag repeats, each one an item.
    ``kind``: the flag's type where its default does not show it (a None).
    ``formerly``: the flag's earlier names, still taken (their dests too, as the Ray
    app's arguments) with a warning that names the new one.
    """

    flag: str
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    parse: Callable[[Any], Any] | None = None
    scale: int | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    flag_default: Any = UNSET
    env: str | None = None
    repeat: bool = False
    kind: type | None = None
    formerly: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        """The flag's argparse dest, which is also the Ray app's argument name."""
        return _dest(self.flag)

    @property
    def former_dests(self) -> tuple[str, ...]:
        """The dests (the Ray app's argument names) of the flag's earlier names."""
        return tuple(_dest(flag) for flag in self.formerly)

    @property
    def switch_off(self) -> bool:
        """Whether the flag is ``--no-X``: given, the field is False."""
        return self.flag.startswith("--no-")

    def to_field(self, value: Any) -> Any:
        """A flag's or an argument's value as the field's value."""
        if self.switch_off:
            return not value
        if self.scale is not None:
            return None if value is None else int(value * self.scale)
        return value if self.parse is None else self.parse(value)

    def allowed(self) -> tuple[Any, ...]:
        """The field values the choices stand for (empty: any)."""
        return tuple(self.to_field(word) for word in self.choices)


def setting(
    default: T,
    flag: str,
    help: str,
    *,
    metavar: str | None = None,
    choices: tuple[str, ...] = (),
    parse: Callable[[Any], Any] | None = None,
    scale: int | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    flag_default: Any = UNSET,
    env: str | None = None,
    repeat: bool = False,
    kind: type | None = None,
    factory: Callable[[], T] | None = None,
    formerly: tuple[str, ...] = (),
) -> T:
    """A dataclass field with its default and how it is set from outside (:class:`Setting`
    explains each; ``factory`` instead of ``default`` where the default is mutable)."""
    how = Setting(
        flag, help, metavar=metavar, choices=choices, parse=parse, scale=scale, ge=ge, gt=gt,
        le=le, flag_default=flag_default, env=env, repeat=repeat, kind=kind, formerly=formerly,
    )  # fmt: skip
    metadata = {_KEY: how}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def renamed(owners: Iterable[type], values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` (a Ray app's arguments, by dest) with each earlier name of a setting
    of ``owners`` put under its name now, and a warning for each one renamed."""
    out, said = dict(values), []
    for owner in owners:
        for how in declared(owner).values():
            for old in how.former_dests:
                if old in out and how.dest not in out:
                    out[how.dest] = out.pop(old)
                    said.append(f"{old} is now called {how.dest}; {old} will be refused later")
    return out, said


def declared(owner: type) -> dict[str, Setting]:
    """``owner``'s declared settings by field name, in field order."""
    return {f.name: f.metadata[_KEY] for f in dataclasses.fields(owner) if _KEY in f.metadata}


def declaration(owner: type, name: str) -> Setting:
    """The declaration of ``owner``'s field ``name`` (KeyError: none)."""
    return declared(owner)[name]


def field_default(owner: type, name: str) -> Any:
    """The field's own default (a fresh one where it has a factory)."""
    (found,) = (f for f in dataclasses.fields(owner) if f.name == name)
    if found.default_factory is not MISSING:
        return found.default_factory()
    return found.default


def flag_default(owner: type, name: str) -> Any:
    """The flag's default, in its unit and words: the declared ``flag_default``, else the
    field's default scaled back or named by its choice word, else the field's default
    itself (a ``--no-X`` switch: False)."""
    how = declaration(owner, name)
    default = field_default(owner, name)
    if how.switch_off:
        return False  # --no-X not given: the field keeps its (True) default
    if how.flag_default is not UNSET:
        return how.flag_default
    if how.scale is not None and default is not None:
        return default / how.scale
    if how.choices and how.parse is not None:
        return next(word for word in how.choices if how.parse(word) == default)
    return default


def check(settings: object) -> None:
    """ValueError for a declared field outside its bounds or choices (None passes: it
    means "not set" wherever a setting may be None)."""
    for name, how in declared(type(settings)).items():
        value = getattr(settings, name)
        if value is None or isinstance(value, bool):
            continue
        if how.ge is not None and not value >= how.ge:
            raise ValueError(f"{name} must be at least {how.ge:g}, not {value!r}")
        if how.gt is not None and not value > how.gt:
            raise ValueError(f"{name} must be more than {how.gt:g}, not {value!r}")
        if how.le is not None and not value <= how.le:
            raise ValueError(f"{name} must be at most {how.le:g}, not {value!r}")
        allowed = how.allowed()
        if allowed and value not in allowed:
            raise ValueError(f"{name} must be {one_of(allowed)}, not {value!r}")


def one_of(words: tuple[Any, ...]) -> str:
    """``off, read or write``."""
    named = [str(word) for word in words]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"


def from_flags(owner: type[T], values: Mapping[str, Any], /, **overrides: Any) -> T:
    """``owner`` from flag or argument values keyed by dest (``vars(args)``, a Ray app's
    arguments): each declared field given a value takes it, converted; the others keep
    their defaults; ``overrides`` (field names) are what the caller decides itself.
    The one way from a front end's values to the settings, so both front ends agree."""
    fields: dict[str, Any] = {}
    for name, how in declared(owner).items():
        if name not in overrides and how.dest in values:
            fields[name] = how.to_field(values[how.dest])
    return owner(**fields, **overrides)


def names(value: str | Iterable[str]) -> tuple[str, ...]:
    """A tuple of names from a list, or from a comma-separated string (``openai,voicevox``)."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return tuple(value)


def non_empty(value: str | None) -> str | None:
    """An empty string as None (an empty API key means none, never "everyone")."""
    return value or None
