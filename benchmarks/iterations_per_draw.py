"""Iterations per draw: the default ``n_steps = max(5, d)`` against ``max(2, d)``.

Usage::

    python -m benchmarks.iterations_per_draw [--steps kamh,fkamh,rw]
        [--models truncated,censored,robust,mixture,dirichlet] [--seeds 1,2,3]
    python -m benchmarks.iterations_per_draw --part cost [--model truncated] [--step kamh]

* ``suite`` (default): every step in ``--steps`` with ``pm.sample``'s defaults on suite
  models (:func:`benchmarks.suite.variants.compare_variants`), once with its default
  iterations per draw and once with ``n_steps = max(2, d)``, the default before
  2026-11-26; on the suite's 2-4-d models (the only ones where the two differ) the floor
  decides how much a draw of ``pm.sample``'s budget holds;
* ``cost``: seconds per chain (1000 tuning draws and 1000 draws, the best of 3, tuning
  included) of one step on one model at ``n_steps`` = 1, 2, 5, 10, 20, and the least-squares
  split of that time into a cost per draw and a cost per iteration.

The results are on ``docs/benchmarks/suite.md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pymc as pm

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep

__all__ = ["main"]

STEPS = {"kamh": KameleonStep, "fkamh": FastKameleonStep, "rw": RandomWalkStep,
         "khmc": KernelHMCStep}


def _old_default(cls):
    """``cls`` with the iterations per draw of the default before 2026-11-26."""
    def make():
        point = pm.modelcontext(None).initial_point()
        return cls(n_steps=max(2, sum(np.size(v) for v in point.values())))
    return make


def _cost(model_name: str, step: str, counts=(1, 2, 5, 10, 20), repeats: int = 3,
          tune: int = 1000, draws: int = 1000) -> tuple[float, float]:
    """Print the seconds per chain at each count; return the cost per draw and per
    iteration (seconds) fitted to them."""
    from .common import quiet_pymc
    from .suite.models import MODELS

    quiet_pymc()
    model, cls = MODELS[model_name].factory(), STEPS[step]
    kwargs = dict(tune=tune, draws=draws, chains=1, cores=1, progressbar=False,
                  compute_convergence_checks=False)
    with model:  # compile and warm up once, untimed
        pm.sample(**{**kwargs, "tune": 50, "draws": 50}, step=cls(), random_seed=0)
    print(f"| {model_name}, {cls.__name__}: n_steps | seconds per chain (best of {repeats}) |")
    print("|---|---|")
    seconds = []
    for n in counts:
        best = np.inf
        for seed in range(repeats):
            with model:
                step_obj = cls(n_steps=n)
                start = time.perf_counter()
                pm.sample(**kwargs, step=step_obj, random_seed=seed)
                best = min(best, time.perf_counter() - start)
        seconds.append(best)
        print(f"| {n} | {best:.3f} |", flush=True)
    total = tune + draws
    per_draw, per_iteration = np.linalg.lstsq(
        np.column_stack([np.full(len(counts), total), total * np.asarray(counts, float)]),
        np.asarray(seconds), rcond=None)[0]
    print(f"\nper draw besides its iterations: {per_draw * 1e6:.0f} µs; "
          f"per iteration: {per_iteration * 1e6:.1f} µs")
    return float(per_draw), float(per_iteration)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("suite", "cost"), default="suite")
    parser.add_argument("--steps", default="kamh,fkamh,rw")
    parser.add_argument("--models", default="truncated,censored,robust,mixture,dirichlet")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--model", default="truncated", help="the cost part's model")
    parser.add_argument("--step", default="kamh", choices=sorted(STEPS),
                        help="the cost part's step")
    args = parser.parse_args(argv)
    if args.part == "cost":
        _cost(args.model, args.step)
        return
    from .suite.variants import compare_variants

    for key in args.steps.split(","):
        cls = STEPS[key]
        print(f"\n**{cls.__name__}**\n")
        compare_variants(args.models.split(","), [int(s) for s in args.seeds.split(",")],
                         {"max(5, d) (default)": cls, "max(2, d)": _old_default(cls)})


if __name__ == "__main__":
    main()
