"""What each graph of a voice holds in memory once open and run, beyond its weights.

Run: .venv/bin/python benchmarks/session_memory.py BUNDLE [--as-second FIRST_BUNDLE]

One process opens BUNDLE's encoder, flow and decoder with the engine's own session
options (ONNX Runtime, 2 threads) and runs each once on seeded inputs (encoder 40
tokens, flow 146 frames, decoder 62 frames). With ``--as-second``, FIRST_BUNDLE's
graphs are opened and run first, so the rows are what a second voice adds (the
process's libraries, arena and first-session costs already paid). For each graph the
resident memory it added, as the kernel splits it (``/proc/self/status``): anonymous
memory when it opened (ONNX Runtime's session state, weights it copied or repacked)
and file pages when it ran (weights read from the mapped ``*.onnx.data``).
``malloc_trim`` runs after each step so freed heap does not hide in the figures.
Figures in MiB, written MB as everywhere in RESULTS.md.
"""

from __future__ import annotations

import argparse
import ctypes
import platform
from pathlib import Path
from typing import Any

import numpy as np

GRAPHS = (("encoder", 40), ("flow", 146), ("decoder", 62))


def resident() -> dict[str, float]:
    keys = ("RssAnon", "RssFile")
    with open("/proc/self/status") as status:
        return {
            line.split(":")[0]: int(line.split()[1]) / 1024
            for line in status
            if line.startswith(keys)
        }


def inputs(session: Any, length: int) -> dict[str, np.ndarray]:
    """Seeded inputs with every dynamic axis at ``length``; integer inputs 0 (a valid id)."""
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else length for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        else:
            feeds[i.name] = np.zeros(shape, np.int64 if "int64" in i.type else np.int32)
    return feeds


def open_and_run(bundle: Path, keep: list[Any]) -> list[tuple[str, float, float, float, float]]:
    from yomiage.runtime.engines.onnx_session import load_session, session_options

    trim = ctypes.CDLL("libc.so.6").malloc_trim
    options = session_options(2)
    rows = []
    for name, length in GRAPHS:
        before = resident()
        session = load_session(bundle / f"{name}.onnx", options)
        trim(0)
        opened = resident()
        session.run(None, inputs(session, length))
        trim(0)
        ran = resident()
        keep.append(session)
        weights = (bundle / f"{name}.onnx.data").stat().st_size / 2**20
        rows.append((name, weights, opened["RssAnon"] - before["RssAnon"],
                     ran["RssFile"] - opened["RssFile"],
                     sum(ran.values()) - sum(before.values())))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--as-second", type=Path, default=None, metavar="FIRST_BUNDLE")
    args = parser.parse_args()
    keep: list[Any] = []
    if args.as_second is not None:
        open_and_run(args.as_second, keep)
    rows = open_and_run(args.bundle, keep)
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; "
          f"{args.bundle}" + (f" after {args.as_second}" if args.as_second else ""))  # fmt: skip
    header = "graph | weights MB | open: anonymous | first run: file pages | in all"
    print(f"\n| {header} | beyond the weights |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, weights, anon, file_pages, total in rows:
        print(f"| {name} | {weights:.1f} | {anon:.1f} | {file_pages:.1f} | {total:.1f} | "
              f"{total - weights:+.1f} |")  # fmt: skip
    weights = sum(r[1] for r in rows)
    total = sum(r[4] for r in rows)
    print(f"| the voice | {weights:.1f} | | | {total:.1f} | {total - weights:+.1f} |")


if __name__ == "__main__":
    main()
