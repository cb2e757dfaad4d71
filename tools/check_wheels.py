#!/usr/bin/env python3
"""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Prove that yomiage's runtime dependencies install from binary wheels only.

Users on a supported CPython/platform must never need a compiler, so for every
(python, platform) pair pip resolves ``[project].dependencies`` (whole tree) with
``--only-binary=:all:`` for a foreign target, as a ``--dry-run --report`` so only
metadata is fetched.  pip evaluates environment markers with the *host's* values,
so the resolved metadata is re-walked with the target's markers and any dependency
pip skipped (e.g. ``colorama; platform_system == "Windows"``) is added and resolved.
Local pip configuration (find-links, extra indexes, constraints) is ignored unless
``--pip-config`` is given, so the verdict is about the package index alone.
"""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
MANYLINUX_GLIBC = range(34, 16, -1)  # manylinux_2_34 ... manylinux_2_17 (manylinux2014)
# PIP_* variables that only say how to reach the index; the rest could mask it.
PIP_ENV_KEEP = frozenset({"PIP_INDEX_URL", "PIP_CERT", "PIP_CLIENT_CERT", "PIP_TRUSTED_HOST",
                          "PIP_PROXY", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_CACHE_DIR"})


@dataclass(frozen=True)
class Platform:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""A target the wheels must cover: pip's platform tags plus the marker values it lacks."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""

    key: str
    label: str
    tags: tuple[str, ...]
    markers: tuple[tuple[str, str], ...]


def _markers(os_name: str, sys_platform: str, machine: str) -> tuple[tuple[str, str], ...]:
    """Marker values pip would otherwise take from the host."""
    system = {"linux": "Linux", "darwin": "Darwin", "win32": "Windows"}[sys_platform]
    return (("os_name", os_name), ("sys_platform", sys_platform), ("platform_system", system),
            ("platform_machine", machine))


def _linux(arch: str) -> Platform:
    """Accept every manylinux wheel a glibc 2.34 system (RHEL 9, Ubuntu 22.04) can install."""
    tags = (f"manylinux2014_{arch}", *(f"manylinux_2_{g}_{arch}" for g in MANYLINUX_GLIBC))
    label = f"Linux {arch} (manylinux, glibc ≤ 2.34)"
    return Platform(f"linux-{arch}", label, tags, _markers("posix", "linux", arch))


PLATFORMS = (
    _linux("x86_64"),
    _linux("aarch64"),
    Platform("macos-arm64", "macOS arm64 (11–14)", ("macosx_11_0_arm64", "macosx_14_0_arm64"),
             _markers("posix", "darwin", "arm64")),
    Platform("windows-x64", "Windows x64", ("win_amd64",), _markers("nt", "win32", "AMD64")),
)


@dataclass
class Result:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Outcome of one (python, platform) resolution: verdict plus (name, version, wheel tags)."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""

    python: str
    platform: Platform
    ok: bool
    detail: str = ""
    packages: list[tuple[str, str, str]] = field(default_factory=list)


def project_requirements(pyproject: Path) -> list[str]:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Read the runtime requirements from pyproject.toml so the check cannot drift from it."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    with pyproject.open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def marker_env(python: str, platform: Platform) -> dict[str, str]:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Describe the target for marker evaluation, since pip would use the host's values."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    return {"implementation_name": "cpython", "implementation_version": f"{python}.0",
            "platform_python_implementation": "CPython", "python_version": python,
            "python_full_version": f"{python}.0", "platform_release": "", "platform_version": "",
            **dict(platform.markers)}


def pip_env(use_config: bool) -> dict[str, str]:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Hide local find-links, extra indexes and constraints so only the index is judged."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    if use_config:
        return dict(os.environ)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_ENV_KEEP}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def pip_resolve(pip_python: str, python: str, platform: Platform, reqs: Sequence[str],
                env: dict[str, str]) -> tuple[dict[str, Any] | None, str]:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Resolve once with pip for the target; return pip's report, or None and its stderr."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    abi = "cp" + python.replace(".", "")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "report.json")
        cmd = [pip_python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", str(report), "--only-binary=:all:", "--python-version", python,
               "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none",
               *(f"--platform={tag}" for tag in platform.tags),
               "--target", str(Path(tmp, "target")), *reqs]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0 or not report.exists():
            return None, proc.stderr or proc.stdout
        return json.loads(report.read_text(encoding="utf-8")), ""


def failing_package(stderr: str) -> str:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Name what pip could not find (and which versions *do* fit) so the table is actionable."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    found = re.search(r"satisfies the requirement (\S+) \(from versions: ([^)]*)\)", stderr)
    if found:
        return f"{found[1]} (versions with wheels here: {found[2]})"
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR:")]
    return errors[0] if errors else (stderr.strip().splitlines() or ["pip failed"])[-1]


