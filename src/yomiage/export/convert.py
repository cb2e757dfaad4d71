"""``yomiage convert``: an SBV2 voice folder (and its BERT) to ONNX bundles.

Everything is written into a temporary folder beside the target and renamed
into place only after the parity check passed, so a failed or interrupted
conversion never leaves a bundle that looks complete. ``progress`` is told
each step as it starts (a full-size voice and BERT take minutes); the
exporters' own warnings, meant for their developers, are kept quiet.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from yomiage.errors import YomiageError
from yomiage.export.decoder_layout import stages_as_2d_in_file
from yomiage.export.decoder_trims import add_stage_trims_to_file
from yomiage.export.graphs import export_graphs
from yomiage.export.optimize import optimize_graph
from yomiage.export.speaker_tables import speaker_tables_in_files
from yomiage.export.staging import check_replaceable, staged, write_voice_manifest
from yomiage.model import TorchVoice, load_voice
from yomiage.model.loader import voice_files
from yomiage.runtime.bundle import BERT_FORMAT, FORMAT_VERSION, GRAPHS, sha256_file
from yomiage.runtime.chunking import receptive_field_frames
from yomiage.runtime.engines.onnx_session import quiet_options, taken
from yomiage.runtime.engines.telemetry import engines_without_telemetry

# ONNX Runtime decides about its telemetry when first imported (see that module): here,
# before torch.onnx's exporter imports it on its own.
with engines_without_telemetry():
    import onnxruntime as ort

if TYPE_CHECKING:
    from yomiage.export.decoder_int8 import Int8Error

PROBE_TOKENS = 41
PROBE_FRAMES = 57
TOLERANCE = 1e-4


Progress = Callable[[str], None]


class ConversionError(YomiageError):
    """The exported graphs disagree with PyTorch, or a conversion step failed."""


def _silent(message: str) -> None:
    """The default ``progress``: nothing."""


# torch's loggers do not propagate to the root logger: torch gives its own a handler
# (the ``W1126 ...`` lines), so the exporter's is quieted by name.
_OWN_HANDLERS = ("torch.onnx",)


@contextlib.contextmanager
def quiet_exporters() -> Iterator[None]:
    """Hide torch.onnx's and ONNX Runtime's warnings to their developers (deprecations,
    shape-inference notes, "consider pre-processing", "torchvision is not installed")
    while a conversion runs; errors still show."""
    loggers = [logging.getLogger(), *map(logging.getLogger, _OWN_HANDLERS)]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(max(logger.getEffectiveLevel(), logging.ERROR))
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


@dataclass(frozen=True)
class Parity:
    """Largest differences between PyTorch and ONNX Runtime on the probe inputs."""

    prior: float
    durations_equal: bool
    flow: float
    audio: float

    def ok(self) -> bool:
        return self.durations_equal and max(self.prior, self.flow, self.audio) <= TOLERANCE


def _probe(voice: TorchVoice, folder: Path) -> Parity:
    """Run the same seeded inputs through PyTorch and the exported graphs."""
    rng = np.random.default_rng(1234)
    t, hp = PROBE_TOKENS, voice.config.model
    feeds = {
        "phone_ids": rng.integers(1, 100, (1, t)),
        "tone_ids": rng.integers(6, 8, (1, t)),
        "language_ids": np.ones((1, t), dtype=np.int64),
        "bert": rng.standard_normal((1, voice.bert_dim, t)).astype(np.float32),
        "style": voice.styles.vector(voice.styles.names[0])[None],
        "sid": np.array([voice.config.n_speakers - 1]),
        "sdp_noise": (rng.standard_normal((1, 2, t)) * 0.8).astype(np.float32),
        "sdp_ratio": np.array([0.5], dtype=np.float32),
        "length_scale": np.array([1.0], dtype=np.float32),
    }
    z_p = rng.standard_normal((1, hp.inter_channels, PROBE_FRAMES)).astype(np.float32)
    sessions = {g: ort.InferenceSession(str(folder / f"{g}.onnx"), quiet_options()) for g in GRAPHS}
    m_p, logs_p, g, durations = sessions["encoder"].run(None, feeds)
    speaker = {"g": g, "sid": feeds["sid"]}
    z = sessions["flow"].run(None, {"z_p": z_p, **taken(sessions["flow"], speaker)})[0]
    audio = sessions["decoder"].run(None, {"z": z, **taken(sessions["decoder"], speaker)})[0]
    model = voice.model
    with torch.inference_mode():
        tt = {k: torch.from_numpy(v) for k, v in feeds.items()}
        g_t = model.emb_g(tt["sid"]).unsqueeze(-1)
        mask = torch.ones(1, 1, t)
        h, m_t, logs_t = model.enc_p(
            tt["phone_ids"], tt["tone_ids"], tt["language_ids"], tt["bert"], tt["style"], mask, g_t
        )
        logw = model.sdp(h, mask, g_t, tt["sdp_noise"]) * 0.5 + model.dp(h, mask, g_t) * 0.5
        dur_t = torch.ceil(torch.exp(logw))
        z_t = model.flow.reverse(torch.from_numpy(z_p), torch.ones(1, 1, PROBE_FRAMES), g_t)
        audio_t = model.dec(z_t, g_t)
    return Parity(
        prior=float(max(np.abs(m_p - m_t.numpy()).max(), np.abs(logs_p - logs_t.numpy()).max())),
        durations_equal=bool(np.array_equal(durations, dur_t.numpy())),
        flow=float(np.abs(z - z_t.numpy()).max()),
        audio=float(np.abs(audio - audio_t.numpy()).max()),
    )


def convert_voice(
    sbv2_dir: Path,
    out_dir: Path,
    *,
    decoder_int8: bool = False,
    bert_features: Callable[[list[str]], Any] | None = None,
    progress: Progress = _silent,
) -> tuple[Path, Parity]:
    """Export an SBV2 voice folder to a voice bundle at ``out_dir`` (replaced if present).

    ``decoder_int8`` adds ``decoder_int8.onnx`` (see :mod:`yomiage.export.decoder_int8`),
    calibrated on sentences whose BERT features come from ``bert_features``
    (zeros without it); its error against float32 goes into ``voice.json``.
    """
    check_replaceable(out_dir, "voice.json", ConversionError)
    folder, weights = voice_files(sbv2_dir)
    count = len(list(folder.glob("*.safetensors")))
    newest = f"; the newest of {count}: give a file's path to choose one" * (count > 1)
    chosen = ", as given" if Path(sbv2_dir).is_file() else newest
    progress(f"loading the voice {folder} (checkpoint {weights.name}{chosen})")
    voice = load_voice(sbv2_dir)
    with staged(out_dir) as work, quiet_exporters():
        raw = work / "raw"
        progress("exporting the encoder, flow and decoder to ONNX")
        paths = export_graphs(voice.model, raw)
        speaker_tables_in_files(paths, voice.config.n_speakers)
        for name, path in paths.items():
            if name == "decoder":
                add_stage_trims_to_file(path)
                stages_as_2d_in_file(path)
            progress(f"optimizing {name}.onnx")
            optimize_graph(path, work / f"{name}.onnx")
        np.save(work / "style_vectors.npy", voice.styles.vectors)
        progress("checking the graphs against PyTorch")
        parity = _probe(voice, work)
        if not parity.ok():
            raise ConversionError(
                f"ONNX graphs disagree with PyTorch beyond {TOLERANCE}: prior {parity.prior:.3g}, "
                f"durations equal {parity.durations_equal}, flow {parity.flow:.3g}, "
                f"audio {parity.audio:.3g}; no bundle written"
            )
        if decoder_int8:
            progress("calibrating and checking the int8 decoder")
        int8 = (
            _int8_decoder(voice, raw / "decoder.onnx", work, bert_features)
            if decoder_int8
            else None
        )
        shutil.rmtree(raw)
        config = voice.config
        write_voice_manifest(
            work,
            name=config.name,
            config=config,
            bert_dim=voice.bert_dim,
            n_speakers=config.n_speakers,
            spk2id=config.spk2id,
            style2id=config.style2id,
            extra={
                "parity": parity.__dict__,
                **({"decoder_int8": int8.__dict__} if int8 is not None else {}),
            },
        )
    return out_dir, parity


def _int8_decoder(
    voice: TorchVoice, raw_decoder: Path, work: Path, bert_features: Any
) -> Int8Error:
    from yomiage.export.decoder_int8 import (
        CALIBRATION_TEXTS,
        HELD_OUT_TEXT,
        MIN_SNR_DB,
        decoder_inputs,
        int8_error,
        quantize_decoder,
    )

    rf = receptive_field_frames(voice.config.model)
    samples = decoder_inputs(voice, [*CALIBRATION_TEXTS, HELD_OUT_TEXT], bert_features)
    target = quantize_decoder(
        raw_decoder,
        work / "decoder_int8.onnx",
        samples[:-1],
        receptive_field=rf,
        fp32_resblocks=len(voice.config.model.resblock_kernel_sizes),
    )
    error = int8_error(
        work / "decoder.onnx", target, samples[-1], receptive_field=rf,
        hop_length=voice.config.hop_length,
    )  # fmt: skip
    if error.snr_db < MIN_SNR_DB:
        raise ConversionError(
            f"the int8 decoder is too far from float32 ({error.snr_db:.1f} dB SNR < "
            f"{MIN_SNR_DB} dB, max abs {error.max_abs:.3g}); no bundle written"
        )
    return error


def convert_bert(
    bert_dir: Path,
    out_dir: Path,
    *,
    tokenizer_dir: Path | None = None,
    quantize: str | Sequence[str] = "q8",
    progress: Progress = _silent,
) -> tuple[Path, dict[str, float]]:
    """Export the BERT to ``bert.onnx`` (+ ``bert_q8.onnx`` and/or ``bert_q4.onnx``) and
    ``tokenizer.json``; returns the largest feature error of each graph vs PyTorch.

    ``quantize`` names the quantized graphs to add: ``"q8"``, ``"q4"``, both
    (``"q8,q4"`` or a sequence) or ``"none"``.
    """
    from yomiage.bert.torch_bert import TorchBert
    from yomiage.export.bert import export_bert, quantize_q4, quantize_q8

    wanted = quantize.split(",") if isinstance(quantize, str) else list(quantize)
    wanted = [q.strip() for q in wanted if q.strip() not in ("", "none")]
    if not set(wanted) <= {"q8", "q4"}:
        raise ConversionError(f"quantize must be q8, q4, both or none, not {quantize!r}")
    check_replaceable(out_dir, "bert.json", ConversionError)
    progress(f"loading the BERT {bert_dir}")
    bert = TorchBert(bert_dir, tokenizer_dir)
    with staged(out_dir) as work, quiet_exporters():
        raw = work / "raw"
        progress("exporting the BERT to ONNX (the longest step)")
        plain = {"fp32": export_bert(bert, raw / "bert.onnx")}
        if wanted:
            progress("folding constants")
            folded = optimize_graph(plain["fp32"], raw / "folded.onnx", basic=True)
        for precision in dict.fromkeys(wanted):
            progress(f"quantizing the BERT to {precision}")
            quantizer = quantize_q8 if precision == "q8" else quantize_q4
            plain[precision] = quantizer(folded, raw / f"bert_{precision}.onnx")
        graphs = {}
        for precision, graph in plain.items():
            progress(f"optimizing {graph.name}")
            graphs[precision] = optimize_graph(graph, work / graph.name)
        shutil.rmtree(raw)
        progress("checking the BERT's features against PyTorch")
        bert.tokenizer.save(work / "tokenizer.json")
        texts = ["今日はいい天気ですね。", "えっ！？本当に……そうなの？", "GitHubでJSONを公開。"]
        reference = [f.numpy() for f in bert.features(texts)]
        ids, mask = bert.tokenizer.encode_batch(texts)
        errors = {}
        for precision, path in graphs.items():
            hidden = ort.InferenceSession(str(path)).run(
                None, {"input_ids": ids, "attention_mask": mask}
            )[0]
            errors[precision] = max(
                float(np.abs(hidden[i, : len(r)] - r).max()) for i, r in enumerate(reference)
            )
        if errors["fp32"] > TOLERANCE:
            raise ConversionError(
                f"BERT ONNX features differ from PyTorch by {errors['fp32']:.3g} "
                f"(> {TOLERANCE}); no bundle written"
            )
        manifest = {
            "format": BERT_FORMAT,
            "format_version": FORMAT_VERSION,
            "hidden_size": bert.hidden_size,
            "graphs": {p: g.name for p, g in graphs.items()},
            "feature_error_vs_torch": errors,
            "files": {p.name: sha256_file(p) for p in sorted(work.iterdir())},
        }
        (work / "bert.json").write_text(json.dumps(manifest, indent=1))
    return out_dir, errors
