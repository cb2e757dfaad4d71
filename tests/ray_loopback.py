"""Keeping a test's Ray cluster on 127.0.0.1, and checking that it stayed there.

On Linux Ray replaces a loopback node address with the machine's own and has
most of its servers listen on every interface. With
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` it runs as it does on a laptop: a
one-machine cluster whose node address is loopback, which its servers then
listen on. One server still ignores it: Serve's replica opens its
inter-deployment gRPC port on ``[::]`` unconditionally (Ray 2.60), so
:func:`replica_grpc_on_loopback`, run in every Ray worker process, moves that
one to loopback too. :func:`listening_beyond_loopback` is how the tests check.
"""

from __future__ import annotations

import socket
from pathlib import Path

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
SETUP_HOOK = "tests.ray_loopback.replica_grpc_on_loopback"


def replica_grpc_on_loopback() -> None:
    """Ray's ``worker_process_setup_hook``: Serve replicas listen for other deployments
    on 127.0.0.1 only (this cluster has one node)."""
    from ray.serve._private import replica

    bind = replica.add_port_to_grpc_server

    def on_loopback(server: object, address: str) -> int:
        if address.startswith("[::]:"):
            address = "127.0.0.1:" + address.rsplit(":", 1)[1]
        port: int = bind(server, address)
        return port

    replica.add_port_to_grpc_server = on_loopback


def _is_loopback(hex_address: str) -> bool:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return raw[::-1][0] == 127  # /proc/net/tcp: host byte order (little-endian)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    address = socket.inet_ntop(socket.AF_INET6, words)
    return address == "::1" or address.startswith("::ffff:127.")


def listening_sockets() -> set[tuple[str, int]]:
    """Every TCP socket listening in this network namespace, as (address hex, port)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                address, port = fields[1].split(":")
                found.add((address, int(port, 16)))
    return found


def listening_beyond_loopback(before: set[tuple[str, int]]) -> list[tuple[str, int]]:
    """Sockets listening on a non-loopback address that were not there ``before``."""
    return sorted(s for s in listening_sockets() - before if not _is_loopback(s[0]))