def wheel_tags(url: str) -> str:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Keep only python-abi-platform of the wheel name: that is what this check is about."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    name = url.rsplit("/", 1)[-1]
    return "-".join(name[:-4].split("-")[-3:]) if name.endswith(".whl") else f"NOT A WHEEL: {name}"


def walk(report: dict[str, Any], reqs: Sequence[str],
         env: dict[str, str]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Follow the tree with the target's markers: packages needed there, and those pip skipped."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    installed = {canonicalize_name(i["metadata"]["name"]): i for i in report["install"]}
    needed: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    seen: set[tuple[str, str]] = set()
    stack = [(Requirement(r), "") for r in reqs]
    while stack:
        req, extra = stack.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        item = installed.get(name)
        if item is None:
            req.marker = None
            missing.append(str(req))
            continue
        needed[name] = item
        for ex in ("", *sorted(req.extras)):
            if (name, ex) not in seen:
                seen.add((name, ex))
                stack += [(Requirement(d), ex) for d in item["metadata"].get("requires_dist") or []]
    rows = [(i["metadata"]["name"], i["metadata"]["version"], wheel_tags(i["download_info"]["url"]))
            for _, i in sorted(needed.items())]
    return rows, sorted(set(missing))


def check(pip_python: str, python: str, platform: Platform, reqs: Sequence[str],
          env: dict[str, str]) -> Result:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Resolve one combination, re-resolving until no target-only dependency is left out."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    target, reqs = marker_env(python, platform), list(reqs)
    for _ in range(5):
        report, err = pip_resolve(pip_python, python, platform, reqs, env)
        if report is None:
            return Result(python, platform, False, failing_package(err))
        rows, missing = walk(report, reqs, target)
        if not missing:
            return Result(python, platform, True, packages=rows)
        reqs += missing
    return Result(python, platform, False, "markers did not converge: " + ", ".join(missing))


def render(results: Sequence[Result], pythons: Sequence[str], platforms: Sequence[Platform],
           reqs: Sequence[str], header: str) -> str:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Lay the verdicts out as a platform x python table, then the wheels behind each cell."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    cell = {(r.platform.key, r.python): r for r in results}
    out = [header, "", "Requirements: " + ", ".join(f"`{r}`" for r in reqs), "",
           "| Platform | " + " | ".join(f"CPython {p}" for p in pythons) + " |",
           "|---|" + "---|" * len(pythons)]
    for plat in platforms:
        verdicts = [cell[plat.key, p] for p in pythons]
        out.append(f"| {plat.label} | " + " | ".join(
            "OK" if r.ok else "FAIL: " + r.detail.replace("|", "\\|") for r in verdicts) + " |")
    for r in results:
        out += ["", f"### {r.platform.label} · CPython {r.python}: {'OK' if r.ok else 'FAIL'}", ""]
        out += [f"- `{n}=={v}` — `{t}`" for n, v, t in r.packages] or [f"- {r.detail}"]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""Check the requested matrix, print (and optionally save) the report, fail on any gap."""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", nargs="+", choices=PYTHONS, default=list(PYTHONS))
    ap.add_argument("--platform", nargs="+", choices=[p.key for p in PLATFORMS],
                    default=[p.key for p in PLATFORMS])
    ap.add_argument("--extra-req", nargs="+", default=[], help="also check these requirements")
    ap.add_argument("--no-project", action="store_true", help="check only --extra-req")
    ap.add_argument("--output", type=Path, help="also write the Markdown report here")
    ap.add_argument("--pip-python", default=sys.executable, help="interpreter whose pip to run")
    ap.add_argument("--pip-config", action="store_true", help="honour local pip configuration")
    ap.add_argument("--jobs", type=int, default=4, help="parallel pip resolutions")
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else list(argv)

    reqs = [] if args.no_project else project_requirements(ROOT / "pyproject.toml")
    reqs += args.extra_req
    platforms = [p for p in PLATFORMS if p.key in args.platform]
    pythons = [p for p in PYTHONS if p in args.python]
    env = pip_env(args.pip_config)
    pip_version = subprocess.run([args.pip_python, "-m", "pip", "--version"], capture_output=True,
                                 text=True, env=env, check=True).stdout.split(" from ")[0]
    combos = [(py, plat) for plat in platforms for py in pythons]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda c: check(args.pip_python, *c, reqs, env), combos))

    when = dt.datetime.now(dt.timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
    command = shlex.join([Path(sys.executable).name, sys.argv[0], *argv])
    header = f"## Wheel check run {when} with {pip_version}\n\nCommand: `{command}`"
    text = render(results, pythons, platforms, reqs, header)
    print(text, end="")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
