"""Local scale for curved tails and funnels: RandomWalkStep with delayed rejection or a scale
mixture, KameleonStep with a tail-weighted history, against their defaults (issue 42,
point 5).

Usage::

    python -m benchmarks.research.local_scale --model gp-poisson --seed 1 --variant dr0.2
        [--timeout 600] [--on-error reject] [--json /tmp/out.json]

One run per call (``pm.sample``'s defaults, 4 chains one after the other, ``cores=1``,
through :func:`benchmarks.suite.runner.run_one`), so that each run can be time-boxed; the
variants are ``default`` (``RandomWalkStep()``), ``drF`` (``delayed_rejection=F``),
``mixP,F`` (``scale_mixture=(P, F)``), ``kamh`` (``KameleonStep()``) and ``kamh-tailB``
(``KameleonStep(tail_weight=B)``).  Printed: the suite's criteria, max R-hat, min bulk
ESS, the worst mean error and sd ratio, the 1 % / 99 % and 0.1 % / 99.9 % quantiles of the
model's hard parameter (``log_Km`` for pk, ``log_amp`` for gp-poisson) against the
reference's (1 % / 99 % from its thinned draws, 0.1 % / 99.9 % from its meta), min bulk ESS
per 1000 log-density evaluations (the suite's counter: both stages of delayed rejection are
counted) and wall time.  The results are on ``docs/benchmarks/suite.md``, "Local scale:
delayed rejection and scale mixtures" and "Local scale: a tail-weighted KAMH history".
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from pymc_kameleon import KameleonStep, RandomWalkStep

from ..common import SamplerSpec, quiet_pymc
from ..suite.models import MODELS
from ..suite.reference import load_reference
from ..suite.report import failed_letters
from ..suite.runner import SAMPLERS, run_one

__all__ = ["HARD_PARAMETER", "main", "make_variant"]

#: The scalar whose tail makes each model hard.
HARD_PARAMETER = {"pk": "log_Km", "gp-poisson": "log_amp", "funnel": "v",
                  "timeseries": "sigma", "eight-schools-c": "tau"}


def make_variant(name: str, **kwargs):
    """A step factory from a variant name: ``default``, ``drF``, ``mixP,F``, ``kamh`` or
    ``kamh-tailB`` (``kwargs`` go to every variant, e.g. ``on_error``)."""
    if name == "default":
        return lambda: RandomWalkStep(**kwargs)
    if name == "kamh":
        return lambda: KameleonStep(**kwargs)
    if name.startswith("kamh-tail"):
        beta = float(name[len("kamh-tail"):])
        return lambda: KameleonStep(tail_weight=beta, **kwargs)
    if name.startswith("dr"):
        factor = float(name[2:])
        return lambda: RandomWalkStep(delayed_rejection=factor, **kwargs)
    if name.startswith("mix"):
        prob, factor = (float(v) for v in name[3:].split(","))
        return lambda: RandomWalkStep(scale_mixture=(prob, factor), **kwargs)
    raise ValueError(f"unknown variant {name!r}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gp-poisson")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variant", default="default")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--on-error", default="raise", choices=("raise", "reject"),
                        help="what a log density that raises does (the step's on_error)")
    parser.add_argument("--json", default=None, help="append the result as a JSON line")
    args = parser.parse_args(argv)
    quiet_pymc()
    key = f"local-scale: {args.variant}"
    factory = make_variant(args.variant, on_error=args.on_error)
    SAMPLERS[key] = SamplerSpec(key, args.variant, factory, ours=True)
    spec, ref = MODELS[args.model], load_reference(args.model)
    run = run_one(spec, key, ref, 1000, 1000, 4, args.seed, timeout=args.timeout)
    if run.error:
        print(f"{args.model} {args.seed} {args.variant}: error {run.error}")
        return run.to_dict()
    acc = run.accuracy
    hard = ref.labels.index(HARD_PARAMETER.get(args.model, ref.labels[0]))
    q = np.asarray(run.quantiles)[:, hard]
    tq = np.asarray(run.tail_quantiles)[:, hard]
    ref_q = (np.quantile(ref.sample[..., hard].ravel(), (0.01, 0.99))
             if ref.sample is not None else (np.nan, np.nan))
    ref_tq = np.asarray(ref.meta.get("tail_quantiles", [[np.nan], [np.nan]]))[:, hard]
    out = run.to_dict()
    out.update(variant=args.variant, on_error=args.on_error, hard=ref.labels[hard],
               ref_quantiles=list(ref_q), ref_tail_quantiles=list(ref_tq))
    print(f"| {args.model} | {args.seed} | {args.variant} | {failed_letters(run)} | "
          f"{acc['max_rhat']:.3f} | {acc['min_ess_bulk']:.0f} | "
          f"{acc['mean_err']:.2f} ({acc['worst_mean']}) | {acc['sd_ratio']:.2f} "
          f"({acc['worst_sd']}) | {q[0]:.2f} / {q[1]:.2f} (ref {ref_q[0]:.2f} / {ref_q[1]:.2f})"
          f" | {tq[0]:.2f} / {tq[1]:.2f} (ref {ref_tq[0]:.2f} / {ref_tq[1]:.2f}) | "
          f"{run.ess_per_1k_evals:.2f} | {run.evals / 1e3:.0f}k / {run.wall:.0f} s |",
          flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(out, default=float) + "\n")
    return out


if __name__ == "__main__":
    main()
