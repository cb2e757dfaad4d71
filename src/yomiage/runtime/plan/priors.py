"""Plans measured before, shipped with yomiage: what a voice runs by at once on a CPU
family that was measured, until this machine's own measurements are kept.

Measuring a full-size voice takes minutes of a fresh machine's time, and a first
sentence, a new container or a new Ray replica must not wait for it. The engines'
speed and memory follow the instruction sets that pick their kernels far more than the
model name, so the measurements of one machine of a family (its flags among
:data:`~yomiage.runtime.plan.store.PLAN_FLAGS`) stand for the others until theirs are
taken. A prior is a plan file's measurements with the key they were taken under
(``priors/<family>-<digest>.json``, made by ``tools/plan_prior.py`` from a cache's
plan file); it is taken for a voice of the same architecture (graph sizes and BERT
precision, :func:`~yomiage.runtime.plan.store.voice_architecture`) on a CPU with the
same flags, whatever its thread count and engine versions (the plan says which it
was measured with). It is checked as a kept file is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from yomiage.json_file import read_json_object
from yomiage.runtime.plan.checks import measurements_problem
from yomiage.runtime.plan.measurements import Measurements, measurements_from_json
from yomiage.runtime.plan.store import FORMAT_VERSION, PlanKey

log = logging.getLogger(__name__)

PRIORS_DIR = Path(__file__).with_name("priors")
# Bumped when a prior's fields change; other formats are not read.
PRIOR_FORMAT = 1


@dataclass(frozen=True)
class Prior:
    """Measurements shipped for one CPU family and voice architecture: ``family`` names
    the family for people (logs, ``yomiage bench``), ``key`` is what they were taken
    under (the CPU model, its flags, threads, engine versions)."""

    family: str
    key: PlanKey
    measured_at: str
    measurements: Measurements

    def basis(self) -> str:
        """Where a plan chosen from it came from, for the plan's ``basis``."""
        engines = ", ".join(f"{name} {version}" for name, version in self.key.engines)
        return (
            f"shipped for {self.family}: measured on {self.key.cpu} at {self.key.threads} "
            f"threads ({self.measured_at}; {engines}); this machine not measured yet"
        )


def prior_for(key: PlanKey, priors_dir: Path = PRIORS_DIR) -> Prior | None:
    """The prior for a voice and CPU of ``key``: same CPU flags and voice architecture
    (None: none shipped). Its thread timings are kept only at the counts ``key`` may
    choose among. A prior that cannot be read or makes no sense is passed over."""
    for path in sorted(priors_dir.glob("*.json")):
        prior = _read(path)
        if prior is None:
            continue
        if (prior.key.cpu_flags, prior.key.architecture, prior.key.format) != (
            key.cpu_flags,
            key.architecture,
            FORMAT_VERSION,
        ):  # another family, another voice size, or measured the way it no longer is
            continue
        counts = {key.threads, *key.thread_choices}
        engines = tuple(
            replace(e, threads_ms={t: ms for t, ms in e.threads_ms.items() if t in counts})
            for e in prior.measurements.engines
        )
        measured = replace(prior.measurements, engines=engines)
        problem = measurements_problem(
            measured, context=dict(key.architecture).get("context"), thread_counts=counts
        )
        if problem:
            log.warning("the shipped plan %s is passed over: %s", path.name, problem)
            continue
        return replace(prior, measurements=measured)
    return None


def cpu_family(flags: Iterable[str]) -> str:
    """The family a CPU of these instruction sets belongs to, named for people by what
    sets the engines' fastest kernels apart."""
    have = set(flags)
    if "amx_bf16" in have:
        return "x86-64 with AMX"
    if "avx512_bf16" in have:
        return "x86-64 with AVX-512 BF16"
    if "avx512f" in have:
        return "x86-64 with AVX-512"
    if "avx2" in have:
        return "x86-64 with AVX2"
    if "asimd" in have:
        return "ARM64 with BF16" if "bf16" in have else "ARM64"
    return "an unknown CPU family"


def prior_json(family: str, key: PlanKey, measured_at: str, data: dict[str, Any]) -> dict[str, Any]:
    """A prior's file for measurements ``data`` (as a plan file holds them) taken under
    ``key`` on ``measured_at``, standing for ``family``."""
    return {
        "prior": PRIOR_FORMAT,
        "family": family,
        "key": asdict(key),
        "measured_at": measured_at,
        "measurements": data,
    }


def _read(path: Path) -> Prior | None:
    try:
        data = read_json_object(path)
        if data.get("prior") != PRIOR_FORMAT:
            return None
        raw = data["key"]
        key = PlanKey.from_json(raw)
        return Prior(str(data["family"]), key, str(data.get("measured_at", "")),
                     measurements_from_json(data["measurements"]))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("the shipped plan %s cannot be read (%s); passed over", path.name, exc)
        return None
