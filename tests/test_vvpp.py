"""``yomiage vvpp``: a package the VOICEVOX editor installs and starts, and ``serve --use_gpu``.

What the editor does with a package, as these tests check it: it unpacks the zip,
reads ``engine_manifest.json`` (``name``, ``uuid``, ``command``, ``port``, ``version``
and ``supported_features`` are required), marks the file named by ``command``
executable (macOS/Linux), and runs the command's first word as a file of the package,
in the package's folder, appending ``--use_gpu`` in GPU mode and ``--host H --port P``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import stat
import subprocess
import sys
import time
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest

from yomiage.cli.main import build_parser, main
from yomiage.cli.serve import gpu_device
from yomiage.voicevox.engine_id import ENGINE_UUID
from yomiage.voicevox.vvpp import ENGINE_PORT, SUPPORTED_FEATURES, windows_launcher

posix_only = pytest.mark.skipif(os.name == "nt", reason="the package's run script is for sh")

EDITOR_ARGS = ["--host", "127.0.0.1", "--port", str(ENGINE_PORT)]  # what the editor appends


def _build(tmp_path: Path, *flags: str) -> Path:
    out = tmp_path / "yomiage.vvpp"
    assert main(["vvpp", str(out), *flags]) == 0
    return out


def _manifest(package: Path) -> dict[str, Any]:
    with zipfile.ZipFile(package) as archive:
        return json.loads(archive.read("engine_manifest.json"))  # type: ignore[no-any-return]


def _run_words(package: Path) -> list[str]:
    """The words of the run script's ``exec`` line."""
    with zipfile.ZipFile(package) as archive:
        script = archive.read("run").decode("utf-8")
    assert script.startswith("#!/bin/sh\n")
    line = next(line for line in script.splitlines() if line.startswith("exec "))
    return shlex.split(line)[1:]


def _serve_flags(package: Path) -> list[str]:
    words = _run_words(package)
    assert words[:4] == [sys.executable, "-m", "yomiage", "serve"] and words[-1] == "$@"
    return words[4:-1]


@posix_only
def test_manifest_has_what_the_editor_requires(tmp_path: Path, test_voice: Path) -> None:
    package = _build(tmp_path, "--model", f"tiny={test_voice}")
    manifest = _manifest(package)
    assert manifest["name"] == "yomiage" and manifest["uuid"] == ENGINE_UUID
    assert isinstance(manifest["version"], str) and manifest["version"]
    assert type(manifest["port"]) is int and manifest["port"] == ENGINE_PORT
    assert isinstance(manifest["command"], str)
    for key, feature in manifest["supported_features"].items():
        assert isinstance(key, str)
        assert isinstance(feature["type"], str) and isinstance(feature["name"], str)
        assert isinstance(feature["value"], bool)
    # VOICEVOX's own manifest format: the files it names are in the package
    with zipfile.ZipFile(package) as archive:
        names = set(archive.namelist())
        for field in ("icon", "terms_of_service", "update_infos", "dependency_licenses"):
            assert manifest[field] in names
        assert archive.read(manifest["icon"]).startswith(b"\x89PNG\r\n\x1a\n")
        updates = json.loads(archive.read(manifest["update_infos"]))
        licenses = json.loads(archive.read(manifest["dependency_licenses"]))
    assert updates[0]["version"] == manifest["version"]
    assert all(isinstance(d, str) for d in updates[0]["descriptions"])
    assert licenses and all(isinstance(x["name"], str) and x["text"] for x in licenses)
    assert manifest["frame_rate"] == manifest["default_sampling_rate"] / 512


@posix_only
def test_command_is_one_executable_file_of_the_package(tmp_path: Path, test_voice: Path) -> None:
    """The editor marks ``command`` itself executable: with arguments in it the install
    fails on macOS and Linux, so they live in the script."""
    package = _build(tmp_path, "--model", f"tiny={test_voice}")
    command = _manifest(package)["command"]
    with zipfile.ZipFile(package) as archive:
        info = archive.getinfo(command)
    assert shlex.split(command) == [command]
    assert (info.external_attr >> 16) & 0o777 == 0o755


def test_the_same_uuid_as_the_running_server() -> None:
    pytest.importorskip("fastapi")
    from yomiage.server.voicevox.routes import _manifest as server_manifest

    served = server_manifest(44100, "voicevox")
    assert served["uuid"] == ENGINE_UUID
    for key, (value, _label) in SUPPORTED_FEATURES.items():
        assert served["supported_features"].get(key, value) == value, key


@posix_only
def test_command_runs_serve_with_the_voice_flags(tmp_path: Path, test_voice: Path) -> None:
    package = _build(tmp_path, "--model", f"tiny={test_voice}", "--threads", "1", "--offline")
    flags = _serve_flags(package)
    for editor in (EDITOR_ARGS, ["--use_gpu", *EDITOR_ARGS]):
        args = build_parser().parse_args(["serve", *flags, *editor])
        assert args.func.__module__ == "yomiage.cli.serve"
        assert (args.host, args.port) == ("127.0.0.1", ENGINE_PORT)
        assert args.model == [f"tiny={test_voice}"]
        assert args.threads == 1 and args.offline and args.device == "cpu"
        assert args.use_gpu == ("--use_gpu" in editor)
    assert "--device" not in flags  # defaults are serve's own, not copied


