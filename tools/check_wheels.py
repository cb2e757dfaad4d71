#!/usr/bin/env python3
"""Prove that yomiage's runtime dependencies install from binary wheels only.

Users must never need a compiler, so for each (CPython, platform) pair pip resolves the whole
``[project].dependencies`` tree with ``--only-binary=:all:`` for that foreign target, as a
``--dry-run --report`` (metadata only).  pip evaluates markers with the *host's* values, so the
tree is re-walked with the target's and anything pip skipped (``colorama; platform_system ==
"Windows"``) is added and re-resolved.  Local pip config (find-links, extra indexes, constraints)
is ignored unless ``--pip-config``, so the verdict is about the package index alone.
"""

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
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomllib is missing before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
MANYLINUX_GLIBC = range(34, 16, -1)  # manylinux_2_34 ... manylinux_2_17 (manylinux2014)
# PIP_* variables that only say how to reach the index; the rest could mask it.
KEEP = "INDEX_URL CERT CLIENT_CERT TRUSTED_HOST PROXY DEFAULT_TIMEOUT RETRIES CACHE_DIR"
PIP_ENV_KEEP = frozenset(f"PIP_{name}" for name in KEEP.split())
PIP_INSTALL = "install --dry-run --ignore-installed --quiet --only-binary=:all: --implementation cp"
MARKERS = ("os_name", "sys_platform", "platform_system", "platform_machine")
SCOPE = (
    "Only wheels count (`--only-binary=:all:`), for the whole dependency tree with each target's"
    " own environment markers; Linux wheels may need glibc ≤ 2.34, macOS ones macOS ≤ 14."
)


@dataclass(frozen=True)
class Platform:
    """A target the wheels must cover: pip's platform tags plus the marker values it lacks."""

    key: str
    label: str
    tags: tuple[str, ...]
    markers: tuple[str, str, str, str]  # values for MARKERS, which pip takes from the host


def _linux(arch: str) -> Platform:
    """Accept every manylinux wheel a glibc 2.34 system (RHEL 9, Ubuntu 22.04) can install."""
    tags = (f"manylinux2014_{arch}", *(f"manylinux_2_{g}_{arch}" for g in MANYLINUX_GLIBC))
    label = f"Linux {arch} (manylinux, glibc ≤ 2.34)"
    return Platform(f"linux-{arch}", label, tags, ("posix", "linux", "Linux", arch))


MACOS = ("macosx_11_0_arm64", "macosx_14_0_arm64")  # pip adds 12 and 13 in between
PLATFORMS = (
    _linux("x86_64"),
    _linux("aarch64"),
    Platform("macos-arm64", "macOS arm64 (11–14)", MACOS, ("posix", "darwin", "Darwin", "arm64")),
    Platform("windows-x64", "Windows x64", ("win_amd64",), ("nt", "win32", "Windows", "AMD64")),
)


@dataclass
class Result:
    """Outcome of one (python, platform) resolution: verdict plus (name, version, wheel tags)."""

    python: str
    platform: Platform
    ok: bool
    detail: str = ""
    packages: list[tuple[str, str, str]] = field(default_factory=list)


def project_requirements(pyproject: Path) -> list[str]:
    """Read the runtime requirements from pyproject.toml so the check cannot drift from it."""
    with pyproject.open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def marker_env(python: str, platform: Platform) -> dict[str, str]:
    """Describe the target for marker evaluation, since pip would use the host's values."""
    full = f"{python}.0"
    env = dict(zip(MARKERS, platform.markers, strict=True))
    env.update(implementation_name="cpython", platform_python_implementation="CPython")
    env.update(python_version=python, python_full_version=full, implementation_version=full)
    return {**env, "platform_release": "", "platform_version": ""}


