from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from yomiage.errors import ModelLoadError
from yomiage.sbv2.safetensors import iter_tensors

st_numpy = pytest.importorskip("safetensors.numpy")


def test_same_tensors_as_the_safetensors_library(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    rng = np.random.default_rng(0)
    tensors = {
        "a": rng.standard_normal((3, 4)).astype(np.float32),
        "b.half": rng.standard_normal((5,)).astype(np.float16),
        "c.ids": np.arange(6, dtype=np.int64).reshape(2, 3),
        "d.empty": np.zeros((0, 2), dtype=np.float32),
    }
    st_numpy.save_file(tensors, str(path))
    got = dict(iter_tensors(path))
    assert set(got) == set(tensors)
    np.testing.assert_array_equal(got["a"], tensors["a"])
    assert got["b.half"].dtype == np.float32
    np.testing.assert_array_equal(got["b.half"], tensors["b.half"].astype(np.float32))
    np.testing.assert_array_equal(got["c.ids"], tensors["c.ids"])
    assert got["d.empty"].shape == (0, 2)
    assert dict(iter_tensors(path, float32=False))["b.half"].dtype == np.float16
    assert "a" not in dict(iter_tensors(path, skip={"a"}))


def test_bfloat16_is_widened(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    path = tmp_path / "bf.safetensors"
    value = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    st_torch.save_file({"x": value}, str(path))
    np.testing.assert_array_equal(dict(iter_tensors(path))["x"], [1.5, -2.25, 3.0])


@pytest.mark.parametrize("cut", [4, 20, -8])
def test_truncated_file_names_file_and_tensor(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "w.safetensors"
    st_numpy.save_file({"weight": np.ones((64, 64), dtype=np.float32)}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    with pytest.raises(ModelLoadError, match=r"w\.safetensors"):
        list(iter_tensors(path))
