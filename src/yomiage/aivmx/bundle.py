"""An AIVMX file to a yomiage voice bundle, without torch.

The AIVMX graph is cut in three (:mod:`yomiage.aivmx.split`), each part saved
optimized like a converted voice's (so it runs at the same speed), and checked
before the bundle exists: the cut graphs, run the way the runtime runs them
(noise off), must give the AIVMX graph's own audio on a probe sentence. The
bundle's ``voice.json`` keeps the voice's AIVM identity (name, uuid, version,
licence text, speakers and styles) so it stays visible wherever the voice is
listed. The bundle is written beside its target and renamed into place, so an
interrupted conversion leaves nothing that looks complete.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.aivmx.reader import AivmxError, AivmxFile
from yomiage.aivmx.split import split_graphs
from yomiage.runtime.bundle import FORMAT, FORMAT_VERSION, sha256_file
from yomiage.runtime.chunking import receptive_field_frames

PROBE_TOKENS = 41
TOLERANCE = 1e-4
Progress = Callable[[str], None]


def _silent(message: str) -> None:
    """The default ``progress``: nothing."""


def aivm_identity(voice: AivmxFile, sha256: str) -> dict[str, Any]:
    """What ``voice.json`` keeps of the AIVM manifest (everything a listing shows)."""
    return {
        "name": voice.name,
        "uuid": voice.uuid,
        "version": voice.version,
        "license": voice.license,
        "description": voice.description,
        "sha256": sha256,
        "speakers": [
            {"name": s.name, "uuid": s.uuid, "local_id": s.local_id, "styles": dict(s.styles)}
            for s in voice.speakers
        ],
    }


def write_bundle(
    voice: AivmxFile, out_dir: Path, *, sha256: str | None = None, progress: Progress = _silent
) -> Path:
    """The bundle of ``voice`` at ``out_dir`` (replaced if it is an earlier bundle)."""
    from yomiage.export.optimize import optimize_graph

    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / "voice.json").exists():
        raise AivmxError(
            f"{out_dir} exists and is not a yomiage bundle (no voice.json); choose another folder"
        )
    sha256 = sha256 or sha256_file(voice.path)
    progress(f"cutting {voice.path.name} into encoder, flow and decoder")
    parts = split_graphs(voice.model)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        raw = work / "raw"
        raw.mkdir()
        for name, model in parts.items():
            progress(f"optimizing {name}.onnx")
            (raw / f"{name}.onnx").write_bytes(model.SerializeToString())
            optimize_graph(raw / f"{name}.onnx", work / f"{name}.onnx")
        shutil.rmtree(raw)
        del parts
        np.save(work / "style_vectors.npy", voice.style_vectors)
        progress("checking the cut graphs against the AIVMX graph")
        parity = _parity(voice, work)
        if parity > TOLERANCE:
            raise AivmxError(
                f"{voice.path}: the cut graphs differ from the AIVMX graph by {parity:.3g} "
                f"(more than {TOLERANCE}); no bundle written"
            )
        config = voice.config
        files = {p.name: sha256_file(p) for p in sorted(work.iterdir())}
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "name": voice.name,
            "sbv2_version": config.version,
            "sampling_rate": config.sampling_rate,
            "hop_length": config.hop_length,
            "add_blank": config.add_blank,
            "bert_dim": _bert_dim(voice),
            "inter_channels": config.model.inter_channels,
            "n_speakers": max(config.n_speakers, 1 + max(voice.spk2id.values())),
            "spk2id": voice.spk2id,
            "style2id": voice.style2id,
            "receptive_field_frames": receptive_field_frames(config.model),
            "parity": {"audio": parity},
            "aivm": aivm_identity(voice, sha256),
            "files": files,
        }
        (work / "voice.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1))
        work.chmod(0o755)  # mkdtemp makes it private; bundles are shared read-only
        if out_dir.exists():
            shutil.rmtree(out_dir)
        work.rename(out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_dir


def _bert_dim(voice: AivmxFile) -> int:
    for value in voice.model.graph.input:
        if value.name == "bert":
            dim = value.type.tensor_type.shape.dim[1]
            if dim.HasField("dim_value"):
                return int(dim.dim_value)
    raise AivmxError(f"{voice.path}: the graph's bert input has no fixed width")


def _parity(voice: AivmxFile, folder: Path) -> float:
    """Max abs difference between the AIVMX graph's audio and the cut graphs' on a probe
    sentence of random tokens, noise off (the graph's own noise is then zero)."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    t = PROBE_TOKENS
    speaker = voice.speakers[0]
    style = voice.style_vectors[next(iter(speaker.styles.values()))][None]
    ids = rng.integers(1, 100, (1, t)).astype(np.int64)
    ids[:, ::2] = 0  # blanks between symbols, as the frontend makes them
    tones = rng.integers(0, 12, (1, t)).astype(np.int64)
    language = np.ones((1, t), np.int64)
    bert = rng.standard_normal((1, _bert_dim(voice), t)).astype(np.float32)
    sid = np.array([speaker.local_id], np.int64)

    def scalar(x: float, shape: tuple[int, ...] = ()) -> npt.NDArray[np.float32]:
        return np.full(shape, x, np.float32)

    providers = ["CPUExecutionProvider"]
    whole = ort.InferenceSession(voice.model.SerializeToString(), providers=providers)
    reference = whole.run(None, {
        "x_tst": ids, "x_tst_lengths": np.array([t], np.int64), "sid": sid, "tones": tones,
        "language": language, "bert": bert, "style_vec": style, "length_scale": scalar(1.0),
        "sdp_ratio": scalar(0.5), "noise_scale": scalar(0.0), "noise_scale_w": scalar(0.0),
    })[0]  # fmt: skip
    del whole

    def session(name: str) -> Any:
        return ort.InferenceSession(str(folder / f"{name}.onnx"), providers=providers)

    m_p, _, g, durations = session("encoder").run(None, {
        "phone_ids": ids, "tone_ids": tones, "language_ids": language, "bert": bert,
        "style": style, "sid": sid, "sdp_noise": np.zeros((1, 2, t), np.float32),
        "sdp_ratio": scalar(0.5, (1,)), "length_scale": scalar(1.0, (1,)),
    })  # fmt: skip
    z_p = np.repeat(m_p, durations[0, 0].astype(np.int64), axis=2)
    z = session("flow").run(None, {"z_p": z_p, "g": g})[0]
    audio = session("decoder").run(None, {"z": z, "g": g})[0]
    if audio.shape != reference.shape:
        return float("inf")
    return float(np.abs(audio - reference).max())
