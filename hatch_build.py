"""Unpack the bundled OpenJTalk dictionary into the package at build time.

The compiled ``open_jtalk_dic_utf_8-1.11`` dictionary (BSD-3-Clause) is kept
in the repository as one xz archive (16 MB instead of 103 MB) and unpacked
into ``src/yomiage/_data/`` whenever a wheel or an editable install is built.
Doing it here rather than on first use means an installed yomiage never needs
a writable directory or the network to read Japanese.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DICT_NAME = "open_jtalk_dic_utf_8-1.11"
ARCHIVE_SHA256 = "154bbdb92a4b155c3b86d84fbdc91da1322545b9deeafbd5901e50b4192b8b81"
# sha256 of sys.dic as recorded by the reference fixtures.
SYS_DIC_SHA256 = "ca57d9029691a70a5dfb99afc2844180256161d7130da65b1a867510e129b9a6"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def unpack_dictionary(root: Path) -> Path:
    """Unpack the archive under ``root`` unless a verified copy is already there."""
    target = root / "src" / "yomiage" / "_data" / DICT_NAME
    if (target / "sys.dic").is_file() and _sha256(target / "sys.dic") == SYS_DIC_SHA256:
        return target
    archive = root / "data" / f"{DICT_NAME}.tar.xz"
    if _sha256(archive) != ARCHIVE_SHA256:
        raise RuntimeError(f"{archive} does not match its pinned sha256; refusing to build")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar.getmembers():
                if member.isdir() and member.name == DICT_NAME:
                    continue
                if not member.isfile() or Path(member.name).parent.name != DICT_NAME:
                    raise RuntimeError(f"unexpected member {member.name!r} in {archive}")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:  # Python < 3.10.12: members were checked above
                tar.extractall(tmp)
        unpacked = Path(tmp) / DICT_NAME
        if _sha256(unpacked / "sys.dic") != SYS_DIC_SHA256:
            raise RuntimeError("unpacked sys.dic does not match the reference dictionary")
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    return target


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        # Editable installs are built by the wheel target too (version "editable").
        if self.target_name == "wheel":
            unpack_dictionary(Path(self.root))
