"""Unpack the bundled OpenJTalk dictionaries beside their pack for editable installs.

The package carries its two compiled dictionaries (BSD-3-Clause, NAIST-jdic) in
one pack, ``src/yomiage/_data/openjtalk_dictionaries.pack`` (17 MB instead of
2 x 103 MB), and an installed yomiage unpacks the one a reading needs into the
yomiage cache on first use (``yomiage.text.system_dictionary``). A wheel is
built as it is. An editable install (a checkout, CI, a developer's venv) has
both unpacked here instead, into ``src/yomiage/_data/<name>/`` (git-ignored):
its test suite gives each test a cache of its own, which would otherwise
unpack 103 MB in every test. Each file is checked against its pin.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

FORMAT_DIR = Path("src") / "yomiage" / "text" / "system_dictionary"


def _load(root: Path, name: str) -> ModuleType:
    """A module of ``yomiage.text.system_dictionary`` by path: the build environment
    has hatchling and numpy, not yomiage's other dependencies."""
    path = root / FORMAT_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_yomiage_build_{name}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def unpack_dictionaries(root: Path) -> None:
    """Each pinned dictionary into ``root/src/yomiage/_data/<name>/``, unless there already."""
    pack_format, pins = _load(root, "pack"), _load(root, "pins")
    data = root / "src" / "yomiage" / "_data"
    wanted = {
        name: {file: pack_format.Pin(size, sha256) for file, (size, sha256) in files.items()}
        for name, files in pins.PINS.items()
    }
    pack_format.unpack_all(data / pins.PACK_NAME, data, wanted)


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        # Editable installs are built by the wheel target, as version "editable".
        if self.target_name == "wheel" and version == "editable":
            unpack_dictionaries(Path(self.root))
