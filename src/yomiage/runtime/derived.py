"""What the cache holds that was made from one bundle's graphs, and its removal.

Beside a converted bundle (``converted/<key>/``), running a voice leaves three
kinds of files made from its graphs, named by their content:

- ``decoders/<layout key>-2d<channels>/``: its decoder in the layout its plan
  chose (:mod:`yomiage.runtime.decoder_layouts`; ~57 MB for the full-size voice);
- ``flows/<flow key>-bf16w/``: its flow with bfloat16 weights, where a plan's budget
  needed it (:mod:`yomiage.runtime.light_flows`; ~86 MB for the full-size voice);
- ``openvino/<version and form>/<graph sha256>/``: what OpenVINO compiled from a
  graph (:class:`~yomiage.runtime.engines.sessions.Sessions`; ~58 MB a precision).

Each such folder records the sha256 of its files as they were made, and they are
checked against it before use (:mod:`yomiage.runtime.integrity`).

When a bundle leaves the cache (an uninstalled voice, a conversion by an earlier
version), these would only cost disk, so they go with it, but for those that a
bundle that stays was made into too (the same decoder, cut again by a newer
version).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from yomiage.json_file import read_json_object

log = logging.getLogger(__name__)

COMPILED_DIR = "openvino"  # under the cache's root: OpenVINO's compiled graphs
LAYOUTS_DIR = "decoders"  # under the cache's root: decoders made in other layouts
FLOWS_DIR = "flows"  # under the cache's root: flows made with bfloat16 weights
# Under the cache's root: BERT graphs with sliced position tables (runtime/sliced_berts.py;
# ~190 KB each, kept: a BERT is no voice's and leaves with none).
BERTS_DIR = "berts"


def layout_key(files: Mapping[str, str]) -> str | None:
    """What names a bundle's decoder under :data:`LAYOUTS_DIR`: from its two files'
    sha256 (a bundle's manifest ``files``); None without them."""
    graph, data = files.get("decoder.onnx"), files.get("decoder.onnx.data")
    return f"{graph[:16]}{data[:16]}" if graph and data else None


def flow_key(files: Mapping[str, str]) -> str | None:
    """What names a bundle's flow under :data:`FLOWS_DIR`, as :func:`layout_key` its decoder."""
    graph, data = files.get("flow.onnx"), files.get("flow.onnx.data")
    return f"{graph[:16]}{data[:16]}" if graph and data else None


def derived_paths(root: Path, files: Mapping[str, str]) -> set[Path]:
    """The folders under cache ``root`` made from the graphs of a bundle with ``files``."""
    found: set[Path] = set()
    key = layout_key(files)
    if key is not None:
        found.update(p for p in (root / LAYOUTS_DIR).glob(f"{key}-2d*") if p.is_dir())
    key = flow_key(files)
    if key is not None:
        found.update(p for p in (root / FLOWS_DIR).glob(f"{key}-*") if p.is_dir())
    for sha256 in set(files.values()):
        found.update(p for p in (root / COMPILED_DIR).glob(f"*/{sha256}") if p.is_dir())
    return found


def bundle_files(bundle: Path) -> dict[str, str]:
    """A bundle's manifest ``files`` (name to sha256); empty where it cannot be read."""
    try:
        files = read_json_object(bundle / "voice.json").get("files")
    except (OSError, ValueError):  # JsonFileError too: a damaged manifest names nothing
        return {}
    if not isinstance(files, dict):
        return {}
    return {str(k): str(v) for k, v in files.items() if isinstance(v, str)}


def remove_derived(
    root: Path, files: Mapping[str, str], keep: Iterable[Mapping[str, str]] = ()
) -> list[Path]:
    """Remove what cache ``root`` holds made from a bundle with ``files``, but what was
    made from one of ``keep`` too; the folders removed. Never raises: what is left
    behind costs disk, not a request."""
    kept: set[Path] = set()
    for other in keep:
        kept |= derived_paths(root, other)
    removed = []
    for folder in sorted(derived_paths(root, files) - kept):
        shutil.rmtree(folder, ignore_errors=True)
        if folder.exists():
            log.warning("could not remove %s from the cache", folder)
        else:
            removed.append(folder)
    return removed
