"""BERT features with ONNX Runtime: our BERT bundles and plain exported folders.

A yomiage BERT bundle has ``bert.json`` naming its graphs. Folders from other
exporters (HayaKoe's ``onnx/bert/q8/bert_q8.onnx`` with ``bert/tokenizer/``)
work too: the graph is found by name, its inputs and width are read from the
graph itself, and the tokenizer folder may be given apart.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yomiage.bert.batches import token_batches
from yomiage.bert.tokenizer import CharTokenizer
from yomiage.errors import ModelLoadError
from yomiage.json_file import read_json_file
from yomiage.runtime.bundle import BERT_FORMAT
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.integrity import used_files, verify_files
from yomiage.runtime.sliced_berts import SlicedBertError, SlicedBerts

log = logging.getLogger(__name__)

BERT_PRECISIONS = {"fp32": "bert.onnx", "q8": "bert_q8.onnx", "q4": "bert_q4.onnx"}


def _bundle_graph(bert_dir: Path, precision: str, verified_dir: Path | None) -> tuple[Path, int]:
    manifest_path = bert_dir / "bert.json"
    try:
        manifest = read_json_file(manifest_path)
    except (OSError, ValueError) as exc:  # JsonFileError names the file
        raise ModelLoadError(f"unreadable BERT manifest: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != BERT_FORMAT:
        raise ModelLoadError(f"{manifest_path}: not a {BERT_FORMAT} manifest")
    graph = bert_dir / BERT_PRECISIONS[precision]
    if not graph.is_file():
        have = ", ".join(sorted(manifest.get("graphs", {})))
        raise ModelLoadError(f"{bert_dir} has no {precision} BERT ({graph.name}); it has {have}")
    files = manifest.get("files")
    if isinstance(files, dict):
        used = used_files(files, graph.name, BERT_PRECISIONS.values())
        verify_files(bert_dir, files, used, verified_dir)
    hidden = manifest.get("hidden_size")
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
        raise ModelLoadError(f"{manifest_path}: 'hidden_size' must be a positive integer")
    return graph, hidden


def _plain_graph(bert_dir: Path, precision: str) -> Path:
    wanted = bert_dir / BERT_PRECISIONS[precision]
    if wanted.is_file():
        return wanted
    graphs = sorted(bert_dir.glob("*.onnx"))
    if len(graphs) == 1:
        return graphs[0]
    found = (
        f"several graphs ({', '.join(g.name for g in graphs)}) but no {wanted.name}"
        if graphs
        else "no .onnx graph"
    )
    raise ModelLoadError(
        f"{bert_dir} is not a BERT bundle (no bert.json) and has {found}; make a bundle "
        "with `yomiage convert SBV2_DIR OUT_DIR --bert BERT_DIR`"
    )


def _sliced_graph(graph: Path, sliced: SlicedBerts) -> Path | None:
    """The kept graph with sliced position tables for ``graph``, or None (nothing to
    slice, or it could not be made: then logged, and ``graph`` runs)."""
    try:
        return sliced.graph(graph)
    except (SlicedBertError, OSError) as exc:
        log.warning("%s; the BERT runs with its whole position tables", exc)
        return None


class OnnxBert:
    """Tokenizer + one BERT session, shared by every voice of a backend."""

    def __init__(
        self,
        bert_dir: Path,
        sessions: Sessions,
        *,
        precision: str = "q8",
        tokenizer_dir: Path | None = None,
        verified_dir: Path | None = None,
        sliced: SlicedBerts | None = None,
    ) -> None:
        """``sliced``: where the graph with its position tables cut to each call's
        positions is kept (:mod:`yomiage.runtime.sliced_berts`); None runs the graph as
        it is."""
        if precision not in BERT_PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(BERT_PRECISIONS)}")
        if not bert_dir.is_dir():
            raise ModelLoadError(f"BERT folder not found: {bert_dir}")
        hidden_size: int | None = None
        if (bert_dir / "bert.json").is_file():
            graph, hidden_size = _bundle_graph(bert_dir, precision, verified_dir)
        else:
            graph = _plain_graph(bert_dir, precision)
        self.path = graph
        self.tokenizer = CharTokenizer.from_dir(tokenizer_dir or bert_dir)
        run = _sliced_graph(graph, sliced) if sliced is not None else None
        # ONNX Runtime: measured fastest, least memory; the sliced graph's weights are the
        # BERT's own, in its folder
        self.session = (
            sessions.open(run, weights_dir=graph.parent) if run is not None
            else sessions.open(graph)
        )  # fmt: skip
        inputs = self.session.input_names
        self._token_types = "token_type_ids" in inputs
        if not {"input_ids", "attention_mask"} >= inputs - {"token_type_ids"}:
            raise ModelLoadError(
                f"{graph}: unexpected BERT inputs {sorted(inputs)} "
                "(want input_ids and attention_mask)"
            )
        self.hidden_size = hidden_size or self._probe_width()

    def _probe_width(self) -> int:
        width = self.session.output_shape(0)[-1]
        if isinstance(width, int):
            return width
        return int(self.features(["あ"])[0].shape[1])

    def features(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        """``[n_tok, C]`` features per text, in order, from padded batches of bounded
        size (:func:`yomiage.bert.batches.token_batches`)."""
        encoded = [self.tokenizer.encode(t) for t in texts]
        out: list[npt.NDArray[np.float32]] = [np.empty((0, 0), np.float32)] * len(texts)
        for batch in token_batches([len(e) for e in encoded]):
            for index, feature in zip(batch, self._batch([encoded[i] for i in batch]), strict=True):
                out[index] = feature
        return out

    def _batch(self, encoded: Sequence[Sequence[int]]) -> list[npt.NDArray[np.float32]]:
        """``[n_tok, C]`` features per encoded text from one padded call."""
        if not encoded:
            return []
        ids, mask = self.tokenizer.pad(encoded)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._token_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(feeds)[0]
        lengths = mask.sum(axis=1)
        return [np.asarray(hidden[i, : int(n)], np.float32) for i, n in enumerate(lengths)]
