"""What the user install weighs (issue 49, item 19): the wheel's yomiage package is its
code and one pack of both OpenJTalk dictionaries (~25 MB installed), where it held the
two unpacked (210 MB), which took the user install to 712 MB."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import yomiage

PACK = "yomiage/_data/openjtalk_dictionaries.pack"


@pytest.mark.slow
def test_the_wheel_carries_the_dictionaries_packed(tmp_path: Path) -> None:
    root = Path(yomiage.__file__).resolve().parents[2]  # the checkout yomiage comes from
    if not (root / "pyproject.toml").is_file():
        pytest.skip(f"yomiage is not imported from a checkout ({root})")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", str(root), "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("yomiage-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        files = {info.filename: info.file_size for info in archive.infolist()}
    assert PACK in files
    assert not [name for name in files if name.endswith("sys.dic")]
    installed = sum(size for name, size in files.items() if name.startswith("yomiage/"))
    assert installed < 30 * 2**20, f"the yomiage package installs {installed / 2**20:.0f} MiB"
