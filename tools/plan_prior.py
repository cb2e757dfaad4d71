"""Ship a plan measured on this machine as the prior for its CPU family.

    python tools/plan_prior.py CACHE/plans/<digest>.json [--family NAME]

Reads a plan file the cache kept (``yomiage bench`` measures one), checks its
measurements as a load would, and writes them with the key they were measured under
to ``src/yomiage/runtime/plan/priors/<family>-<digest>.json``
(:mod:`yomiage.runtime.plan.priors`). A load on a CPU with the same instruction sets
and a voice of the same architecture then takes them at once, until that machine's
own are measured. Say in benchmarks/RESULTS.md which machine the prior came from.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from yomiage.atomic import write_atomic
from yomiage.json_file import read_json_object
from yomiage.runtime.plan.checks import measurements_problem
from yomiage.runtime.plan.measurements import measurements_from_json, measurements_json
from yomiage.runtime.plan.priors import PRIORS_DIR, cpu_family, prior_json
from yomiage.runtime.plan.store import FORMAT_VERSION, PlanKey


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan_file", type=Path, help="a plan file of a cache's plans/ folder")
    parser.add_argument("--family", help="the CPU family's name (default: from its flags)")
    parser.add_argument("--out", type=Path, default=PRIORS_DIR, help="where priors are kept")
    args = parser.parse_args(argv)
    try:
        data = read_json_object(args.plan_file)
        raw = data["key"]
        key = PlanKey.from_json(raw)
        measured = measurements_from_json(data["measurements"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"plan_prior: {args.plan_file} is not a plan file with measurements: {exc}",
              file=sys.stderr)  # fmt: skip
        return 1
    if key.format != FORMAT_VERSION:
        print(f"plan_prior: measured in format {key.format}, not {FORMAT_VERSION}: measure "
              "again with this version", file=sys.stderr)  # fmt: skip
        return 1
    if data.get("retry"):
        print("plan_prior: some steps failed and are to be measured again", file=sys.stderr)
        return 1
    problem = measurements_problem(
        measured,
        context=dict(key.architecture).get("context"),
        thread_counts=(key.threads, *key.thread_choices),
    )
    if problem:
        print(f"plan_prior: the measurements make no sense: {problem}", file=sys.stderr)
        return 1
    family = args.family or cpu_family(key.cpu_flags)
    slug = re.sub(r"[^a-z0-9]+", "-", family.lower()).strip("-")
    out = args.out / f"{slug}-{key.digest()[:12]}.json"
    prior = prior_json(family, key, str(data.get("measured_at", "")), measurements_json(measured))
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(prior, indent=1, ensure_ascii=False) + "\n")
    print(f"{out}: the prior for {family} (measured on {key.cpu}, {key.threads} threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
