"""Iterations per draw: the default ``n_steps = max(5, d)`` against ``max(2, d)``.

Usage::

    python -m benchmarks.research.iterations_per_draw [--steps kamh,fkamh,rw]
        [--models truncated,censored,robust,mixture,dirichlet] [--seeds 1,2,3]
    python -m benchmarks.research.iterations_per_draw --part cost [--model truncated] [--step kamh]
    python -m benchmarks.research.iterations_per_draw --part tradeoff [--models eight-schools-nc]
        [--steps kamh,fkamh] [--counts 4,6,8] [--seeds 1,2,3]

* ``suite`` (default): every step in ``--steps`` with ``pm.sample``'s defaults on suite
  models (:func:`benchmarks.suite.variants.compare_variants`), once with its default
  iterations per draw and once with ``n_steps = max(2, d)``, the default before
  2026-11-26; on the suite's 2-4-d models (the only ones where the two differ) the floor
  decides how much a draw of ``pm.sample``'s budget holds;
* ``cost``: seconds per chain (1000 tuning draws and 1000 draws, tuning included, PyMC's
  ``sampling_time``, the median of 3: :func:`benchmarks.cost_per_step.time_sample`) of one
  step on one model at ``n_steps`` = 1, 2, 5, 10, 20, and the least-squares split of that
  time into a cost per draw and a cost per iteration;
* ``tradeoff``: every step in ``--steps`` with its default and with ``n_steps`` at each of
  ``--counts``, next to ``pm.Metropolis`` and ``pm.Slice``, with the wall time of each run
  (:func:`~benchmarks.suite.variants.compare_variants`): fewer iterations per draw cost less
  time and hold less ESS, and this shows at which count a step's wall time comes down to
  pm.Metropolis's and what ESS is left there.

The results are on ``docs/benchmarks/suite.md``.
"""

from __future__ import annotations

import argparse

import numpy as np

from ..common import STEP_CLASSES as STEPS
from ..common import model_dim, quiet_pymc

__all__ = ["main"]


def _old_default(cls):
    """``cls`` with the iterations per draw of the default before 2026-11-26."""
    return lambda: cls(n_steps=max(2, model_dim()))


def _cost(model_name: str, step: str, counts=(1, 2, 5, 10, 20), repeats: int = 3,
          tune: int = 1000, draws: int = 1000) -> tuple[float, float]:
    """Print the seconds per chain at each count; return the cost per draw and per
    iteration (seconds) fitted to them."""
    from ..cost_per_step import time_sample
    from ..suite.models import MODELS

    quiet_pymc()
    model, cls = MODELS[model_name].factory(), STEPS[step]
    dim = model_dim(model)
    print(f"| {model_name}, {cls.__name__}: n_steps | seconds per chain (median of {repeats}) |")
    print("|---|---|")
    seconds = []
    for n in counts:
        res = time_sample(lambda n=n: cls(n_steps=n), dim, tune, draws, ours=True,
                          repeats=repeats, model=model)
        seconds.append(res["seconds"])
        print(f"| {n} | {res['seconds']:.3f} |", flush=True)
    total = tune + draws
    per_draw, per_iteration = np.linalg.lstsq(
        np.column_stack([np.full(len(counts), total), total * np.asarray(counts, float)]),
        np.asarray(seconds), rcond=None)[0]
    print(f"\nper draw besides its iterations: {per_draw * 1e6:.0f} µs; "
          f"per iteration: {per_iteration * 1e6:.1f} µs")
    return float(per_draw), float(per_iteration)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("suite", "cost", "tradeoff"), default="suite")
    parser.add_argument("--steps", default="kamh,fkamh,rw")
    parser.add_argument("--models", default="truncated,censored,robust,mixture,dirichlet")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--counts", default="4,6,8",
                        help="the tradeoff part's iterations per draw")
    parser.add_argument("--model", default="truncated", help="the cost part's model")
    parser.add_argument("--step", default="kamh", choices=sorted(STEPS),
                        help="the cost part's step")
    args = parser.parse_args(argv)
    if args.part == "cost":
        _cost(args.model, args.step)
        return
    from ..suite.variants import compare_variants

    models, seeds = args.models.split(","), [int(s) for s in args.seeds.split(",")]
    if args.part == "tradeoff":
        variants = {"pm.Metropolis": "metropolis", "pm.Slice": "slice"}
        for key in args.steps.split(","):
            cls = STEPS[key]
            variants[f"{cls.__name__} (default)"] = cls
            for n in (int(c) for c in args.counts.split(",")):
                variants[f"{cls.__name__}, n_steps={n}"] = lambda cls=cls, n=n: cls(n_steps=n)
        compare_variants(models, seeds, variants)
        return
    for key in args.steps.split(","):
        cls = STEPS[key]
        print(f"\n**{cls.__name__}**\n")
        compare_variants(models, seeds,
                         {"max(5, d) (default)": cls, "max(2, d)": _old_default(cls)})


if __name__ == "__main__":
    main()
