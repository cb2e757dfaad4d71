"""The frontend works with no network and no home directory, on the first call."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CODE = (
    "from yomiage.text import Frontend, UserDictionary\n"
    "p = Frontend(None).g2p('円周率は3.14、成功率は50%です。GitHubでJSONを公開。')\n"
    "print(' '.join(p.phones))\n"
)


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return probe.returncode == 0


def _env(tmp_path: Path) -> dict[str, str]:
    missing = tmp_path / "no-such-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("YOMIAGE_")}
    env.update(
        HOME=str(missing),
        XDG_CACHE_HOME=str(missing / "cache"),
        XDG_DATA_HOME=str(missing / "data"),
        # Anything that tried HTTP would hit a closed port.
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
    )
    return env


def test_frontend_offline_without_home(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", CODE]
    if _can_unshare():
        cmd = ["unshare", "-n", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("_ e N sh u u r i ts u")
    assert not (tmp_path / "no-such-home").exists(), "the frontend wrote into HOME"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root for a mount namespace"
)
def test_frontend_on_read_only_install(tmp_path: Path) -> None:
    """Remount the whole tree read-only (like a system package) and read text."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare not available")
    script = f'mount --bind -o ro / / 2>/dev/null || mount -o remount,bind,ro / /; exec {sys.executable} -c "$0"'
    code = (
        "import os, yomiage\n"
        "assert not os.access(os.path.dirname(yomiage.__file__), os.W_OK), 'install is writable'\n"
        + CODE
    )
    cmd = ["unshare", "-m", "-n", "sh", "-c", script, code]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    if "mount" in out.stderr and out.returncode != 0:
        pytest.skip(f"cannot remount read-only here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("_ e N")
