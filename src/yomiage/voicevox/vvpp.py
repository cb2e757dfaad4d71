"""A VVPP package: what the VOICEVOX editor installs to run yomiage as one of its engines.

A ``.vvpp`` is a zip archive. The editor unpacks it into a folder of its own, reads
``engine_manifest.json`` there and, to start the engine, splits the manifest's
``command`` shell-style, runs its first word *as a file inside that folder* (no shell,
the folder as working directory) with the other words, and appends ``--use_gpu`` (GPU
mode) and ``--host 127.0.0.1 --port N``. On macOS and Linux it also marks the file named
by the whole ``command`` string executable when it installs the package, so there the
command must be exactly one file name, with no arguments.

yomiage is a pip-installed Python program, not a frozen executable, so the package
carries a small launcher that starts the Python that built it:

- macOS/Linux: ``run``, a ``/bin/sh`` script that runs ``PYTHON -m yomiage serve
  FLAGS "$@"`` with the absolute path of that Python;
- Windows: ``run.exe``, a copy of pip's ``yomiage.exe`` entry point (a small launcher
  that records the absolute path of its Python), with ``serve FLAGS`` in the command
  (the editor cannot start a ``.bat`` file without a shell).

Either way the package works on the machine and the Python environment that built it,
and only there. Everything here is pure data; the CLI (:mod:`yomiage.cli.vvpp`) reads
the environment and writes the file.
"""

from __future__ import annotations

import io
import json
import shlex
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yomiage.voicevox.engine_id import ENGINE_UUID, SUPPORTED_FEATURES

ENGINE_NAME = "yomiage"
ENGINE_PORT = 50121
"""The port the editor tries first: not VOICEVOX's 50021 (its own engine runs there)
nor AivisSpeech's 10101. The editor picks another free one when it is taken."""

MANIFEST_VERSION = "0.13.1"
SBV2_SAMPLE_RATE = 44100
"""Style-Bert-VITS2 JP-Extra voices' rate; the running server reports each voice's own."""

MANIFEST = "engine_manifest.json"
ICON = "icon.png"
TERMS = "terms_of_service.md"
UPDATE_INFOS = "update_infos.json"
LICENSES = "dependency_licenses.json"


@dataclass(frozen=True)
class PackageFile:
    """One file of the package; ``executable`` ones get mode 755 in the zip."""

    name: str
    data: bytes
    executable: bool = False


@dataclass(frozen=True)
class Launcher:
    """How the editor starts the engine: the manifest's ``command`` and the file it runs."""

    command: str
    file: PackageFile


@dataclass(frozen=True)
class License:
    """One entry of ``dependency_licenses.json`` (VOICEVOX's LicenseInfo)."""

    name: str
    text: str
    version: str | None = None
    license: str | None = None

    def as_json(self) -> dict[str, str]:
        out = {"name": self.name, "text": self.text}
        if self.version is not None:
            out["version"] = self.version
        if self.license is not None:
            out["license"] = self.license
        return out


def serve_command(python: str, serve_args: Sequence[str]) -> list[str]:
    """The words that start ``yomiage serve`` with ``serve_args`` on ``python``."""
    return [python, "-m", "yomiage", "serve", *serve_args]


def posix_launcher(python: str, serve_args: Sequence[str]) -> Launcher:
    """A ``run`` shell script for macOS and Linux; the editor's flags reach serve as ``"$@"``."""
    script = (
        "#!/bin/sh\n"
        "# Starts yomiage's VOICEVOX-compatible server for the VOICEVOX editor, which\n"
        "# appends --host and --port (and --use_gpu in GPU mode). Made by `yomiage vvpp`.\n"
        f'exec {shlex.join(serve_command(python, serve_args))} "$@"\n'
    )
    return Launcher("run", PackageFile("run", script.encode("utf-8"), executable=True))


def windows_launcher(entry_point: bytes, serve_args: Sequence[str]) -> Launcher:
    """``run.exe`` (the bytes of pip's ``yomiage.exe``) with ``serve`` and the flags in the
    command. Each word is quoted, so the editor's shell-style split keeps backslashes."""
    command = " ".join(shlex.quote(word) for word in ["run.exe", "serve", *serve_args])
    return Launcher(command, PackageFile("run.exe", entry_point, executable=True))


def engine_manifest(
    command: str, *, version: str, port: int = ENGINE_PORT, sample_rate: int = SBV2_SAMPLE_RATE
) -> dict[str, Any]:
    """``engine_manifest.json``: the editor needs ``name``, ``uuid``, ``command``, ``port``,
    ``version`` and ``supported_features``; the other fields (paths of files in the
    package) complete VOICEVOX's own manifest format."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": ENGINE_NAME,
        "brand_name": ENGINE_NAME,
        "uuid": ENGINE_UUID,
        "version": version,
        "url": "https://github.com/yomiage/yomiage",
        "command": command,
        "port": port,
        "icon": ICON,
        "default_sampling_rate": sample_rate,
        "frame_rate": sample_rate / 512,
        "terms_of_service": TERMS,
        "update_infos": UPDATE_INFOS,
        "dependency_licenses": LICENSES,
        "supported_features": {
            key: {"type": "bool", "value": value, "name": label}
            for key, (value, label) in SUPPORTED_FEATURES.items()
        },
    }


def package_files(
    launcher: Launcher, *, version: str, port: int = ENGINE_PORT, licenses: Sequence[License] = ()
) -> list[PackageFile]:
    """Every file of the package: the manifest, the launcher and the files the manifest names."""
    manifest = engine_manifest(launcher.command, version=version, port=port)
    updates = [
        {
            "version": version,
            "descriptions": [f"yomiage {version}, packaged by `yomiage vvpp`."],
            "contributors": [],
        }
    ]
    return [
        PackageFile(MANIFEST, _json(manifest)),
        launcher.file,
        PackageFile(ICON, icon_png()),
        PackageFile(TERMS, TERMS_TEXT.encode("utf-8")),
        PackageFile(UPDATE_INFOS, _json(updates)),
        PackageFile(LICENSES, _json([lic.as_json() for lic in licenses])),
    ]


TERMS_TEXT = """\
# yomiage

yomiage is free software under the MIT licence.

Each voice has its own licence, set by its author: read it before you publish audio
made with a voice (the voice's model card or page; in the editor, the character's
information shows what the voice carries).
"""


def vvpp_bytes(files: Sequence[PackageFile]) -> bytes:
    """The zip archive of ``files``, the same bytes for the same files (fixed dates)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            info = zipfile.ZipInfo(file.name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix: unpackers then honour the mode below
            info.external_attr = (0o100755 if file.executable else 0o100644) << 16
            archive.writestr(info, file.data)
    return buffer.getvalue()


def icon_png(size: int = 64) -> bytes:
    """A ``size``-pixel square PNG: a light disc on a dark blue ground."""
    ground, disc = b"\x1f\x3a\x5f", b"\xf2\xf2\xea"
    centre, radius2 = (size - 1) / 2, (size * 0.34) ** 2
    rows = b"".join(
        b"\x00"  # filter: none
        + b"".join(
            disc if (x - centre) ** 2 + (y - centre) ** 2 <= radius2 else ground
            for x in range(size)
        )
        for y in range(size)
    )
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows, 9))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


__all__ = [
    "ENGINE_NAME",
    "ENGINE_PORT",
    "Launcher",
    "License",
    "PackageFile",
    "engine_manifest",
    "icon_png",
    "package_files",
    "posix_launcher",
    "serve_command",
    "vvpp_bytes",
    "windows_launcher",
]