def pip_env(use_config: bool) -> dict[str, str]:
    """Hide local find-links, extra indexes and constraints so only the index is judged."""
    if use_config:
        return dict(os.environ)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_ENV_KEEP}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def pip_resolve(
    pip_python: str, python: str, platform: Platform, reqs: Sequence[str], env: dict[str, str]
) -> tuple[dict[str, Any] | None, str]:
    """Resolve once with pip for the target; return pip's report, or None and its stderr."""
    target = f"--python-version {python} --abi cp{python.replace('.', '')} --abi abi3 --abi none"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "report.json")
        cmd = [pip_python, "-m", "pip", *PIP_INSTALL.split(), *target.split()]
        cmd += [f"--platform={tag}" for tag in platform.tags]
        cmd += ["--report", str(report), "--target", str(Path(tmp, "target")), *reqs]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0 or not report.exists():
            return None, proc.stderr or proc.stdout
        return json.loads(report.read_text(encoding="utf-8")), ""


def failing_package(stderr: str) -> str:
    """Name what pip could not find (and which versions *do* fit) so the table is actionable."""
    found = re.search(r"satisfies the requirement (\S+) \(from versions: ([^)]*)\)", stderr)
    if found:
        return f"{found[1]} (versions with wheels here: {found[2]})"
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR:")]
    return errors[0] if errors else (stderr.strip().splitlines() or ["pip failed"])[-1]


def wheel_tags(url: str) -> str:
    """Keep only python-abi-platform of the wheel name: that is what this check is about."""
    name = url.rsplit("/", 1)[-1]
    return "-".join(name[:-4].split("-")[-3:]) if name.endswith(".whl") else f"NOT A WHEEL: {name}"


def walk(
    report: dict[str, Any], reqs: Sequence[str], env: dict[str, str]
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Follow the tree with the target's markers: packages needed there, and those pip skipped."""
    installed = {canonicalize_name(i["metadata"]["name"]): i for i in report["install"]}
    needed: dict[str, dict[str, Any]] = {}
    missing: set[str] = set()
    seen: set[tuple[str, str]] = set()
    stack = [(Requirement(r), "") for r in reqs]
    while stack:
        req, extra = stack.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        version = installed[name]["metadata"]["version"] if name in installed else None
        if version is None or not req.specifier.contains(version, prereleases=True):
            req.marker = None
            missing.add(str(req))
            continue
        needed[name] = item = installed[name]
        for ex in ("", *sorted(req.extras)):
            if (name, ex) not in seen:
                seen.add((name, ex))
                stack += [(Requirement(d), ex) for d in item["metadata"].get("requires_dist") or []]
    rows = [
        (i["metadata"]["name"], i["metadata"]["version"], wheel_tags(i["download_info"]["url"]))
        for _, i in sorted(needed.items())
    ]
    return rows, sorted(missing)


def for_target(reqs: Sequence[str], target: dict[str, str]) -> list[str]:
    """The requirements that apply on the target, markers dropped: pip would judge the
    markers by the host (an x86-64-only dependency would be looked for on aarch64)."""
    kept = []
    for line in reqs:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({**target, "extra": ""}):
            req.marker = None
            kept.append(str(req))
    return kept


def check(
    pip_python: str, python: str, platform: Platform, reqs: Sequence[str], env: dict[str, str]
) -> Result:
    """Resolve one combination, re-resolving until no target-only dependency is left out."""
    target = marker_env(python, platform)
    reqs = for_target(reqs, target)
    for _ in range(5):
        report, err = pip_resolve(pip_python, python, platform, reqs, env)
        if report is None:
            return Result(python, platform, False, failing_package(err))
        rows, missing = walk(report, reqs, target)
        if not missing:
            return Result(python, platform, True, packages=rows)
        reqs += missing
    return Result(python, platform, False, "no fixed point: " + ", ".join(reqs))


def render(results: Sequence[Result], pythons: Sequence[str], platforms: Sequence[Platform]) -> str:
    """Lay the verdicts out as a platform x python table, then the wheels behind each cell."""
    cell = {(r.platform.key, r.python): r for r in results}
    head = " | ".join(f"CPython {p}" for p in pythons)
    out = [f"| Platform | {head} |", "|---|" + "---|" * len(pythons)]
    for plat in platforms:
        row = [cell[plat.key, p] for p in pythons]
        verdicts = ("OK" if r.ok else "FAIL: " + r.detail.replace("|", "\\|") for r in row)
        out.append(f"| {plat.label} | " + " | ".join(verdicts) + " |")
    for r in results:
        out += ["", f"### {r.platform.label} · CPython {r.python}: {'OK' if r.ok else 'FAIL'}", ""]
        out += [f"- `{n}=={v}` — `{t}`" for n, v, t in r.packages] or [f"- {r.detail}"]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Check the requested matrix, print (and optionally save) the report, fail on any gap."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--python", nargs="+", choices=PYTHONS, default=list(PYTHONS))
    keys = [p.key for p in PLATFORMS]
    ap.add_argument("--platform", nargs="+", choices=keys, default=keys)
    ap.add_argument("--extra-req", nargs="+", default=[], help="also check these requirements")
    ap.add_argument("--no-project", action="store_true", help="check only --extra-req")
    ap.add_argument("--output", type=Path, help="also write the Markdown report here")
    ap.add_argument(
        "--pip-python",
        help="interpreter whose pip (>= 24.1) to run (default: this one if its pip is new "
        "enough, else a temporary virtual environment with the newest pip)",
    )
    ap.add_argument("--pip-config", action="store_true", help="honour local pip configuration")
    ap.add_argument("--jobs", type=int, default=4, help="parallel pip resolutions")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)

    reqs = [] if args.no_project else project_requirements(ROOT / "pyproject.toml")
    reqs += args.extra_req
    platforms = [p for p in PLATFORMS if p.key in args.platform]
    pythons = [p for p in PYTHONS if p in args.python]
    env = pip_env(args.pip_config)
    with tempfile.TemporaryDirectory(prefix="check-wheels-") as scratch:
        pip_python = args.pip_python or _new_enough_pip(sys.executable, env, Path(scratch))
        return _run(args, argv, reqs, platforms, pythons, env, pip_python)


