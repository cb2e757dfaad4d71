"""Unpack the bundled OpenJTalk dictionaries into the package at build time.

Two compiled dictionaries (both BSD-3-Clause, NAIST-jdic) are kept in the
repository as xz archives (16 MB each instead of 103 MB) and unpacked into
``src/yomiage/_data/`` whenever a wheel or an editable install is built:
``open_jtalk_dic_utf_8-1.11``, the one SBV2 voices were trained with
(``reading="sbv2"``), and pyopenjtalk-plus's corrected one (the default
reading). Doing it here rather than on first use means an installed yomiage
never needs a writable directory or the network to read Japanese.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# (folder, sha256 of its archive, sha256 of its sys.dic)
DICTIONARIES = (
    # SBV2's: sys.dic as recorded by the reference fixtures.
    (
        "open_jtalk_dic_utf_8-1.11",
        "154bbdb92a4b155c3b86d84fbdc91da1322545b9deeafbd5901e50b4192b8b81",
        "ca57d9029691a70a5dfb99afc2844180256161d7130da65b1a867510e129b9a6",
    ),
    # pyopenjtalk-plus 0.4.1.post10's pyopenjtalk/dictionary (its wheel, unchanged).
    (
        "open_jtalk_dic_plus-0.4.1.post10",
        "75a6ca49a0dce3742582a04089d1775d54b7ea36ce5e07c7102c75c5dde70f24",
        "23287ce5d518164b8b97683b1d9534df095556e446f3470a6c52bd737be74527",
    ),
)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def unpack_dictionary(root: Path, name: str, archive_sha256: str, sys_dic_sha256: str) -> Path:
    """Unpack the archive ``name`` under ``root`` unless a verified copy is already there."""
    target = root / "src" / "yomiage" / "_data" / name
    if (target / "sys.dic").is_file() and _sha256(target / "sys.dic") == sys_dic_sha256:
        return target
    archive = root / "data" / f"{name}.tar.xz"
    if _sha256(archive) != archive_sha256:
        raise RuntimeError(f"{archive} does not match its pinned sha256; refusing to build")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar.getmembers():
                if member.isdir() and member.name == name:
                    continue
                if not member.isfile() or Path(member.name).parent.name != name:
                    raise RuntimeError(f"unexpected member {member.name!r} in {archive}")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:  # Python < 3.10.12: members were checked above
                tar.extractall(tmp)
        unpacked = Path(tmp) / name
        if _sha256(unpacked / "sys.dic") != sys_dic_sha256:
            raise RuntimeError(f"unpacked {name}/sys.dic does not match its pinned sha256")
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    return target


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        # Editable installs are built by the wheel target too (version "editable").
        if self.target_name == "wheel":
            for name, archive_sha256, sys_dic_sha256 in DICTIONARIES:
                unpack_dictionary(Path(self.root), name, archive_sha256, sys_dic_sha256)
