"""Choosing each voice's :class:`~yomiage.runtime.plan.value.Plan` for one CPU backend,
whole: nothing after it completes the plan.

The order of the decision, all of it here:

1. ``decoder_precision="int8"``: the int8 graph on ONNX Runtime (an explicit
   choice; nothing to measure).
2. A small decoder (the committed tiny voice): ONNX Runtime float32 (bf16 if asked),
   as :mod:`yomiage.runtime.engines.placement` explains.
3. Measuring off (``YOMIAGE_PLAN_MEASURE=0``, ``TTS(measure_plan=False)``) or no
   cache to keep measurements in: :func:`~yomiage.runtime.plan.fallback.fallback_plan`.
4. Otherwise the measurements kept for this CPU, voice architecture, threads (or
   the counts to choose among, when none was asked for) and engine versions; where
   there are none, those shipped for this CPU family
   (:mod:`yomiage.runtime.plan.priors`), else
   :func:`~yomiage.runtime.plan.fallback.fallback_plan`: a load never waits for
   measuring, unless ``measure_plan=True`` asks it to. This machine is measured by
   :meth:`Planner.measure` (``yomiage bench``, a server's idle time;
   :mod:`yomiage.runtime.plan.measure`, minutes, logged as it goes), and its
   measurements are taken from the next load on. Then
   :func:`~yomiage.runtime.plan.choose.choose_plan` over the choices the requested
   precision allows. A measurement that fails falls back, with the reason logged.
   One process measures a key at a time, the others wait for its result
   (:mod:`yomiage.runtime.plan.lock`); each step is kept as it ends, so a stopped
   measuring resumes (:mod:`yomiage.runtime.plan.steps`).
   Where the cache can keep them, ONNX Runtime float32 is also timed with the
   decoder's stages in the other layouts of
   :data:`~yomiage.runtime.decoder_layouts.LAYOUT_CHOICES`, and a plan that takes
   one names the graph made from the bundle's (:attr:`Plan.decoder_graph
   <yomiage.runtime.plan.value.Plan.decoder_graph>`).

Every plan echoes the request it was made for (:attr:`Plan.request
<yomiage.runtime.plan.value.Plan.request>`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from yomiage.runtime.bundle import VoiceManifest, graph_bytes
from yomiage.runtime.decoder_layouts import LAYOUT_CHOICES, DecoderLayouts, LayoutError
from yomiage.runtime.derived import flow_key, layout_key
from yomiage.runtime.engines.placement import (
    ENGINES,
    OPENVINO_BF16,
    ORT_BF16,
    ORT_FP32,
    ORT_INT8,
)
from yomiage.runtime.light_flows import LightFlow, LightFlowError, LightFlows
from yomiage.runtime.plan.checks import measurements_problem
from yomiage.runtime.plan.choose import choose_plan
from yomiage.runtime.plan.fallback import fallback_plan
from yomiage.runtime.plan.job import BertGraph, measure_job
from yomiage.runtime.plan.lock import measuring_turn
from yomiage.runtime.plan.measure import (
    MeasuredSteps,
    MeasureError,
    measure,
)
from yomiage.runtime.plan.measurements import Measurements
from yomiage.runtime.plan.priors import PRIORS_DIR, cpu_family, prior_for
from yomiage.runtime.plan.request import MEASURE_ENV, PlanRequest
from yomiage.runtime.plan.schedules import candidates
from yomiage.runtime.plan.store import PlanKey, PlanStore, cpu_identity, voice_architecture
from yomiage.runtime.plan.value import DecoderChoice, Plan

if TYPE_CHECKING:
    from yomiage.runtime.engines.sessions import Sessions

log = logging.getLogger(__name__)

# Decoders with fewer bytes of weights than this run on ONNX Runtime unmeasured (rule 2):
# 1 M float32 parameters, between the tiny voice's 0.06 M (OpenVINO slower and ~3x the
# memory) and a full-size SBV2 decoder's 14.6 M (OpenVINO about twice as fast).
OPENVINO_MIN_DECODER_BYTES = 4_000_000

# Takes the measurements of a job: measure() itself, resuming from and keeping to the steps
# (and ending at a ``stop`` event, where one is given).
Measure = Callable[..., Measurements]


class Planner:
    """Plans for the voices of one backend, each whole (:meth:`plan_for`); thread-safe
    (one measurement at a time)."""

    def __init__(
        self,
        sessions: Sessions,
        bert: BertGraph,
        request: PlanRequest | None = None,
        *,
        store: PlanStore | None = None,
        compiled_dir: Path | None = None,
        layouts: DecoderLayouts | None = None,
        flows: LightFlows | None = None,
        measure_fn: Measure = measure,
        priors_dir: Path = PRIORS_DIR,
    ) -> None:
        """``request``: what every plan is asked for (None: the defaults). ``store``
        keeps the measurements (None: nothing is measured); ``layouts`` keeps decoders
        made in other layouts (None: only the bundle's own is tried); ``flows``, flows
        made with bfloat16 weights (None: the flow's weights stay float32). ``measure_fn``
        takes the measurements, ``priors_dir`` holds those shipped (tests give their own)."""
        self.sessions = sessions
        self.bert = bert
        self.request = request if request is not None else PlanRequest()
        self.store = store
        self.compiled_dir = compiled_dir
        self.layouts = layouts
        self.flows = flows
        self._measure = measure_fn
        self.priors_dir = priors_dir
        self._lock = threading.Lock()

    def plan_for(self, manifest: VoiceManifest) -> Plan:
        """The plan a bundle with ``manifest`` runs by, whole: its decoder graph made in
        the plan's layout where it chose another one (the bundle's own where that
        cannot be made, with a warning, and the plan says so). ValueError for
        ``bf16`` where OpenVINO is not available."""
        self._check_bf16()
        plan = self._chosen(manifest)
        layout, key = plan.decoder.layout, layout_key(manifest.files)
        if not layout:
            return plan
        decoder = manifest.file("decoder.onnx")
        if self.layouts is None or key is None:
            return self._in_bundle_layout(plan)
        try:
            return replace(plan, decoder_graph=self.layouts.graph(decoder, key, layout))
        except LayoutError as exc:
            log.warning("%s; its decoder runs as the bundle has it", exc)
            return self._in_bundle_layout(plan)

    def without_made(self, plan: Plan, graph: str) -> Plan:
        """``plan`` with the bundle's own ``graph`` ("decoder" or "flow"), the one made for
        it removed: what a voice runs once that no longer loads (its files in the cache
        damaged since; the next load makes it again). Without its light flow, a plan may
        no longer hold its budget (it says so)."""
        if graph == "decoder":
            if self.layouts is not None and plan.decoder_graph is not None:
                self.layouts.discard(plan.decoder_graph)
            return self._in_bundle_layout(plan)
        if self.flows is not None and plan.flow_graph is not None:
            self.flows.discard(plan.flow_graph)
        basis = f"{plan.basis}; the flow's weights float32 (its bfloat16 one did not load)"
        return replace(plan, flow=ORT_FP32, flow_graph=None, flow_floor=None, basis=basis)

    def _in_bundle_layout(self, plan: Plan) -> Plan:
        return replace(plan, decoder=replace(plan.decoder, layout=0), decoder_graph=None)

    def _check_bf16(self) -> None:
        """An explicit ``bf16`` runs on OpenVINO: ValueError where it is not available, a
        warning where the CPU emulates bfloat16 (slower than float32 there)."""
        if self.request.decoder_precision != "bf16":
            return
        if not self.sessions.has_openvino:
            raise ValueError(
                "decoder_precision='bf16' runs on OpenVINO, which is not available here "
                "(not installed, or YOMIAGE_OPENVINO=0): pip install openvino, or use 'auto'"
            )
        if not self.sessions.native_bf16:
            log.warning(
                "this CPU has no native bfloat16 (AVX512_BF16, AMX or Arm BF16): "
                "decoder_precision='bf16' is emulated and slower than 'fp32'"
            )

    def _chosen(self, manifest: VoiceManifest) -> Plan:
        """The plan by the order of the decision (the module's docstring)."""
        threads = self.sessions.threads
        request = self.request
        requested = request.decoder_precision
        if requested == "int8":
            return Plan(DecoderChoice.at(ORT_INT8), request,
                        "the int8 decoder runs on ONNX Runtime", threads)  # fmt: skip
        decoder_bytes = graph_bytes(manifest.file("decoder.onnx"))
        if decoder_bytes < OPENVINO_MIN_DECODER_BYTES:  # nothing worth measuring
            small = f"a small decoder ({decoder_bytes / 1e6:.1f} MB)"
            if requested == "bf16":
                return Plan(DecoderChoice.at(OPENVINO_BF16), request,
                            f"{small}: bf16 as asked", threads)  # fmt: skip
            return Plan(DecoderChoice.at(ORT_FP32), request,
                        f"{small} runs on ONNX Runtime", threads)  # fmt: skip
        has_openvino = self.sessions.has_openvino
        native = has_openvino and self.sessions.native_bf16
        allowed = self._allowed(has_openvino, native, self._other_layouts(manifest))
        measuring = request.measuring()
        store = self.store
        if measuring == "off" or store is None:
            why = "measuring is off" if measuring == "off" else "no cache to keep it in"
            return self._fallback(has_openvino, native, why)
        key = self._key(manifest)
        failed = None
        with self._lock:
            kept = _covering(store.load(key), allowed)
            if kept is None and measuring == "now":
                try:
                    kept = self._kept_or_measured(store, manifest, key, allowed)
                except MeasureError as exc:
                    log.warning("could not measure a plan (%s); using what is known", exc)
                    failed = f"measuring failed ({exc})"
        if kept is not None:
            measured, basis = kept[0], f"measured on {key.cpu} ({kept[1]})"
        else:  # nothing kept: what was measured on this CPU family, else the fallback
            prior = prior_for(key, self.priors_dir)
            if prior is None or not prior.measurements.covers(allowed):
                family = cpu_family(key.cpu_flags)
                why = failed or f"no plan measured on this machine yet, none shipped for {family}"
                return self._fallback(has_openvino, native, why)
            measured, basis = prior.measurements, prior.basis()
        choices = self.sessions.thread_choices
        choose = functools.partial(choose_plan, measured, request, threads=threads, basis=basis,
                                   allowed=allowed, thread_choices=choices)  # fmt: skip
        try:
            plan = choose()
        except ValueError as exc:  # nothing asked for could run here
            log.warning("no measured plan for %s (%s); using the fallback", manifest.name, exc)
            return self._fallback(has_openvino, native, f"nothing measured could run ({exc})")
        light = self._light_flow(plan, manifest)
        if light is not None:
            lighter = choose(light_flow_mb=light.saving_mb)
            if lighter.flow == ORT_BF16:
                plan = replace(lighter, flow_graph=light.graph)
        if plan.fits_budget:
            log.info("plan for %s: %s", manifest.name, plan.describe())
        else:  # the budget cannot be held: said whatever the log level
            log.warning("plan for %s: %s", manifest.name, plan.describe())
        return plan

    def measure(self, manifest: VoiceManifest, stop: threading.Event | None = None) -> bool:
        """Measure this machine's plan for a bundle of ``manifest`` now, where none is
        kept: the minutes a load no longer waits for (``yomiage bench``, a server's idle
        time). True where measurements were taken and kept; False where there is
        nothing to measure (kept already, a small decoder, int8, measuring off, no
        cache). ``stop``, once set, ends the measuring process in hand
        (:class:`~yomiage.runtime.plan.steps.MeasureInterrupted`: what was kept stays,
        the rest is measured at the next call). MeasureError where it cannot be taken."""
        request = self.request
        if request.decoder_precision == "int8" or request.measuring() == "off":
            return False
        small = graph_bytes(manifest.file("decoder.onnx")) < OPENVINO_MIN_DECODER_BYTES
        store = self.store
        if store is None or small:
            return False
        has_openvino = self.sessions.has_openvino
        native = has_openvino and self.sessions.native_bf16
        allowed = self._allowed(has_openvino, native, self._other_layouts(manifest))
        key = self._key(manifest)
        with self._lock:
            if _covering(store.load(key, quiet=True), allowed) is not None:
                return False
            self._kept_or_measured(store, manifest, key, allowed, stop)
        return True

    def _kept_or_measured(
        self,
        store: PlanStore,
        manifest: VoiceManifest,
        key: PlanKey,
        allowed: tuple[DecoderChoice, ...],
        stop: threading.Event | None = None,
    ) -> tuple[Measurements, str]:
        """The measurements kept for ``key`` if they cover ``allowed``; else those another
        process is taking (waited for), else measured now, resuming from the steps
        kept, each kept as it ends. MeasureError where they cannot be taken."""
        kept = _covering(store.load(key), allowed)
        if kept is not None:
            return kept
        problem = store.unwritable()
        if problem is not None:
            log.warning("cannot keep the plan in %s (%s): it will be measured again at "
                        "every start; %s=0 skips measuring", store.root, problem,
                        MEASURE_ENV)  # fmt: skip
        path = store.path(key)
        with measuring_turn(store.lock_path(key), store.note_path(key), (path,),
                            voice=manifest.name):  # fmt: skip
            # Measured meanwhile by the process this one waited for?
            kept = _covering(store.load(key, quiet=True), allowed)
            if kept is not None:
                return kept
            steps = MeasuredSteps(store.steps(key), where=str(path),
                                  keep=functools.partial(store.save_steps, key))  # fmt: skip
            job = measure_job(manifest, allowed, self.sessions, self.bert, self.layouts,
                              self.compiled_dir)  # fmt: skip
            where = f"kept in {store.root}; " if problem is None else ""
            log.warning("choosing how to run %s on this CPU: measuring %d engine(s), once "
                        "(%s%s=0 skips it)", manifest.name, len(job.lengths), where,
                        MEASURE_ENV)  # fmt: skip
            if stop is not None:  # a server's idle time: a request ends it
                measured = self._measure(job, steps, stop=stop)
            else:
                measured = self._measure(job, steps)
            counts = (key.threads, *key.thread_choices)
            nonsense = measurements_problem(measured, context=manifest.receptive_field_frames,
                                            thread_counts=counts)  # fmt: skip
            if nonsense:
                raise MeasureError(f"the measurements make no sense: {nonsense}")
            when = time.strftime("%Y-%m-%d")
            failed = store.save(key, measured, when, steps.records, steps.retry)
            if failed is not None and problem is None:
                log.warning("cannot keep the plan measurements in %s (%s); the next start "
                            "measures again", store.root, failed)  # fmt: skip
        return measured, when

    def _light_flow(self, plan: Plan, manifest: VoiceManifest) -> LightFlow | None:
        """The flow with bfloat16 weights, made now if need be, where it may bring a faster
        option than ``plan``'s under the budget (by at most half the flow's bytes, which
        the graph's size bounds without reading it), or where nothing fits (it lowers
        the lightest). None where it cannot, or where the request keeps the weights
        float32 (``fp32``)."""
        key = flow_key(manifest.files)
        if self.flows is None or key is None or self.request.decoder_precision == "fp32":
            return None
        budget = self.request.memory_budget_mb
        bound = graph_bytes(manifest.file("flow.onnx")) / 2 / 2**20
        might = [o for o in plan.options if o.flow == ORT_FP32]
        if plan.fits_budget:
            fastest = plan.options[0].total_s
            might = [
                o for o in might
                if round(o.peak_mb) > budget >= round(o.peak_mb - bound) and o.total_s < fastest
            ]  # fmt: skip
        if not might:
            return None
        try:
            return self.flows.flow(manifest.file("flow.onnx"), key)
        except LightFlowError as exc:
            log.warning("%s; the flow's weights stay float32", exc)
            return None

    def _other_layouts(self, manifest: VoiceManifest) -> tuple[int, ...]:
        """The layouts to try besides the bundle's own (none without a cache). The one
        the bundle has is timed as its own (no graph is made for it), so that choice
        has no timings of its own and is never taken."""
        if self.layouts is None or layout_key(manifest.files) is None:
            return ()
        return LAYOUT_CHOICES if self.request.decoder_precision in ("auto", "fp32") else ()

    def _allowed(
        self, has_openvino: bool, native: bool, layouts: tuple[int, ...] = ()
    ) -> tuple[DecoderChoice, ...]:
        every = candidates(openvino=has_openvino, native_bf16=native, layouts=layouts)
        if self.request.decoder_precision == "fp32":
            return tuple(c for c in every if c.precision == "fp32")
        if self.request.decoder_precision == "bf16":  # explicit: honoured where it is emulated
            every = candidates(openvino=has_openvino, native_bf16=True)
            return tuple(c for c in every if c.precision == "bf16")
        return every

    def _fallback(self, has_openvino: bool, native: bool, why: str) -> Plan:
        return fallback_plan(self.request, openvino=has_openvino, native_bf16=native,
                             threads=self.sessions.threads, why=why)  # fmt: skip

    def _key(self, manifest: VoiceManifest) -> PlanKey:
        cpu, flags = cpu_identity()
        graphs = {
            "encoder": manifest.file("encoder.onnx"),
            "flow": manifest.file("flow.onnx"),
            "decoder": manifest.file("decoder.onnx"),
            f"bert-{self.bert.precision}": self.bert.graph,
        }
        architecture = voice_architecture(
            graphs,
            context=manifest.receptive_field_frames,
            inter_channels=manifest.inter_channels,
            hop_length=manifest.hop_length,
        )
        engines = tuple((e.name, e.version() or "none") for e in ENGINES.values())
        sessions = self.sessions
        return PlanKey(cpu, flags, sessions.threads, sessions.thread_choices, architecture, engines)


def _covering(
    kept: tuple[Measurements, str] | None, allowed: tuple[DecoderChoice, ...]
) -> tuple[Measurements, str] | None:
    """``kept`` if it was measured for every choice of ``allowed`` (None: measured for
    other choices than these, so the steps they lack are measured now)."""
    return kept if kept is not None and kept[0].covers(allowed) else None
