"""hf:// and local sources, the cache, offline mode and the catalog, against a real
HTTP server on loopback that speaks the hub's file API (tests/sources_servers.py)."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TEST_VOICES
from tests.sources_servers import LFS_MIN, TOKEN, HubState, fake_hub
from yomiage.cli import main
from yomiage.errors import (
    CacheError,
    InvalidSourceError,
    ModelLoadError,
    OfflineError,
    SourceAuthError,
    SourceNetworkError,
    SourceNotFoundError,
    UnknownVoiceError,
    YomiageError,
)
from yomiage.sources import (
    Cache,
    HubSource,
    LocalSource,
    S3Source,
    download,
    is_cached,
    lookup,
    parse,
    resolve,
    resolve_name,
)

MODEL = TEST_VOICES / "hayakoe"  # a voice folder as the hub holds one
BIG = "synthesizer.onnx"  # the one large file the repository below holds (3.5 MB)
SRC = "hf://test/voice/tiny"


def _fixture_files() -> dict[str, bytes]:
    names = ("config.json", "style_vectors.npy", BIG)
    return {name: (MODEL / name).read_bytes() for name in names}


@pytest.fixture(autouse=True)
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads or writes the real user cache, or sees the caller's hub settings."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("YOMIAGE_CACHE", str(cache))
    for var in ("HF_HUB_OFFLINE", "YOMIAGE_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # closed: only fixtures may open one
    return cache


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    files = _fixture_files()
    with fake_hub() as (endpoint, state):
        state.add_repo(
            "test/voice",
            {**{f"tiny/{k}": v for k, v in files.items()}, "other/readme.txt": b"not a voice"},
        )
        v2 = dict(files, **{"config.json": files["config.json"].replace(b"{", b'{"v2": 1, ', 1)})
        state.add_repo("test/voice", {f"tiny/{k}": v for k, v in v2.items()}, revision="v2")
        state.add_repo("test/private", {f"tiny/{k}": v for k, v in files.items()}, private=True)
        state.add_repo(
            "lemondouble/hayakoe",
            {
                "onnx/speakers/jvnv-F1-jp/config.json": b'{"name": "F1"}',
                "onnx/speakers/jvnv-F1-jp/style_vectors.npy": b"\x93NUMPY" + bytes(200),
                "onnx/speakers/jvnv-F1-jp/synthesizer.onnx": os.urandom(5000),
                "onnx/speakers/jvnv-F1-jp/duration_predictor.onnx": os.urandom(3000),
                "onnx/speakers/jvnv-F2-jp/config.json": b'{"name": "F2"}',
                "onnx/bert/q8/bert_q8.onnx": os.urandom(4000),
                "bert/tokenizer/tokenizer.json": b"{}",
            },
        )
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        yield state


def _same_as_fixture(folder: Path) -> None:
    files = _fixture_files()
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    for name, data in files.items():
        assert (folder / name).read_bytes() == data, name


# -- parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hf://owner/repo", HubSource("owner/repo")),
        ("hf://owner/repo@v1.0", HubSource("owner/repo", "v1.0")),
        ("hf://owner/repo@refs%2Fpr%2F3/a/b", HubSource("owner/repo", "refs/pr/3", "a/b")),
        ("hf://litagin/style_bert_vits2_jvnv/jvnv-F1-jp/",
         HubSource("litagin/style_bert_vits2_jvnv", "main", "jvnv-F1-jp")),
        ("https://huggingface.co/owner/repo", HubSource("owner/repo")),
        ("https://huggingface.co/owner/repo/tree/dev/voices/a", HubSource("owner/repo", "dev", "voices/a")),
        ("https://hf.co/owner/repo/resolve/main/a/config.json", HubSource("owner/repo", "main", "a")),
        ("https://huggingface.co/owner/repo/blob/abc/config.json", HubSource("owner/repo", "abc", "")),
        ("s3://bucket", S3Source("bucket")),
        ("s3://bucket/voices/tiny/", S3Source("bucket", "voices/tiny")),
        ("file:///opt/voices/a", LocalSource(Path("/opt/voices/a"))),
        ("voices/a", LocalSource(Path("voices/a"))),
        (Path("/x"), LocalSource(Path("/x"))),
    ],
)  # fmt: skip
def test_parse_sources(text: str | Path, expected: object) -> None:
    assert parse(text) == expected
    if isinstance(expected, HubSource):
        assert parse(str(expected)) == expected  # str() is the canonical hf:// form


@pytest.mark.parametrize(
    "text",
    [
        "hf://owner",
        "hf://owner/repo/../x",
        "hf://owner/repo/a/../../x",
        "hf://owner/repo//etc/passwd",
        "hf://owner/repo/a%2F..%2F..%2Fx",
        "hf://../repo",
        "hf://owner/repo@../x",
        "hf://owner/repo@",
        "hf://owner/re\0po",
        "s3://bucket/../x",
        "s3://bucket/a//b",
        "s3://../x",
        "https://huggingface.co/datasets/a/b",
        "https://example.com/a/b",
        "ftp://host/x",
        "file://otherhost/x",
        "",
    ],
)
def test_parse_rejects_bad_and_unsafe_sources(text: str) -> None:
    with pytest.raises(InvalidSourceError) as info:
        parse(text)
    assert isinstance(info.value, YomiageError) and isinstance(info.value, ValueError)


def test_hub_web_address_on_a_mirror(hub: HubState) -> None:
    endpoint = os.environ["HF_ENDPOINT"]
    assert parse(f"{endpoint}/test/voice/tree/v2/tiny") == HubSource("test/voice", "v2", "tiny")


# -- local ---------------------------------------------------------------------


def test_local_sources(tmp_path: Path) -> None:
    assert resolve(MODEL) == MODEL
    assert resolve(str(MODEL)) == MODEL
    assert resolve(MODEL.as_uri()) == MODEL
    assert is_cached(MODEL)
    with pytest.raises(SourceNotFoundError, match="no such folder") as info:
        resolve(tmp_path / "missing")
    assert isinstance(info.value, ModelLoadError)
    with pytest.raises(InvalidSourceError, match="NUL"):
        resolve("voices/\0x")


# -- the hub -------------------------------------------------------------------


def test_hub_public_download_then_cached(hub: HubState, cache_root: Path) -> None:
    folder = resolve(SRC)
    assert folder == cache_root / "hub" / "test--voice" / "main" / "tiny"
    _same_as_fixture(folder)
    assert not (folder.parent / "other").exists()  # only the subfolder
    paths = hub.paths()
    assert any(p.startswith("/cdn/") for p in paths), "LFS files come through the redirect"
    assert sum("/tree/" in p for p in paths) == 2, "the file list has two pages"
    assert is_cached(SRC)
    assert resolve(SRC) == folder
    assert hub.paths() == paths, "a complete cached folder needs no request"


def test_hub_revision(hub: HubState) -> None:
    main_dir = resolve(SRC)
    v2_dir = resolve("hf://test/voice@v2/tiny")
    assert v2_dir != main_dir
    assert json.loads((v2_dir / "config.json").read_text())["v2"] == 1
    assert "v2" not in json.loads((main_dir / "config.json").read_text())
    assert any("/resolve/" + hub.repos["test/voice"].revisions["v2"].sha in p for p in hub.paths())


def test_hub_private_needs_the_token(hub: HubState, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SourceAuthError, match="HF_TOKEN") as info:
        resolve("hf://test/private/tiny")
    assert "test/private" in str(info.value)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    # The CDN answers 400 to a request that carries the token: success shows it was dropped.
    _same_as_fixture(resolve("hf://test/private/tiny"))


def test_hub_wrong_token(hub: HubState) -> None:
    with pytest.raises(SourceAuthError, match="refused"):
        resolve("hf://test/private/tiny", token="hf_wrong")


def test_hub_not_found(hub: HubState) -> None:
    with pytest.raises(SourceNotFoundError, match="no such revision"):
        resolve("hf://test/voice@nope/tiny")
    with pytest.raises(SourceNotFoundError, match="no such file or folder"):
        resolve("hf://test/voice/missing-folder")
    hub.missing.add(f"tiny/{BIG}")
    with pytest.raises(SourceNotFoundError, match=BIG) as info:
        resolve(SRC)
    assert "test/voice" in str(info.value)
    assert not is_cached(SRC)


def test_network_down_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(SourceNetworkError, match="cannot reach the hub") as info:
        resolve(SRC)
    assert SRC in str(info.value)


def test_server_dies_mid_file_then_resumes(hub: HubState) -> None:
    hub.cut_after, hub.cuts_left = 100_000, 1
    with pytest.raises(SourceNetworkError, match="run again"):
        resolve(SRC)
    folder = Cache.at().hub_snapshot(parse(SRC)).folder  # type: ignore[arg-type]
    assert not (folder / BIG).exists(), "a cut file is never under its real name"
    assert (folder / f"{BIG}.incomplete").stat().st_size == 100_000
    assert not is_cached(SRC)
    _same_as_fixture(resolve(SRC))
    ranges = [h.get("Range") for p, h in hub.requests if p.startswith("/cdn/")]
    assert "bytes=100000-" in ranges, "the second run resumes the partial file"


def test_corrupted_cached_file_is_fetched_again(hub: HubState) -> None:
    folder = resolve(SRC)
    path = folder / BIG
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, other bytes
    assert not is_cached(SRC)
    before = len(hub.requests)
    _same_as_fixture(resolve(SRC))
    assert any(p.startswith("/cdn/") for p in hub.paths()[before:])
    (folder / "config.json").unlink()
    _same_as_fixture(resolve(SRC))


def test_offline_opens_no_socket(
    hub: HubState, monkeypatch: pytest.MonkeyPatch, cache_root: Path
) -> None:
    def no_network(*args: object) -> None:
        raise AssertionError("offline mode opened a connection")

    with monkeypatch.context() as m:
        m.setattr(socket.socket, "connect", no_network)
        with pytest.raises(OfflineError) as info:
            resolve(SRC, offline=True)
        assert f"yomiage download {SRC}" in str(info.value)
        assert info.value.command == f"yomiage download {SRC}"
        m.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(OfflineError, match="HF_HUB_OFFLINE") as info:
            resolve_name("jvnv-F1-jp")
        assert "`yomiage download jvnv-F1-jp`" in str(info.value)
        with pytest.raises(OfflineError, match="--cache-dir"):
            resolve(SRC, cache_dir=cache_root / "other")
    folder = resolve(SRC)
    (folder / "config.json").unlink()
    with monkeypatch.context() as m:
        m.setattr(socket.socket, "connect", no_network)
        with pytest.raises(OfflineError, match=r"config\.json"):
            resolve(SRC, offline=True)
    resolve(SRC)
    with monkeypatch.context() as m:
        m.setattr(socket.socket, "connect", no_network)
        _same_as_fixture(resolve(SRC, offline=True))


def test_two_processes_fill_an_empty_cache_at_once(hub: HubState, tmp_path: Path) -> None:
    code = "import sys; from yomiage.sources import resolve; print(resolve(sys.argv[1]))"
    cmd = [sys.executable, "-c", code, SRC]
    pipe = subprocess.PIPE
    procs = [subprocess.Popen(cmd, stdout=pipe, stderr=pipe, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err
    assert outs[0][0] == outs[1][0]
    _same_as_fixture(Path(outs[0][0].strip()))
    lfs = sum(len(data) >= LFS_MIN for data in _fixture_files().values())
    assert sum(p.startswith("/cdn/") for p in hub.paths()) == lfs, "the lock let one process fetch"
    assert is_cached(SRC)


def test_disk_full_leaves_no_trusted_file(
    hub: HubState, monkeypatch: pytest.MonkeyPatch, cache_root: Path
) -> None:
    real_fsync = os.fsync

    def full(fd: int) -> None:
        if os.fstat(fd).st_size > 10_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(CacheError, match="no space left") as info:
        resolve(SRC)
    assert str(cache_root) in str(info.value) and BIG in str(info.value)
    folder = cache_root / "hub" / "test--voice" / "main" / "tiny"
    assert not (folder / BIG).exists() and not (folder / f"{BIG}.incomplete").exists()
    assert not is_cached(SRC)
    monkeypatch.setattr(os, "fsync", real_fsync)
    _same_as_fixture(resolve(SRC))


def test_remote_file_names_cannot_escape_the_cache(hub: HubState, cache_root: Path) -> None:
    hub.add_repo("test/evil", {"tiny/config.json": b"{}", "tiny/../../../escaped": b"x"})
    with pytest.raises(InvalidSourceError, match="remote file name"):
        resolve("hf://test/evil/tiny")
    assert not any(p.name == "escaped" for p in cache_root.parent.rglob("escaped"))


# -- the cache helpers ---------------------------------------------------------


def test_converted_dir_staging_and_lock(cache_root: Path) -> None:
    cache = Cache.at()
    assert cache.root == cache_root
    target = cache.converted_dir("tiny-abc123")
    assert target == cache_root / "converted" / "tiny-abc123"
    with cache.lock("tiny-abc123"), cache.staging(target) as tmp:
        (tmp / "voice.json").write_text("{}")
        assert not target.exists()
    assert (target / "voice.json").read_text() == "{}"
    assert oct(target.stat().st_mode & 0o055) == oct(0o055 & ~_umask())

    def failing_conversion() -> None:
        with cache.staging(target) as tmp:
            (tmp / "voice.json").write_text("half")
            raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError):
        failing_conversion()
    assert (target / "voice.json").read_text() == "{}", "a failed write keeps the old bundle"
    assert [p.name for p in target.parent.iterdir()] == ["tiny-abc123"]
    for bad in ("../x", "a/b", "/abs", "x\0", "", ".."):
        with pytest.raises(InvalidSourceError):
            cache.converted_dir(bad)
    with pytest.raises(InvalidSourceError), cache.staging(Path("/tmp/elsewhere")):
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_cache_dir_argument_wins(hub: HubState, tmp_path: Path) -> None:
    folder = resolve(SRC, cache_dir=tmp_path / "mine")
    assert folder.is_relative_to(tmp_path / "mine")
    assert is_cached(SRC, cache_dir=tmp_path / "mine") and not is_cached(SRC)


# -- the catalog, download and the CLI -------------------------------------------


def test_catalog() -> None:
    entry = lookup("jvnv-F1-jp")
    assert entry.sbv2_source == "hf://litagin/style_bert_vits2_jvnv/jvnv-F1-jp"
    assert entry.onnx_source == "hf://lemondouble/hayakoe/onnx/speakers/jvnv-F1-jp"
    assert entry.license.startswith("CC BY-SA 4.0") and "Happy" in entry.styles
    with pytest.raises(UnknownVoiceError, match="jvnv-M2-jp") as info:
        lookup("jvnv-X9")
    assert isinstance(info.value, ModelLoadError)


def test_download_names_and_bert(hub: HubState, cache_root: Path) -> None:
    paths = download(["jvnv-F1-jp"], bert=True)
    rev = cache_root / "hub" / "lemondouble--hayakoe" / "main"
    assert paths == [
        rev / "onnx" / "speakers" / "jvnv-F1-jp",
        rev / "onnx" / "bert" / "q8",
        rev / "bert" / "tokenizer",
    ]
    assert (paths[0] / "synthesizer.onnx").stat().st_size == 5000
    assert resolve_name("jvnv-F1-jp", offline=True) == paths[0]
    assert resolve_name(SRC.replace("tiny", "tiny"), offline=False).name == "tiny"


def test_cli_download_and_voices(
    hub: HubState, capsys: pytest.CaptureFixture[str], cache_root: Path
) -> None:
    assert main(["voices"]) == 0
    out = capsys.readouterr().out
    assert "jvnv-F1-jp" in out and "CC BY-SA 4.0" in out and "cached" not in out
    assert main(["download", "jvnv-F1-jp", SRC]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        str(cache_root / "hub" / "lemondouble--hayakoe" / "main" / "onnx/speakers/jvnv-F1-jp"),
        str(cache_root / "hub" / "test--voice" / "main" / "tiny"),
    ]
    assert main(["voices", "--json"]) == 0
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert records["jvnv-F1-jp"]["cached"] and not records["jvnv-F2-jp"]["cached"]
    assert not records["deberta-v2-large-japanese-char-wwm"]["cached"]
    assert main(["voices"]) == 0
    row = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("jvnv-F1-jp"))
    assert "cached" in row
    assert main(["download", "no-such-voice"]) == 1
    assert "known voices: jvnv-F1-jp" in capsys.readouterr().err


def test_cli_download_in_a_subprocess(hub: HubState, tmp_path: Path) -> None:
    cache = tmp_path / "docker-cache"
    env = dict(os.environ, YOMIAGE_CACHE=str(cache))
    out = subprocess.run(
        [sys.executable, "-m", "yomiage", "download", "jvnv-F1-jp"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(cache)
    env["HF_HUB_OFFLINE"] = "1"
    out = subprocess.run(
        [sys.executable, "-m", "yomiage", "download", "jvnv-F2-jp"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1 and "yomiage download jvnv-F2-jp" in out.stderr
