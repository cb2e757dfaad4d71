"""Reading an AIVMX file: an ONNX graph of SBV2's whole synthesizer with AIVM metadata.

The metadata lives in the model's ``metadata_props``: ``aivm_manifest`` (JSON:
name, uuid, version, licence text, speakers and their styles by local id),
``aivm_hyper_parameters`` (SBV2's ``config.json``) and ``aivm_style_vectors``
(base64 of a ``.npy``, one 256-wide row per style). Every check that can fail
names the file and what is wrong with it, so a damaged download or a voice for
another architecture or language is told apart from a bug. The file is not
trusted: every value is checked for its type before it is used (a crafted file
is an :class:`AivmxError`, never a traceback), and strings from it are quoted
with ``repr`` in messages, so its control characters never reach a terminal raw.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt

from yomiage.aivmx.metadata import EntryTooLargeError, MetadataError, read_metadata, strict_json
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
    n_speakers: int  # rows of the graph's speaker embedding: the valid ``sid`` values
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
    try:  # first what a listing reads, without the graph: an entry it refuses is refused here
        read_metadata(path)
    except EntryTooLargeError as exc:
        raise AivmxError(f"{path}: {exc}") from None
    except (MetadataError, OSError):
        pass  # the whole parse below says what is wrong, in onnx's words
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AivmxError(f"{path}: cannot read the AIVMX file: {exc.strerror or exc}") from exc
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError, TypeError) as exc:
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
    version, license, description = (
        _optional_text(manifest, key, path) for key in ("version", "license", "description")
    )
    if "aivm_hyper_parameters" not in meta or "aivm_style_vectors" not in meta:
        missing = sorted({"aivm_hyper_parameters", "aivm_style_vectors"} - set(meta))
        raise AivmxError(f"{path}: the metadata lacks {', '.join(missing)}")
    config = parse_config(_json(meta["aivm_hyper_parameters"], path, "aivm_hyper_parameters"), path)
    vectors = _style_vectors(meta["aivm_style_vectors"], path)
    inputs = tuple(i.name for i in model.graph.input)
    if set(inputs) != set(GRAPH_INPUTS):
        raise AivmxError(
            f"{path}: the graph's inputs are {', '.join(map(repr, inputs)) or 'none'}; an SBV2 "
            f"JP-Extra export has {', '.join(GRAPH_INPUTS)}"
        )
    n_speakers = _graph_speakers(model.graph, path)
    speakers = _speakers(manifest, path, n_styles=len(vectors), n_speakers=n_speakers)
    return AivmxFile(
        path=path,
        name=_text(manifest, "name", path),
        uuid=_text(manifest, "uuid", path),
        version=version or "",
        license=license,
        description=description or "",
        speakers=speakers,
        n_speakers=n_speakers,
        config=config,
        style_vectors=vectors,
        model=model,
    )


def _json(text: str, path: Path, key: str) -> Any:
    try:
        return strict_json(text)
    except RecursionError:
        raise AivmxError(f"{path}: {key} is not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise AivmxError(f"{path}: {key} is not valid JSON: {exc}") from exc


def _text(data: Mapping[str, Any], key: str, path: Path, where: str = "the manifest") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        got = "" if value is None else f" (got {type(value).__name__}, not text)"
        raise AivmxError(f"{path}: {where} has no {key}{got}")
    return value


def _optional_text(data: Mapping[str, Any], key: str, path: Path) -> str | None:
    """``data[key]`` if it is text, None if absent or null; AivmxError for another type."""
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise AivmxError(f"{path}: the manifest's {key} is {type(value).__name__}, not text")


def _graph_speakers(graph: Any, path: Path) -> int:
    """The number of speakers the graph embeds (rows of ``emb_g.weight``)."""
    for tensor in graph.initializer:
        if tensor.name == "emb_g.weight" and len(tensor.dims) == 2 and tensor.dims[0] > 0:
            return int(tensor.dims[0])
    raise AivmxError(
        f"{path}: the graph has no speaker embedding (emb_g.weight): not an SBV2 JP-Extra export"
    )


def _style_vectors(encoded: str, path: Path) -> npt.NDArray[np.float32]:
    try:
        data = io.BytesIO(base64.b64decode(encoded, validate=True))
        _check_npy_size(data)
        array = np.load(data, allow_pickle=False)
    except (binascii.Error, ValueError, OSError, EOFError, MemoryError) as exc:
        raise AivmxError(f"{path}: aivm_style_vectors is not a base64 .npy array: {exc}") from exc
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "fiu":
        kind = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
        raise AivmxError(f"{path}: style vectors of type {kind}; expected real numbers")
    if array.ndim != 2 or array.shape[1] != STYLE_DIM or not len(array):
        raise AivmxError(
            f"{path}: style vectors of shape {list(array.shape)}; expected [styles, {STYLE_DIM}]"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        vectors = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise AivmxError(f"{path}: the style vectors hold NaN or infinity (in float32)")
    return vectors


def _check_npy_size(data: io.BytesIO) -> None:
    """ValueError unless the .npy header's shape and type match the bytes that follow
    (numpy would allocate what the header declares before reading: 10^12 rows...)."""
    fmt = np.lib.format
    version = fmt.read_magic(data)
    read_header = fmt.read_array_header_2_0 if version >= (2, 0) else fmt.read_array_header_1_0
    shape, _, dtype = read_header(data)
    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
    present = len(data.getbuffer()) - data.tell()
    if declared != present:
        raise ValueError(f"its header declares {declared} bytes of shape {list(shape)}; "
                         f"it holds {present}")  # fmt: skip
    data.seek(0)


def _speakers(
    manifest: Mapping[str, Any], path: Path, n_styles: int, n_speakers: int
) -> tuple[AivmxSpeaker, ...]:
    raw = manifest.get("speakers")
    if not isinstance(raw, list) or not raw:
        raise AivmxError(f"{path}: the manifest lists no speakers")
    speakers: list[AivmxSpeaker] = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise AivmxError(f"{path}: a speaker entry is not an object")
        name = _text(entry, "name", path, "a speaker")
        if any(s.name == name for s in speakers):
            raise AivmxError(f"{path}: two speakers are named {name!r}")
        languages = entry.get("supported_languages")
        if not isinstance(languages, list) or not all(isinstance(x, str) for x in languages):
            raise AivmxError(
                f"{path}: speaker {name!r}: supported_languages must be a list of text"
            )
        if "ja" not in languages:
            spoken = ", ".join(map(repr, languages)) or "no language"
            raise AivmxError(
                f"{path}: speaker {name!r} speaks {spoken}; yomiage reads Japanese ('ja') voices"
            )
        local_id = entry.get("local_id")
        if not _is_int(local_id) or not 0 <= local_id < n_speakers:
            raise AivmxError(
                f"{path}: speaker {name!r} has local_id {local_id!r}; the graph embeds "
                f"{n_speakers} speaker(s), ids 0-{n_speakers - 1}"
            )
        uuid = entry.get("uuid", "")
        if not isinstance(uuid, str):
            raise AivmxError(f"{path}: speaker {name!r}: uuid must be text")
        styles = _styles(entry.get("styles"), path, name, n_styles)
        speakers.append(AivmxSpeaker(name, uuid, local_id, styles, tuple(languages)))
    return tuple(speakers)


def _styles(raw: Any, path: Path, speaker: str, n_styles: int) -> dict[str, int]:
    """A speaker's style names to style-vector rows (AivmxError unless each is an object
    with a name, text, and a ``local_id`` naming a row)."""
    if not isinstance(raw, list) or not raw:
        raise AivmxError(f"{path}: speaker {speaker!r} needs a list of at least one style")
    styles: dict[str, int] = {}
    for style in raw:
        if not isinstance(style, dict):
            raise AivmxError(f"{path}: speaker {speaker!r} has a style that is not an object")
        row = style.get("local_id")
        if not _is_int(row) or not 0 <= row < n_styles:
            raise AivmxError(
                f"{path}: speaker {speaker!r} has a style with local_id {row!r}; the file "
                f"holds {n_styles} style vectors"
            )
        name = style.get("name", str(row))
        if not isinstance(name, str) or not name:
            raise AivmxError(f"{path}: speaker {speaker!r}: style {row} has no name (text)")
        if name in styles:
            raise AivmxError(f"{path}: speaker {speaker!r} has two styles named {name!r}")
        styles[name] = row
    return styles


def _is_int(value: Any) -> TypeGuard[int]:
    """An integer, not a bool (JSON ``true`` would otherwise be id 1)."""
    return isinstance(value, int) and not isinstance(value, bool)
