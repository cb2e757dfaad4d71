"""The CPU backend: ONNX graphs on ONNX Runtime (and OpenVINO where it is faster),
and numpy; no torch.

One BERT session serves every voice. Voices are yomiage bundles
(:class:`~yomiage.runtime.onnx_voice.BundleVoice`: windowed decoding,
reproducible noise) or HayaKoe speaker folders
(:class:`~yomiage.runtime.hayakoe.HayakoeVoice`), chosen by what the folder holds;
both are :class:`~yomiage.runtime.voice.Voice` objects.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yomiage.bert.features import join_token_rows
from yomiage.errors import ModelLoadError
from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.decoder_layouts import DecoderLayouts
from yomiage.runtime.engines.onnx_session import session_options
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.hayakoe import HayakoeVoice
from yomiage.runtime.layouts import VoiceLayout, detect_layout
from yomiage.runtime.light_flows import LightFlows
from yomiage.runtime.onnx_bert import BERT_PRECISIONS, OnnxBert
from yomiage.runtime.onnx_voice import BundleVoice
from yomiage.runtime.plan.job import BertGraph
from yomiage.runtime.plan.planner import Planner
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.store import PlanStore
from yomiage.runtime.plan.value import Plan
from yomiage.runtime.sliced_berts import SlicedBerts
from yomiage.text.g2p import Phonemes

__all__ = ["BERT_PRECISIONS", "OnnxBackend", "session_options"]


OnnxVoice = BundleVoice | HayakoeVoice

log = logging.getLogger(__name__)


class OnnxBackend:
    """One BERT (and its tokenizer) shared by the voices it loads; thread-safe."""

    def __init__(
        self,
        bert_dir: Path | str,
        *,
        precision: str = "q8",
        threads: int | None = None,
        tokenizer_dir: Path | str | None = None,
        plan_request: PlanRequest | None = None,
        verified_dir: Path | None = None,
        compiled_dir: Path | None = None,
        openvino: bool | None = None,
        plans_dir: Path | None = None,
        layouts_dir: Path | None = None,
        flows_dir: Path | None = None,
        berts_dir: Path | None = None,
    ) -> None:
        """Each bundle runs by the plan :class:`Planner` makes for it from
        ``plan_request`` (the decoder precision, the memory budget, measuring, the
        windows: :class:`~yomiage.runtime.plan.request.PlanRequest`; None: the
        defaults), measured once per CPU and kept in ``plans_dir``; ``layouts_dir``
        keeps decoders made in the layout a plan chose, ``flows_dir`` flows made with
        bfloat16 weights for a plan's budget, ``berts_dir`` the BERT's graph with its
        position tables sliced (:mod:`yomiage.runtime.sliced_berts`). Bundles are checked against
        their recorded sha256 as they load; ``verified_dir`` remembers which files
        were (:mod:`yomiage.runtime.integrity`); ``compiled_dir`` keeps OpenVINO's
        compiled graphs (:class:`~yomiage.runtime.engines.sessions.Sessions`);
        ``openvino=False`` runs every graph on ONNX Runtime."""
        self.plan_request = plan_request if plan_request is not None else PlanRequest()
        self.verified_dir = verified_dir
        # A voice compiles a graph for OpenVINO in a child process, once: compiling
        # in its own would raise its peak over what the plan predicted.
        self.sessions = Sessions(threads, cache_dir=compiled_dir, openvino=openvino,
                                 compile_ahead=True)  # fmt: skip
        self.options = self.sessions.ort_options
        self.bert = OnnxBert(
            Path(bert_dir),
            self.sessions,
            precision=precision,
            tokenizer_dir=Path(tokenizer_dir) if tokenizer_dir is not None else None,
            verified_dir=verified_dir,
            sliced=SlicedBerts(berts_dir) if berts_dir is not None else None,
        )
        self.planner = Planner(
            self.sessions,
            BertGraph(
                Path(bert_dir),
                self.bert.path,
                Path(tokenizer_dir) if tokenizer_dir is not None else None,
                precision,
                berts_dir,
            ),
            self.plan_request,
            store=PlanStore(plans_dir) if plans_dir is not None else None,
            compiled_dir=compiled_dir,
            layouts=DecoderLayouts(layouts_dir) if layouts_dir is not None else None,
            flows=LightFlows(flows_dir) if flows_dir is not None else None,
        )

    def plan(self, folder: Path) -> Plan:
        """The plan a bundle in ``folder`` runs by (may measure, once per CPU)."""
        return self.planner.plan_for(read_manifest(folder))

    def measure_plan(self, folder: Path, stop: threading.Event | None = None) -> bool:
        """Measure this machine's plan for the bundle in ``folder`` now, where none is
        kept (:meth:`Planner.measure <yomiage.runtime.plan.planner.Planner.measure>`;
        False for a HayaKoe folder, which has no plan)."""
        if detect_layout(folder) is VoiceLayout.HAYAKOE:
            return False
        return self.planner.measure(read_manifest(folder), stop)

    def load_voice(self, folder: Path | str) -> OnnxVoice:
        """A yomiage bundle (``voice.json``) or a HayaKoe speaker folder."""
        folder = Path(folder)
        voice: OnnxVoice
        if detect_layout(folder) is VoiceLayout.HAYAKOE:
            precision = self.plan_request.decoder_precision
            if precision in ("bf16", "int8"):
                raise ModelLoadError(
                    f"{folder}: decoder_precision={precision!r} needs a bundle "
                    "from `yomiage convert`, not a HayaKoe export (one graph, float32)"
                )
            voice = HayakoeVoice(folder, self.sessions)
        else:
            voice = self._load_bundle(folder)
        if voice.bert_dim != self.bert.hidden_size:
            raise ModelLoadError(
                f"{folder}: the voice expects BERT features of width {voice.bert_dim}, "
                f"the BERT gives {self.bert.hidden_size}"
            )
        return voice

    def load_voice_by(self, folder: Path, plan: Plan) -> BundleVoice:
        """The bundle in ``folder`` by ``plan``, as given: a voice whose measured plan did
        not load goes back to the one it ran by (:meth:`TTS.take_measured_plans
        <yomiage.TTS.take_measured_plans>`)."""
        return self._load_bundle(folder, plan)

    def _load_bundle(self, folder: Path, plan: Plan | None = None) -> BundleVoice:
        plan = plan if plan is not None else self.plan(folder)
        try:
            return BundleVoice(folder, self.sessions, plan, verified_dir=self.verified_dir)
        except ModelLoadError as exc:
            graphs = {"decoder": plan.decoder_graph, "flow": plan.flow_graph}
            made = next((g for g, path in graphs.items() if path and str(path) in str(exc)), None)
            if made is None:
                raise
            # A graph made for the plan no longer loads (its files in the cache damaged
            # since): the bundle's own serves now, the next load makes it again.
            log.warning("%s; it is removed and the bundle's own %s runs", exc, made)
            plan = self.planner.without_made(plan, made)
            return BundleVoice(folder, self.sessions, plan, verified_dir=self.verified_dir)

    def new_rng(self, seed: int | None) -> np.random.Generator:
        return np.random.default_rng(seed)

    def bert_features(self, sentences: Sequence[Phonemes]) -> list[npt.NDArray[np.float32]]:
        """``[n_tok, C]`` features per sentence from one padded batch."""
        return self.bert.features([p.bert_text for p in sentences])

    def join_bert_features(
        self, features: Sequence[npt.NDArray[np.float32]]
    ) -> npt.NDArray[np.float32]:
        return np.concatenate(join_token_rows(features))

    def compile(self) -> None:
        """Nothing: ONNX Runtime optimizes the graphs when it loads them."""
