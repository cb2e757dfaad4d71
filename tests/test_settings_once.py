"""Each server and engine setting is declared once, on its dataclass field, and the
``yomiage serve`` flags, the Ray app's arguments and the dataclass agree on it.

ServerConfig's defaults used to be written in three places (the dataclass, the
flags and the Ray arguments) and drifted; these tests read the declarations
(:mod:`yomiage.settings`), so a new setting is checked without a new line here.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from yomiage.cli.main import build_parser
from yomiage.engine_spec import EngineSpec
from yomiage.server.config import ServerConfig
from yomiage.settings import UNSET, Setting, declared, field_default, flag_default, from_flags

OWNERS = (ServerConfig, EngineSpec)
SETTINGS = [(owner, name, how) for owner in OWNERS for name, how in declared(owner).items()]
IDS = [f"{owner.__name__}.{name}" for owner, name, _ in SETTINGS]
# What a front end deliberately does otherwise, by (front end, field).
CLI_OWN = {"allowed_hosts"}  # serve: without --allowed-host, the names of its bind
RAY_OWN = {"threads"}  # one thread a replica: Serve scales by replicas
RAY_ONLY = {"voice", "model", "replicas", "min_replicas", "max_replicas",
            "target_ongoing_requests", "max_queued_requests"}  # fmt: skip


def _serve_actions() -> dict[str, argparse.Action]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    # A flag's earlier name shares its dest, unlisted: the flag of the declared name is kept.
    actions = sub.choices["serve"]._actions
    return {a.dest: a for a in reversed(actions) if a.help != argparse.SUPPRESS}


def test_a_flags_earlier_name_is_taken_with_a_word_about_the_new_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    args = parser.parse_args(["serve", "--model", "x", "--memory-budget", "900"])
    assert args.memory_budget_mb == 900
    assert "--memory-budget is now --memory-budget-mb" in capsys.readouterr().err
    assert "--memory-budget " not in parser.format_help()


def _front_default(owner: type, name: str) -> Any:
    """The field value a front end's default stands for: the field's own, unless the
    declaration names another one for the front ends (a server's 900 s for None)."""
    how = declared(owner)[name]
    return field_default(owner, name) if how.flag_default is UNSET else how.flag_default


def _one_past(how: Setting) -> float:
    if how.ge is not None:
        return how.ge - 1
    if how.gt is not None:
        return how.gt
    assert how.le is not None
    return how.le + 1


def test_every_setting_declares_a_flag_the_serve_command_has() -> None:
    actions = _serve_actions()
    for owner, name, how in SETTINGS:
        assert how.dest in actions, f"{owner.__name__}.{name}: serve has no {how.flag}"
        assert actions[how.dest].option_strings[0] == how.flag


@pytest.mark.parametrize(("owner", "name", "how"), SETTINGS, ids=IDS)
def test_the_flag_default_is_the_declared_default(
    owner: type, name: str, how: Setting, monkeypatch: pytest.MonkeyPatch
) -> None:
    if how.env:
        monkeypatch.delenv(how.env, raising=False)
    action = _serve_actions()[how.dest]
    if name in CLI_OWN:
        return
    default = action.default
    if isinstance(default, str) and action.type is not None:
        default = action.type(default)  # as argparse converts a string default
    assert how.to_field(default) == how.to_field(flag_default(owner, name))
    if how.flag_default is UNSET:
        assert how.to_field(default) == _front_default(owner, name)
    if how.choices:
        assert tuple(action.choices or ()) == how.choices
        assert field_default(owner, name) in how.allowed()


@pytest.mark.parametrize(("owner", "name", "how"), SETTINGS, ids=IDS)
def test_help_shows_the_declared_number_not_a_copy(owner: type, name: str, how: Setting) -> None:
    default = flag_default(owner, name)
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        return
    assert "%(default)" in how.help, f"{how.flag}'s help should show %(default)s"
    assert f"{default:g}" not in how.help.replace("%(default)", "")


@pytest.mark.parametrize(("owner", "name", "how"), SETTINGS, ids=IDS)
def test_the_dataclass_refuses_what_the_declaration_bounds(
    owner: type, name: str, how: Setting
) -> None:
    base: dict[str, Any] = {"voices": (("v", None),)} if owner is EngineSpec else {}
    if how.ge is None and how.gt is None and how.le is None and not how.allowed():
        return
    bad = _one_past(how) if how.allowed() == () else "no-such-choice"
    with pytest.raises(ValueError, match=name):
        owner(**base, **{name: bad})


def test_flag_values_become_the_fields_through_the_one_conversion() -> None:
    args = build_parser().parse_args(
        ["serve", "--model", "./v", "--max-upload-mb", "1.5", "--api", "openai", "--no-warmup",
         "--voice-alias", "alloy=v", "--quantize", "none", "--presets", "p.json"]
    )  # fmt: skip
    config = from_flags(ServerConfig, vars(args), allowed_hosts=("*",))
    assert config.max_upload_bytes == 1536 * 1024
    assert config.apis == ("openai",) and config.warmup is False
    assert dict(config.voice_aliases) == {"alloy": "v"} and str(config.presets_path) == "p.json"
    spec = from_flags(EngineSpec, vars(args), voices=(("v", "./v"),))
    assert spec.bert_precision == "fp32"
    with pytest.raises(ValueError, match="ALIAS=NAME"):
        from_flags(ServerConfig, {"voice_alias": ["alloy"]})


def test_the_serve_command_builds_the_declared_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvicorn")
    from yomiage.cli.serve import server_config

    monkeypatch.delenv("YOMIAGE_API_KEY", raising=False)
    config = server_config(build_parser().parse_args(["serve", "--model", "./v"]))
    for name in declared(ServerConfig):
        expected = _front_default(ServerConfig, name)
        if name == "warmup":  # the worker warms up before the port opens, not the app
            expected = False
        if name != "max_connections":  # lowered to the open-file limit on this machine
            assert getattr(config, name) == expected, name


def _ray_arguments() -> dict[str, tuple[type, str, Setting]]:
    """The Ray app's arguments named after a flag: the setting each one is."""
    out = {}
    for owner, name, how in SETTINGS:
        out[name if how.switch_off else how.dest] = (owner, name, how)
    return out


def test_the_ray_arguments_are_the_declared_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray.serve")
    from yomiage.ray.app_args import AppArgs

    monkeypatch.delenv("YOMIAGE_API_KEY", raising=False)
    arguments = _ray_arguments()
    for argument, info in AppArgs.model_fields.items():
        if argument in RAY_ONLY:
            continue
        assert argument in arguments, f"AppArgs.{argument} is no declared setting"
        owner, name, how = arguments[argument]
        default = info.get_default(call_default_factory=True)
        value = default if how.switch_off else how.to_field(default)  # playground=false
        if name not in RAY_OWN:
            assert value == _front_default(owner, name), argument
        bounds = {
            b: getattr(m, b) for m in info.metadata for b in ("ge", "gt", "le") if hasattr(m, b)
        }
        for bound in ("ge", "gt", "le"):
            if getattr(how, bound) is not None:
                assert bounds.get(bound) == getattr(how, bound), (argument, bound)
        extra = info.json_schema_extra
        enum = extra.get("enum") if isinstance(extra, dict) else None
        if how.choices:
            assert enum is not None and set(enum) <= set(how.choices), argument
    # what differs from `yomiage serve`'s defaults is what the app decides on purpose
    pytest.importorskip("uvicorn")
    from yomiage.cli.serve import server_config

    cli = server_config(build_parser().parse_args(["serve", "--model", "./v"]))
    ray = AppArgs(model=["./v"]).server_config()
    differ = {name for name in declared(ServerConfig) if getattr(cli, name) != getattr(ray, name)}
    assert differ <= {"max_queue", "max_connections"}, differ
    assert ray.max_queue == ray.max_concurrency


def _documented_defaults() -> dict[str, str]:
    """docs/scale.md's argument tables: each argument's default cell, split where one row
    names several (``| `cache_dir`, `offline` | `$YOMIAGE_CACHE`, false |``)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "scale.md").read_text("utf-8")
    out = {}
    for names, defaults in re.findall(r"^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \| ([^|]+) \|", text, re.M):
        cells = [c.strip() for c in defaults.split(", ")] if "," in names else [defaults.strip()]
        out.update(zip(re.findall(r"`([a-z_]+)`", names), cells, strict=True))
    return out


def test_the_documented_ray_defaults_are_the_declared_ones() -> None:
    """docs/scale.md repeats each default for the reader: it must say the declared one."""
    pytest.importorskip("ray.serve")
    from yomiage.ray.app_args import AppArgs

    documented = _documented_defaults()
    assert {"max_chars", "threads", "dict_api", "min_replicas"} <= set(documented)
    for argument, cell in documented.items():
        info = AppArgs.model_fields.get(argument)
        literal = re.fullmatch(r"`?([\w.,]+)`?", cell)
        if info is None or literal is None or literal[1] in AppArgs.model_fields:
            continue  # prose ("beside the voice", "none") or another argument's name
        default = info.get_default(call_default_factory=True)
        if literal[1] == "none":
            assert not default, argument  # None, or no items
            continue
        shown = ",".join(default) if isinstance(default, list) else default
        shown = str(shown).lower() if isinstance(shown, bool) else shown
        assert literal[1] == (f"{shown:g}" if isinstance(shown, float) else str(shown)), argument
