#!/usr/bin/env python3
"""Pack the OpenJTalk dictionaries that yomiage ships, or unpack them from their pack.

    python tools/openjtalk_dictionaries.py pack \\
        src/yomiage/_data/open_jtalk_dic_plus-0.4.1.post10 \\
        src/yomiage/_data/open_jtalk_dic_utf_8-1.11
    python tools/openjtalk_dictionaries.py unpack DEST [NAME ...]

``pack`` is run by hand when a bundled dictionary changes (15 minutes, ~2.5 GB of
memory). The first folder is packed whole, the next against it. The pack goes to
``src/yomiage/_data/openjtalk_dictionaries.pack``; paste the printed pins into
``src/yomiage/text/system_dictionary/pins.py``, and update THIRD_PARTY.md.

``unpack`` writes the pinned dictionaries (or those named) into ``DEST/<name>/``, as
an editable install does into ``src/yomiage/_data`` (for scripts that run yomiage
from its source tree). Only numpy is needed besides the standard library.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FORMAT_DIR = ROOT / "src" / "yomiage" / "text" / "system_dictionary"
DATA = ROOT / "src" / "yomiage" / "_data"


def _load(name: str) -> ModuleType:
    # By path, as the build hook does: the format must not need the rest of yomiage.
    spec = importlib.util.spec_from_file_location(f"_yomiage_{name}", FORMAT_DIR / f"{name}.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {FORMAT_DIR / name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def pins_source(pins: Mapping[str, Mapping[str, Any]]) -> str:
    lines = ["PINS: dict[str, dict[str, tuple[int, str]]] = {"]
    for name, files in pins.items():
        lines.append(f'    "{name}": {{')
        for file, pin in sorted(files.items()):
            lines.append(f'        "{file}": ({pin.size}, "{pin.sha256}"),')
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines)


def pack(folders: list[Path], out: Path) -> None:
    pins = _load("pack").pack(folders, out)
    with zipfile.ZipFile(out) as archive:
        for info in archive.infolist():
            print(f"{info.filename:>14}: {info.file_size:>11,} bytes", file=sys.stderr)
    print(f"{out}: {out.stat().st_size:,} bytes", file=sys.stderr)
    print(pins_source(pins))


def unpack(dest: Path, names: list[str]) -> None:
    pack_format, pinned = _load("pack"), _load("pins")
    unknown = set(names) - set(pinned.PINS)
    if unknown:
        raise SystemExit(f"no such dictionary: {', '.join(sorted(unknown))}")
    wanted = {
        name: {file: pack_format.Pin(size, sha256) for file, (size, sha256) in files.items()}
        for name, files in pinned.PINS.items()
        if not names or name in names
    }
    dest.mkdir(parents=True, exist_ok=True)
    pack_format.unpack_all(DATA / pinned.PACK_NAME, dest, wanted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="write the pack and print the pins")
    packing.add_argument("folders", nargs="+", type=Path, help="compiled dictionary folders")
    packing.add_argument("-o", "--out", type=Path, default=DATA / "openjtalk_dictionaries.pack")
    unpacking = commands.add_parser("unpack", help="unpack pinned dictionaries into DEST")
    unpacking.add_argument("dest", type=Path)
    unpacking.add_argument("names", nargs="*", help="dictionaries (default: all)")
    args = parser.parse_args()
    if args.command == "pack":
        pack(args.folders, args.out)
    else:
        unpack(args.dest, args.names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
