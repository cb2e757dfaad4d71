"""Reading an AIVMX file: an ONNX graph of SBV2's whole synthesizer with AIVM metadata.

The metadata lives in the model's ``metadata_props``: ``aivm_manifest`` (JSON:
name, uuid, version, licence text, speakers and their styles by local id),
``aivm_hyper_parameters`` (SBV2's ``config.json``) and ``aivm_style_vectors``
(base64 of a ``.npy``, one 256-wide row per style). Every check that can fail
names the file and what is wrong with it, so a damaged download or a voice for
another architecture or language is told apart from a bug.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.errors import ModelLoadError
from yomiage.sbv2.config import STYLE_DIM, VoiceConfig, parse_config

ARCHITECTURE = "Style-Bert-VITS2 (JP-Extra)"
# SBV2's convert_onnx.py exports SynthesizerTrn.infer with these inputs, in this order.
GRAPH_INPUTS = (
    "x_tst", "x_tst_lengths", "sid", "tones", "language", "bert", "style_vec",
    "length_scale", "sdp_ratio", "noise_scale", "noise_scale_w",
)  # fmt: skip
NEUTRAL_STYLE = "ノーマル"  # AivisSpeech's name for SBV2's "Neutral"


class AivmxError(ModelLoadError):
    """An AIVMX file that cannot be used: damaged, truncated, or not a JP-Extra ``ja`` voice."""


@dataclass(frozen=True)
class AivmxSpeaker:
    """One speaker of the manifest: ``local_id`` is the graph's ``sid``; ``styles`` map
    each style's name to its row of the style vectors."""

    name: str
    uuid: str
    local_id: int
    styles: Mapping[str, int]
    languages: tuple[str, ...]


@dataclass(frozen=True)
class AivmxFile:
    """What an AIVMX file holds, checked. ``model`` is the parsed ``onnx.ModelProto``."""

    path: Path
    name: str
    uuid: str
    version: str
    license: str | None
    description: str
    speakers: tuple[AivmxSpeaker, ...]
    config: VoiceConfig
    style_vectors: npt.NDArray[np.float32]
    model: Any

    @property
    def style2id(self) -> dict[str, int]:
        """Style names to style-vector rows, over all speakers (the rows are shared)."""
        return {name: row for s in self.speakers for name, row in s.styles.items()}

    @property
    def spk2id(self) -> dict[str, int]:
        return {s.name: s.local_id for s in self.speakers}


def read_aivmx(path: Path | str) -> AivmxFile:
    """The checked contents of the AIVMX file at ``path`` (:class:`AivmxError` if unusable)."""
    import onnx
    from google.protobuf.message import DecodeError

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AivmxError(f"{path}: cannot read the AIVMX file: {exc.strerror or exc}") from exc
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise AivmxError(
            f"{path}: not an ONNX model (truncated or damaged download?): {exc}"
        ) from exc
    meta = {p.key: p.value for p in model.metadata_props}
    if "aivm_manifest" not in meta:
        raise AivmxError(
            f"{path}: no aivm_manifest in the model's metadata: not an AIVMX file "
            "(or one cut short before its metadata)"
        )
    manifest = _json(meta["aivm_manifest"], path, "aivm_manifest")
    if not isinstance(manifest, dict):
        raise AivmxError(f"{path}: aivm_manifest must be a JSON object")
    architecture = manifest.get("model_architecture")
    if architecture != ARCHITECTURE:
        raise AivmxError(
            f"{path}: a {architecture!r} voice; yomiage runs {ARCHITECTURE!r} voices only"
        )
    if manifest.get("model_format", "ONNX") != "ONNX":
        raise AivmxError(f"{path}: model_format {manifest.get('model_format')!r}, not ONNX")
    if "aivm_hyper_parameters" not in meta or "aivm_style_vectors" not in meta:
        missing = sorted({"aivm_hyper_parameters", "aivm_style_vectors"} - set(meta))
        raise AivmxError(f"{path}: the metadata lacks {', '.join(missing)}")
    config = parse_config(_json(meta["aivm_hyper_parameters"], path, "aivm_hyper_parameters"), path)
    vectors = _style_vectors(meta["aivm_style_vectors"], path)
    speakers = _speakers(manifest, path, n_styles=len(vectors))
    inputs = tuple(i.name for i in model.graph.input)
    if set(inputs) != set(GRAPH_INPUTS):
        raise AivmxError(
            f"{path}: the graph's inputs are {', '.join(inputs) or 'none'}; an SBV2 JP-Extra "
            f"export has {', '.join(GRAPH_INPUTS)}"
        )
    return AivmxFile(
        path=path,
        name=_text(manifest, "name", path),
        uuid=_text(manifest, "uuid", path),
        version=str(manifest.get("version", "")),
        license=manifest.get("license") if isinstance(manifest.get("license"), str) else None,
        description=str(manifest.get("description") or ""),
        speakers=speakers,
        config=config,
        style_vectors=vectors,
        model=model,
    )


def _json(text: str, path: Path, key: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AivmxError(f"{path}: {key} is not valid JSON: {exc}") from exc


def _text(data: Mapping[str, Any], key: str, path: Path) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise AivmxError(f"{path}: the manifest has no {key}")
    return value


def _style_vectors(encoded: str, path: Path) -> npt.NDArray[np.float32]:
    try:
        array = np.load(io.BytesIO(base64.b64decode(encoded, validate=True)), allow_pickle=False)
    except (binascii.Error, ValueError, OSError, EOFError) as exc:
        raise AivmxError(f"{path}: aivm_style_vectors is not a base64 .npy array: {exc}") from exc
    if array.ndim != 2 or array.shape[1] != STYLE_DIM or not len(array):
        raise AivmxError(
            f"{path}: style vectors of shape {list(array.shape)}; expected [styles, {STYLE_DIM}]"
        )
    if not np.isfinite(array).all():
        raise AivmxError(f"{path}: the style vectors hold NaN or infinity")
    return np.ascontiguousarray(array, dtype=np.float32)


def _speakers(manifest: Mapping[str, Any], path: Path, n_styles: int) -> tuple[AivmxSpeaker, ...]:
    raw = manifest.get("speakers")
    if not isinstance(raw, list) or not raw:
        raise AivmxError(f"{path}: the manifest lists no speakers")
    speakers = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise AivmxError(f"{path}: a speaker entry is not an object")
        name = _text(entry, "name", path)
        languages = tuple(str(x) for x in entry.get("supported_languages") or ())
        if "ja" not in languages:
            raise AivmxError(
                f"{path}: speaker {name!r} speaks {', '.join(languages) or 'no language'}; "
                "yomiage reads Japanese ('ja') voices"
            )
        local_id = entry.get("local_id")
        styles: dict[str, int] = {}
        for style in entry.get("styles") or ():
            row = style.get("local_id") if isinstance(style, dict) else None
            if not isinstance(row, int) or not 0 <= row < n_styles:
                raise AivmxError(
                    f"{path}: speaker {name!r} has a style with local_id {row!r}; the file "
                    f"holds {n_styles} style vectors"
                )
            styles[str(style.get("name") or row)] = row
        if not isinstance(local_id, int) or local_id < 0 or not styles:
            raise AivmxError(f"{path}: speaker {name!r} needs a local_id and at least one style")
        speakers.append(
            AivmxSpeaker(name, str(entry.get("uuid") or ""), local_id, styles, languages)
        )
    return tuple(speakers)
