"""How much of OpenJTalk's dictionary a process holds resident after reading texts.

Run: .venv/bin/python benchmarks/dictionary_pages.py [--texts medium xlong]

MeCab maps ``sys.dic`` (~103 MB) and reads a few entries per sentence. Where the page
cache holds the file in large folios, which a sequential read of it leaves (an unpack, a
copy, a backup, a checksum), each entry read maps a whole folio. Each row is one fresh
process: the dictionary first read through once from a dropped cache (the large-folio
state), then the frontend made, each text's g2p run, and the resident MB of the
dictionary's mappings taken after each text, from ``/proc/self/smaps``. ``as shipped``:
yomiage's OpenJTalk, which has the dictionary read a page at a time
(:meth:`yomiage.mapped_files.MappedRanges.read_sparsely`); ``read-ahead kept``: the
same with that switched off. Linux only. The texts are the peers' (``../shared/peers``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

PEERS = Path(__file__).resolve().parents[2] / "shared" / "peers"
VARIANTS = {"as shipped": False, "read-ahead kept": True}

CHILD = r"""
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bench_peers import TEXTS
from yomiage import mapped_files
from yomiage.text.frontend import Frontend
from yomiage.text.openjtalk import bundled_dictionary_dir

if sys.argv[2] == "1":
    mapped_files.MappedRanges.read_sparsely = lambda self: None
folder = bundled_dictionary_dir()
for path in folder.iterdir():  # the state a sequential read leaves: large folios
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)

def resident_mb():
    total, name = 0, ""
    for line in open("/proc/self/smaps"):
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:
            name = head[5] if len(head) > 5 else ""
        elif line.startswith("Rss:") and name.startswith(str(folder)):
            total += int(head[1])
    return total / 1024

frontend = Frontend()
out = {}
for key in sys.argv[3:]:
    for sentence in TEXTS[key].split("。"):
        if sentence.strip():
            frontend.g2p(sentence + "。")
    out[key] = round(resident_mb(), 1)
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", nargs="+", default=["short", "medium", "long", "xlong"])
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        raise SystemExit("Linux only: the resident pages come from /proc/self/smaps")
    if not (PEERS / "bench_peers.py").exists():
        raise SystemExit(f"needs the peers' texts in {PEERS}")
    print(f"machine: {platform.machine()}, Linux {platform.release()}; "
          f"the dictionary read through once before each row\n")  # fmt: skip
    print("| frontend | " + " | ".join(f"after {t} MB" for t in args.texts) + " |")
    print("| --- |" + " --- |" * len(args.texts))
    for name, kept in VARIANTS.items():
        run = subprocess.run(
            [sys.executable, "-c", CHILD, str(PEERS), "1" if kept else "0", *args.texts],
            capture_output=True, text=True, check=True, env={**os.environ},
        )  # fmt: skip
        figures = json.loads(run.stdout.strip().splitlines()[-1])
        print(f"| {name} | " + " | ".join(str(figures[t]) for t in args.texts) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
