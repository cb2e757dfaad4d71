"""Writing a voice bundle so that it only ever exists complete (no torch here).

A bundle is written into a temporary folder beside its target and renamed into
place only when every file and the manifest are there, so a failed or
interrupted conversion never leaves a folder that looks like a bundle; only an
empty folder or an earlier bundle may be replaced. Used by ``yomiage convert``
for SBV2 folders and for AIVMX files.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from yomiage.errors import YomiageError
from yomiage.runtime.bundle import FORMAT, FORMAT_VERSION, sha256_file
from yomiage.runtime.chunking import receptive_field_frames
from yomiage.runtime.stage_trims import StageTrims
from yomiage.sbv2.config import VoiceConfig


def check_replaceable(out_dir: Path, marker: str, error: type[YomiageError]) -> None:
    """Only an empty folder or an earlier bundle may be replaced, never arbitrary data."""
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / marker).exists():
        raise error(
            f"{out_dir} exists and is not a yomiage bundle (no {marker}); choose another folder"
        )


@contextlib.contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A temporary folder beside ``out_dir`` that replaces it only if the block succeeds."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        yield work
        work.chmod(0o755)  # mkdtemp makes it private; bundles are shared read-only
        if out_dir.exists():
            shutil.rmtree(out_dir)
        work.rename(out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def write_voice_manifest(
    work: Path,
    *,
    name: str,
    config: VoiceConfig,
    bert_dim: int,
    n_speakers: int,
    spk2id: Mapping[str, int],
    style2id: Mapping[str, int],
    extra: Mapping[str, Any],
) -> None:
    """``voice.json`` for the graphs already in ``work`` (their sha256 listed); ``extra``:
    what this kind of conversion records (its parity check, its source's identity)."""
    files = {p.name: sha256_file(p) for p in sorted(work.iterdir())}
    trims = StageTrims.of_model(config.model)  # the decoder has them: decoder_trims
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "name": name,
        "sbv2_version": config.version,
        "sampling_rate": config.sampling_rate,
        "hop_length": config.hop_length,
        "add_blank": config.add_blank,
        "bert_dim": bert_dim,
        "inter_channels": config.model.inter_channels,
        "n_speakers": n_speakers,
        "spk2id": dict(spk2id),
        "style2id": dict(style2id),
        "receptive_field_frames": receptive_field_frames(config.model),
        "decoder_stages": {"rates": list(trims.rates), "margins": list(trims.margins)},
        **extra,
        "files": files,
    }
    (work / "voice.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1))
