"""``yomiage download`` and ``yomiage voices``: the cache and the catalog."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dl = sub.add_parser(
        "download",
        help="fill the cache with voices and the BERT for offline use (no loading)",
        epilog="examples:\n  yomiage download jvnv-F1-jp jvnv-M1-jp --bert\n"
        "  yomiage download hf://owner/repo/my-voice s3://bucket/voices/mine\n"
        "  YOMIAGE_CACHE=/opt/yomiage yomiage download jvnv-F1-jp --bert  # Docker build step",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dl.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="names from `yomiage voices`, hf:// or s3:// sources",
    )
    dl.add_argument("--bert", action="store_true", help="also the BERT")
    dl.add_argument(
        "--format",
        choices=["onnx", "sbv2"],
        default="onnx",
        help="for names: ready ONNX exports (default) or the SBV2 folders",
    )
    dl.add_argument("--cache-dir", metavar="DIR", help="cache root (default: $YOMIAGE_CACHE)")
    dl.set_defaults(func=run_download)

    vc = sub.add_parser("voices", help="list the known voices, their licenses and sources")
    vc.epilog = (
        "examples:\n  yomiage voices\n  yomiage voices --format sbv2 --json\n"
        "  yomiage voices my-voice.aivmx     # its speakers, styles and full licence text"
    )
    vc.formatter_class = argparse.RawDescriptionHelpFormatter
    vc.add_argument("--format", choices=["onnx", "sbv2"], default="onnx",
                    help="which source to show and check in the cache")  # fmt: skip
    vc.add_argument("--cache-dir", metavar="DIR", help="cache root (default: $YOMIAGE_CACHE)")
    vc.add_argument("--json", action="store_true", help="one JSON list")
    vc.add_argument("files", nargs="*", metavar="FILE.aivmx",
                    help="AIVMX voice files to describe instead of the catalog")  # fmt: skip
    vc.set_defaults(func=run_voices)


def run_download(args: argparse.Namespace) -> int:
    from yomiage.sources import download

    if not args.names and not args.bert:
        print("yomiage download: name at least one voice or source, or --bert", file=sys.stderr)
        return 2
    for path in download(args.names, bert=args.bert, format=args.format, cache_dir=args.cache_dir):
        print(path)
    return 0


def run_voices(args: argparse.Namespace) -> int:
    from yomiage.sources import catalog, is_cached

    if args.files:
        return _describe_aivmx(args.files, as_json=args.json)
    rows = []
    for name in catalog.names():
        entry = catalog.lookup(name)
        source = entry.source(args.format)
        cached = all(is_cached(s, cache_dir=args.cache_dir) for s in entry.sources(args.format))
        rows.append((entry, source, cached))
    if args.json:
        records = [
            {"name": e.name, "kind": e.kind, "license": e.license, "styles": list(e.styles),
             "source": src, "cached": cached}
            for e, src, cached in rows
        ]  # fmt: skip
        print(json.dumps(records, ensure_ascii=False))
        return 0
    width = max(len(e.name) for e, _, _ in rows)
    print(f"{'NAME':<{width}}  {'CACHE':<6}  {'LICENSE':<34}  SOURCE")
    for e, src, cached in rows:
        mark = "cached" if cached else "-"
        print(f"{e.name:<{width}}  {mark:<6}  {e.license:<34}  {src}")
    return 0


def _describe_aivmx(files: list[str], *, as_json: bool) -> int:
    """Each AIVMX file's identity, speakers, styles and whole licence text: what a user
    must read before publishing audio made with it. Every string from a file goes
    through :mod:`yomiage.cli.terminal` first: the file's author does not get to
    send escape sequences to the reader's terminal."""
    from yomiage.aivmx import read_aivmx
    from yomiage.cli.terminal import printable, printable_json

    voices = [read_aivmx(file) for file in files]
    if as_json:
        records = [
            {"file": str(v.path), "name": v.name, "version": v.version, "uuid": v.uuid,
             "speakers": [{"name": s.name, "local_id": s.local_id, "styles": dict(s.styles)}
                          for s in v.speakers],
             "license": v.license, "description": v.description}
            for v in voices
        ]  # fmt: skip
        print(printable_json(records))
        return 0
    for v in voices:
        print(printable(f"{v.name} {v.version}  ({v.path}, uuid {v.uuid})"))
        for speaker in v.speakers:
            styles = ", ".join(f"{n}={i}" for n, i in speaker.styles.items())
            print(printable(f"  speaker {speaker.name} (id {speaker.local_id}): {styles}"))
        print("  licence:", "none given in the file" if not v.license else "")
        for line in (v.license or "").strip().splitlines():
            print(f"    {printable(line, keep=chr(9))}")
    return 0
