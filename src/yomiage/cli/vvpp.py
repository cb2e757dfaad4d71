"""``yomiage vvpp``: package yomiage for the VOICEVOX editor, which installs a ``.vvpp``
as one more engine and starts it itself.

The package starts ``yomiage serve`` with this command's voice and engine flags, in
the Python environment that ran this command (:mod:`yomiage.voicevox.vvpp` says how).
Local paths are recorded absolute: the editor starts the engine in its own folder.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import sysconfig
from pathlib import Path

from yomiage._version import __version__
from yomiage.cli.engine_options import add_engine_arguments, voice_sources
from yomiage.cli.setting_flags import add_flag
from yomiage.errors import YomiageError
from yomiage.server.config import ServerConfig
from yomiage.voicevox.vvpp import (
    ENGINE_PORT,
    Launcher,
    License,
    package_files,
    posix_launcher,
    vvpp_bytes,
    windows_launcher,
)

EXAMPLES = """examples:
  yomiage vvpp yomiage.vvpp --voice jvnv-F1-jp
  yomiage vvpp mine.vvpp --model ./voices/mine --model narrator=hf://owner/repo/narrator
  yomiage vvpp gpu.vvpp --voice jvnv-F1-jp --device cuda

Then, in the VOICEVOX editor: Engine > Manage engines > Add > VVPP file (docs/voicevox.md).
"""

_PATH_FLAGS = ("cache_dir", "user_dict")  # plain paths; --model and --bert may be URLs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "vvpp",
        help="package yomiage as an engine for the VOICEVOX editor (.vvpp)",
        description="Write a .vvpp package that the VOICEVOX editor installs as an engine: it "
        "runs `yomiage serve` with the voices and engine flags given here, in this Python "
        "environment, on this machine.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("output", metavar="OUT.vvpp", help="the package file to write")
    p.add_argument(
        "--port",
        type=int,
        default=ENGINE_PORT,
        help=f"the port the editor tries first (default {ENGINE_PORT}; it takes another "
        "free one when that is in use)",
    )
    add_flag(
        p,
        ServerConfig,
        "compat",
        help="whose meanings the engine gives a query's fields "
        "(yomiage serve --compat; default %(default)s, what the editor's sliders mean)",
    )
    add_engine_arguments(p, many=True)
    p.set_defaults(func=run)


def serve_arguments(args: argparse.Namespace) -> list[str]:
    """The voice and engine flags of ``args`` that differ from serve's defaults, as
    ``yomiage serve`` takes them, with local paths made absolute."""
    reference = argparse.ArgumentParser(add_help=False)
    add_engine_arguments(reference, many=True)
    out: list[str] = []
    for action in reference._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or value is None or value == action.default:
            continue
        flag = action.option_strings[0]
        if action.nargs == 0:  # a switch (--offline)
            out.append(flag)
        elif action.dest == "voice":
            out += [word for name in value for word in (flag, name)]
        elif action.dest == "model":
            out += [word for model in _models(args) for word in (flag, model)]
        elif action.dest == "bert":
            out += [flag, _absolute_source(value)]
        elif action.dest in _PATH_FLAGS:
            out += [flag, str(Path(value).expanduser().resolve())]
        else:
            out += [flag, str(value)]
    return out


def _models(args: argparse.Namespace) -> list[str]:
    """``--model`` values with local folders absolute and each voice's name kept (the
    name a relative path gave, e.g. ``.``, is not the one its absolute path would)."""
    from yomiage.engine_spec import parse_voices

    out = []
    for name, source in voice_sources(args):
        if source is None:
            continue  # a --voice name
        absolute = _absolute_source(source)
        named = f"{name}={absolute}"
        try:
            same = parse_voices((), (named,)) == ((name, absolute),)
        except ValueError:
            same = False
        out.append(named if same else absolute)
    return out


def _absolute_source(source: str) -> str:
    from yomiage.sources import LocalSource, parse

    src = parse(source)
    if isinstance(src, LocalSource):
        return str(src.path.expanduser().resolve())
    return source


def launcher(serve_args: list[str]) -> Launcher:
    """The launcher for this machine, which starts this Python environment's yomiage."""
    if os.name == "nt":
        # pip's entry point of this environment, or of the user's (pip install --user)
        folders = [sysconfig.get_path("scripts"), sysconfig.get_path("scripts", "nt_user")]
        found = [Path(f) / "yomiage.exe" for f in folders if (Path(f) / "yomiage.exe").is_file()]
        if not found:
            raise YomiageError(
                f"no yomiage.exe in {folders[0]}: the package starts yomiage through it; "
                "install yomiage with pip in this Python (python -m pip install yomiage)"
            )
        return windows_launcher(found[0].read_bytes(), serve_args)
    if not sys.executable:
        raise YomiageError("cannot tell which Python runs yomiage (sys.executable is empty)")
    return posix_launcher(sys.executable, serve_args)


def licenses() -> list[License]:
    """yomiage's own licence and its third-party notice, where the installation has them."""
    out = []
    try:
        dist = importlib.metadata.distribution("yomiage")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    for file, name in (("LICENSE", "yomiage"), ("THIRD_PARTY.md", "yomiage: third-party parts")):
        text = dist.read_text(f"licenses/{file}") if dist is not None else None
        if text:
            out.append(License(name=name, text=text, version=__version__, license="MIT"))
    return out or [License(name="yomiage", text="MIT License", version=__version__, license="MIT")]


def output_path(value: str) -> Path:
    """The package's path, checked before anything loads: a ``.vvpp`` in a folder that exists."""
    path = Path(value).expanduser()
    if path.suffix.lower() != ".vvpp":
        raise ValueError(f"{value}: name the package OUT.vvpp (the editor installs .vvpp files)")
    if path.is_dir():
        raise ValueError(
            f"{value} is a folder; name the package file, e.g. {path / 'yomiage.vvpp'}"
        )
    if not path.parent.is_dir():
        raise ValueError(f"cannot write {value}: no folder {path.parent}")
    return path


def run(args: argparse.Namespace) -> int:
    from yomiage.atomic import write_atomic
    from yomiage.cli.serve import check_voices

    out = output_path(args.output)
    check_voices(args)
    serve_args = serve_arguments(args)
    if args.compat != ServerConfig.compat:
        serve_args += ["--compat", args.compat]
    files = package_files(
        launcher(serve_args), version=__version__, port=args.port, licenses=licenses()
    )
    write_atomic(out, vvpp_bytes(files))
    print(
        f"yomiage vvpp: wrote {out}; in the VOICEVOX editor: Engine > Manage engines > Add > "
        "VVPP file, then reload (docs/voicevox.md)",
        file=sys.stderr,
    )
    return 0