@posix_only
def test_compat_reaches_the_engine_command(tmp_path: Path, test_voice: Path) -> None:
    flags = _serve_flags(_build(tmp_path, "--model", str(test_voice), "--compat", "aivisspeech"))
    assert build_parser().parse_args(["serve", *flags]).compat == "aivisspeech"
    (tmp_path / "plain").mkdir()
    plain = _serve_flags(_build(tmp_path / "plain", "--model", str(test_voice)))
    assert "--compat" not in plain  # serve's default, not copied


@posix_only
def test_relative_paths_become_absolute(
    tmp_path: Path, test_voice: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The editor starts the engine in its own folder: a relative path would point there."""
    monkeypatch.chdir(test_voice.parent)
    package = _build(tmp_path, "--model", test_voice.name, "--user-dict", "words.json")
    args = build_parser().parse_args(["serve", *_serve_flags(package)])
    name, _, source = args.model[0].partition("=")
    assert Path(source) == test_voice.resolve() and name
    assert Path(args.user_dict) == test_voice.parent.resolve() / "words.json"


def test_windows_command_keeps_paths_whole() -> None:
    """On Windows the flags are in the command, split shell-style by the editor."""
    model = r"C:\Users\me\My Voices\tiny"
    launcher = windows_launcher(b"MZ", ["--model", f"tiny={model}"])
    words = shlex.split(launcher.command)
    assert words[:2] == ["run.exe", "serve"] and launcher.file.name == "run.exe"
    args = build_parser().parse_args([*words[1:], *EDITOR_ARGS])
    assert args.model == [f"tiny={model}"] and args.port == ENGINE_PORT


def test_a_failed_write_leaves_no_file(
    tmp_path: Path,
    test_voice: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)  # the rename that publishes the file
    assert main(["vvpp", str(tmp_path / "out.vvpp"), "--model", str(test_voice)]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # neither the package nor its temporary file


@pytest.mark.parametrize(
    ("output", "says"),
    [
        ("engine.zip", "name the package OUT.vvpp"),
        ("missing/engine.vvpp", "no folder"),
        ("folder.vvpp", "is a folder"),
    ],
)
def test_bad_output_paths_are_one_line(
    tmp_path: Path,
    test_voice: Path,
    capsys: pytest.CaptureFixture[str],
    output: str,
    says: str,
) -> None:
    (tmp_path / "folder.vvpp").mkdir()
    assert main(["vvpp", str(tmp_path / output), "--model", str(test_voice)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("yomiage vvpp: ") and says in err and err.count("\n") == 1


def test_a_missing_voice_fails_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.vvpp"
    assert main(["vvpp", str(out), "--model", str(tmp_path / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err and not out.exists()


def _fake_torch(monkeypatch: pytest.MonkeyPatch, *, cuda: bool) -> None:
    cuda_module = types.SimpleNamespace(is_available=lambda: cuda)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda_module))


@pytest.mark.parametrize("flag", ["--use_gpu", "--use-gpu"])
def test_use_gpu_without_cuda_fails_in_one_line(
    test_voice: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
) -> None:
    """GPU mode where there is no GPU must say so, not quietly run on the CPU."""
    _fake_torch(monkeypatch, cuda=False)
    assert main(["serve", "--model", str(test_voice), flag, *EDITOR_ARGS]) == 1
    err = capsys.readouterr().err
    assert err.startswith("yomiage serve: --use_gpu: PyTorch sees no CUDA device")
    assert err.count("\n") == 1


def test_use_gpu_without_torch_names_the_extra(
    test_voice: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch: ImportError
    assert main(["serve", "--model", str(test_voice), "--use_gpu"]) == 1
    assert "yomiage[torch]" in capsys.readouterr().err


def test_use_gpu_means_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch(monkeypatch, cuda=True)
    assert gpu_device("cpu") == "cuda"
    assert gpu_device("cuda:1") == "cuda:1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@posix_only
@pytest.mark.server
def test_the_editor_can_start_the_package(tmp_path: Path, test_voice: Path) -> None:
    """Install and start the package as the editor does, then ask what the editor asks."""
    httpx = pytest.importorskip("httpx")
    package = _build(tmp_path, "--model", f"tiny={test_voice}", "--threads", "1")
    engine_dir = tmp_path / "vvpp-engines" / f"yomiage+{ENGINE_UUID}"
    with zipfile.ZipFile(package) as archive:
        archive.extractall(engine_dir)
    manifest = json.loads((engine_dir / "engine_manifest.json").read_text("utf-8"))
    executable = engine_dir / manifest["command"]
    executable.chmod(executable.stat().st_mode | stat.S_IXUSR)
    port = _free_port()
    process = subprocess.Popen(
        [str(executable), "--host", "127.0.0.1", "--port", str(port)],
        cwd=engine_dir,
        env={**os.environ, "VV_OUTPUT_LOG_UTF8": "1"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url, end = f"http://127.0.0.1:{port}", time.monotonic() + 60
        while True:  # the editor polls /version until the engine answers
            assert process.poll() is None, process.communicate()[1]
            try:
                if httpx.get(f"{url}/version").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < end
            time.sleep(0.1)
        served = httpx.get(f"{url}/engine_manifest").json()
        assert served["uuid"] == manifest["uuid"] and served["name"] == manifest["name"]
        assert httpx.get(f"{url}/speakers").json()[0]["styles"]
    finally:
        process.send_signal(signal.SIGTERM)  # the editor stops engines with a kill
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
