"""yomiage on Ray Serve, against a real local cluster on 127.0.0.1 (marker ``ray``).

The cluster (2 CPUs, dashboard on loopback for ``serve deploy``) is started
once for the module; each test deploys its own application. The voice comes
from a hub source on a local fake hub, so the tests also see how many times
the replicas downloaded it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
yaml = pytest.importorskip("yaml")

from tests.conftest import TEST_VOICES  # noqa: E402
from tests.ray_loopback import (  # noqa: E402
    SETUP_HOOK,
    listening_beyond_loopback,
    listening_sockets,
)
from tests.sources_servers import LFS_MIN, HubState, fake_hub  # noqa: E402
from yomiage.ray import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = TEST_VOICES / "tiny"
SOURCE = "tiny=hf://test/voices/tiny"
TEXT = "今日はいい天気ですね。"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    http_port: int
    dashboard: str
    hub: HubState
    env: dict[str, str] = field(default_factory=dict)
    sockets_before: set[tuple[str, int]] = field(default_factory=set)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    files = {
        f"tiny/{p.relative_to(TINY).as_posix()}": p.read_bytes()
        for p in sorted(TINY.rglob("*"))
        if p.is_file()
    }
    with fake_hub() as (endpoint, hub):
        hub.add_repo("test/voices", files)
        env = {
            "YOMIAGE_CACHE": str(tmp_path_factory.mktemp("node-cache")),
            "HF_ENDPOINT": endpoint,
            "YOMIAGE_OFFLINE": "",
            "PYTHONPATH": str(ROOT),
        }
        dashboard_port = _free_port()
        before = listening_sockets()
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            dashboard_port=dashboard_port,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            runtime_env={"env_vars": env, "worker_process_setup_hook": SETUP_HOOK},
        )
        try:
            yield Cluster(_free_port(), f"http://127.0.0.1:{dashboard_port}", hub, env, before)
        finally:
            serve.shutdown()
            ray.shutdown()


def _deploy(cluster: Cluster, name: str, prefix: str, **args: object) -> None:
    serve.start(http_options={"host": "127.0.0.1", "port": cluster.http_port})
    serve.run(app({"model": SOURCE, "threads": 1, **args}), name=name, route_prefix=prefix)


@dataclass
class Answer:
    status: int
    body: bytes
    replica: str | None


def _request(port: int, method: str, path: str, body: dict[str, object] | None = None) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return Answer(response.status, response.read(), response.getheader("X-Yomiage-Replica"))
    finally:
        conn.close()


def _speak(port: int, prefix: str = "") -> Answer:
    return _request(port, "POST", f"{prefix}/tts", {"text": TEXT, "format": "wav", "seed": 1})


def _replica_pids(app: str = "pair") -> set[int]:
    """The processes Ray titled as replicas of this application's deployment."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(f"ray::ServeReplica:{app}:yomiage".encode()):
            pids.add(int(entry.name))
    return pids


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_two_replicas_serve_and_share_one_download(cluster: Cluster) -> None:
    _deploy(cluster, "pair", "/", replicas=2)
    try:
        ready = _request(cluster.http_port, "GET", "/ready")
        assert ready.status == 200 and json.loads(ready.body)["voices"] == ["tiny"]
        results: list[Answer] = []
        threads = [
            threading.Thread(target=lambda: results.extend(_speak(cluster.http_port) for _ in range(3)))
            for _ in range(4)
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [a.status for a in results] == [200] * 12
        assert all(a.body[:4] == b"RIFF" for a in results)
        assert len({a.body for a in results}) == 1, "same text and seed: same audio everywhere"
        assert len({a.replica for a in results}) == 2, "both replicas answered"
        assert listening_beyond_loopback(cluster.sockets_before) == [], "all on 127.0.0.1"
        # Both replicas on this one node read the voice from one download.
        big = [p for p in TINY.rglob("*") if p.is_file() and p.stat().st_size >= LFS_MIN]
        assert sum(p.startswith("/cdn/") for p in cluster.hub.paths()) == len(big)
    finally:
        serve.delete("pair")


class RetryingClient:
    """Speech requests in a loop; a failed one is sent once more (requests are idempotent)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.first_failures = 0
        self.lost = 0
        self.ok = 0
        self.stop = threading.Event()

    def _once(self) -> bool:
        try:
            answer = _speak(self.port)
        except (OSError, http.client.HTTPException):
            return False
        return answer.status == 200 and answer.body[:4] == b"RIFF"

    def run(self) -> None:
        while not self.stop.is_set():
            if self._once():
                self.ok += 1
                continue
            self.first_failures += 1
            if self._once():
                self.ok += 1
            else:
                self.lost += 1


def test_a_killed_replica_is_replaced_and_retried_requests_lose_nothing(cluster: Cluster) -> None:
    _deploy(cluster, "pair", "/", replicas=2)
    try:
        _wait(lambda: len(_replica_pids()) == 2, 60, "two replica processes (and no older ones)")
        before = _replica_pids()
        clients = [RetryingClient(cluster.http_port) for _ in range(3)]
        threads = [threading.Thread(target=c.run) for c in clients]
        for thread in threads:
            thread.start()
        time.sleep(2)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        _wait(lambda: len(_replica_pids() - before) == 1 and len(_replica_pids()) == 2, 90,
              "Serve to start a replacement replica")  # fmt: skip
        _wait(lambda: _ready_replicas("pair") == 2, 90, "the replacement to be running")
        time.sleep(2)
        for client in clients:
            client.stop.set()
        for thread in threads:
            thread.join(60)
        assert sum(c.lost for c in clients) == 0
        assert sum(c.ok for c in clients) > 0
        assert _speak(cluster.http_port).status == 200
    finally:
        serve.delete("pair")


def _ready_replicas(name: str) -> int:
    deployment = serve.status().applications[name].deployments["yomiage"]
    return int(deployment.replica_states.get("RUNNING", 0))


def test_a_replica_failing_its_warm_up_gets_no_traffic(cluster: Cluster) -> None:
    # The warm-up sentence lasts longer than this limit allows, so warming up raises.
    with pytest.raises(RuntimeError, match="Deploying application broken failed"):
        _deploy(cluster, "broken", "/broken", replicas=1, max_audio_seconds=0.01)
    status = serve.status().applications["broken"]
    assert status.status == "DEPLOY_FAILED"
    assert "would make more than" in status.deployments["yomiage"].message
    assert _speak(cluster.http_port, "/broken").status in (404, 503)
    serve.delete("broken")


def _documented_config() -> dict[str, object]:
    text = (ROOT / "docs" / "scale.md").read_text("utf-8")
    block = re.search(r"```yaml\n(# serve config.*?)```", text, re.S)
    assert block, (
        "docs/scale.md shows the serve config in a ```yaml block starting '# serve config'"
    )
    loaded: dict[str, object] = yaml.safe_load(block.group(1))
    return loaded


def test_the_documented_serve_config_deploys(cluster: Cluster, tmp_path: Path) -> None:
    config = _documented_config()
    config["http_options"] = {"host": "127.0.0.1", "port": cluster.http_port}
    (application,) = config["applications"]  # type: ignore[misc]
    application["name"] = "documented"
    args = application["args"]
    args.update(
        model=["narrator=hf://test/voices/tiny"], min_replicas=1, max_replicas=2, cache_dir=None
    )
    application["runtime_env"] = {"env_vars": cluster.env, "worker_process_setup_hook": SETUP_HOOK}
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(config), "utf-8")
    serve_cli = Path(sys.executable).with_name("serve")
    subprocess.run([str(serve_cli), "deploy", str(path), "--address", cluster.dashboard],
                   check=True, timeout=120)  # fmt: skip
    try:
        _wait(lambda: _app_status("documented") == "RUNNING", 120, "the config's application")
        prefix = str(application.get("route_prefix", "/")).rstrip("/")
        answer = _speak(cluster.http_port, prefix)
        assert answer.status == 200 and answer.body[:4] == b"RIFF"
    finally:
        serve.delete("documented")


def _app_status(name: str) -> str | None:
    found = serve.status().applications.get(name)
    if found is not None and found.status == "DEPLOY_FAILED":
        raise AssertionError(f"{name} failed: {found.deployments['yomiage'].message}")
    return None if found is None else found.status.value