def _pip_version(python: str, env: dict[str, str]) -> str:
    command = [python, "-m", "pip", "--version"]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout


def _new_enough_pip(python: str, env: dict[str, str], scratch: Path) -> str:
    """``python`` if its pip is >= 24.1, else a fresh venv's interpreter with the newest pip.

    Older pips check Requires-Python against their own interpreter, not
    --python-version (pypa/pip#12216), and would skip versions a target can run.
    """
    try:
        if Version(_pip_version(python, env).split()[1]) >= Version("24.1"):
            return python
    except (subprocess.CalledProcessError, IndexError):
        pass
    venv = scratch / "pip"
    print(f"making a virtual environment with a recent pip in {venv}", file=sys.stderr)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    fresh = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    subprocess.run([fresh, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True, env=env)
    return fresh


def _run(
    args: argparse.Namespace,
    argv: list[str],
    reqs: list[str],
    platforms: list[Platform],
    pythons: list[str],
    env: dict[str, str],
    pip_python: str,
) -> int:
    pip = _pip_version(pip_python, env)
    if Version(pip.split()[1]) < Version("24.1"):  # it would skip versions the target can run
        sys.exit(
            f"{pip.split(' from ')[0]} checks Requires-Python against its own interpreter, "
            "not --python-version (pypa/pip#12216): pass --pip-python with pip >= 24.1"
        )
    combos = [(py, plat) for plat in platforms for py in pythons]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        jobs = [pool.submit(check, pip_python, py, plat, reqs, env) for py, plat in combos]
        results = [job.result() for job in jobs]

    when = dt.datetime.now(dt.timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
    command = shlex.join([Path(sys.executable).name, sys.argv[0], *argv])
    text = "# Binary wheels for every supported CPython and platform\n\n"
    text += f"## Run {when} with {pip.split(' from ')[0]}\n\nCommand: `{command}`\n\n"
    text += "Requirements: " + ", ".join(f"`{r}`" for r in reqs) + "\n\n" + SCOPE + "\n\n"
    text += render(results, pythons, platforms)
    print(text, end="")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
