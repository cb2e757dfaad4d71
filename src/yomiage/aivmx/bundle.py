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

import contextlib
import errno
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.aivmx.reader import AivmxError, AivmxFile
from yomiage.aivmx.split import split_graphs
from yomiage.runtime.bundle import sha256_file

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
    from yomiage.export.staging import check_replaceable, staged, write_voice_manifest
    from yomiage.runtime.engines.telemetry import engines_without_telemetry

    with engines_without_telemetry():  # optimize imports ONNX Runtime
        from yomiage.export.decoder_layout import stages_as_2d
        from yomiage.export.decoder_trims import add_stage_trims
        from yomiage.export.optimize import optimize_graph
        from yomiage.export.speaker_tables import speaker_tables

    check_replaceable(out_dir, "voice.json", AivmxError)
    sha256 = sha256 or sha256_file(voice.path)
    progress(f"cutting {voice.path.name} into encoder, flow and decoder")
    with _graph_errors(voice.path):
        parts = split_graphs(voice.model)
        speaker_tables(parts, voice.n_speakers)
        add_stage_trims(parts["decoder"])
        stages_as_2d(parts["decoder"])
    with staged(out_dir) as work:
        raw = work / "raw"
        raw.mkdir()
        for name, model in parts.items():
            progress(f"optimizing {name}.onnx")
            (raw / f"{name}.onnx").write_bytes(model.SerializeToString())
            with _graph_errors(voice.path, work):
                optimize_graph(raw / f"{name}.onnx", work / f"{name}.onnx")
        shutil.rmtree(raw)
        del parts
        np.save(work / "style_vectors.npy", voice.style_vectors)
        progress("checking the cut graphs against the AIVMX graph")
        with _graph_errors(voice.path, work):
            parity = _parity(voice, work)
        if parity > TOLERANCE:
            raise AivmxError(
                f"{voice.path}: the cut graphs differ from the AIVMX graph by {parity:.3g} "
                f"(more than {TOLERANCE}); no bundle written"
            )
        write_voice_manifest(
            work,
            name=voice.name,
            config=voice.config,
            bert_dim=_bert_dim(voice),
            n_speakers=voice.n_speakers,  # the graph's, whatever the config claims
            spk2id=voice.spk2id,
            style2id=voice.style2id,
            extra={"parity": {"audio": parity}, "aivm": aivm_identity(voice, sha256)},
        )
    return out_dir


@contextlib.contextmanager
def _graph_errors(path: Path, out: Path | None = None) -> Iterator[None]:
    """Errors of onnx and ONNX Runtime on a graph that is not what its metadata says
    (a crafted or damaged file) as AivmxError naming the file; the cutting's own
    messages get the file's name in front. Out of memory or disk is not the file's
    fault and passes unchanged: ONNX Runtime says a full disk in words of its own
    ("FAIL : ... ToGraphProtoWithExternalInitializers"), so where a step writing to
    ``out`` fails with less room left there than the file takes, the disk is blamed
    (an OSError of ENOSPC), not the file."""
    try:
        yield
    except AivmxError as exc:
        if str(path) in str(exc):
            raise
        raise AivmxError(f"{path}: {exc}") from exc
    except (OSError, MemoryError):
        raise
    except Exception as exc:  # onnx and onnxruntime raise their own types
        if out is not None and _short_of_space(out, path):
            raise OSError(errno.ENOSPC, f"no space left on the device for {out}") from exc
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise AivmxError(
            f"{path}: the graph is not a usable SBV2 JP-Extra export: {first}"
        ) from exc


def _short_of_space(folder: Path, source: Path) -> bool:
    """Whether ``folder``'s disk has less room left than ``source`` takes (what cutting
    it writes, about)."""
    try:
        return shutil.disk_usage(folder).free < source.stat().st_size
    except OSError:
        return False


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
    from yomiage.runtime.engines.telemetry import engines_without_telemetry

    with engines_without_telemetry():
        import onnxruntime as ort

        from yomiage.runtime.engines.onnx_session import quiet_options, taken

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
        return ort.InferenceSession(
            str(folder / f"{name}.onnx"), quiet_options(), providers=providers
        )

    m_p, _, g, durations = session("encoder").run(None, {
        "phone_ids": ids, "tone_ids": tones, "language_ids": language, "bert": bert,
        "style": style, "sid": sid, "sdp_noise": np.zeros((1, 2, t), np.float32),
        "sdp_ratio": scalar(0.5, (1,)), "length_scale": scalar(1.0, (1,)),
    })  # fmt: skip
    z_p = np.repeat(m_p, durations[0, 0].astype(np.int64), axis=2)
    flow, decoder = session("flow"), session("decoder")
    speaker_feeds = {"g": g, "sid": sid}
    z = flow.run(None, {"z_p": z_p, **taken(flow, speaker_feeds)})[0]
    audio = decoder.run(None, {"z": z, **taken(decoder, speaker_feeds)})[0]
    if audio.shape != reference.shape:
        return float("inf")
    return float(np.abs(audio - reference).max())
