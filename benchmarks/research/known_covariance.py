"""A random walk given the posterior's covariance: how far any Gaussian proposal gets.

Usage::

    python -m benchmarks.research.known_covariance [--models radon-nc] [--seeds 1,2,3]
        [--steps rw,kamh,fkamh,khmc]

On each suite model, with ``pm.sample``'s defaults (tune 1000, draws 1000, 4 chains,
:func:`benchmarks.suite.variants.compare_variants`):

* ``RandomWalkStep(cov=C, adapt_scale=False)``, with ``C`` the covariance of the suite
  reference's 500 draws in PyMC's unconstrained coordinates and the scale ``2.38 / sqrt(d)``
  of a Gaussian target, nothing adapted: the random walk the warm-up tries to learn, given
  exactly, with the default ``d`` iterations per draw;
* the same with ``2 d`` iterations per draw (twice the work per draw);
* every step in ``--steps`` with its defaults.

Before the runs, per seed: the extreme eigenvalues of the reference covariance whitened by
the preconditioner ``L`` that the warm-up of ``RandomWalkStep`` learns in one chain of
1000 tuning draws (``L^-1 C L^-T``; both 1 for a perfect ``L``, and spread by the noise of
500 reference draws alone to about ``(1 +- sqrt(d / 500))^2``).

Where even the first misses the suite's criteria (R-hat <= 1.01, bulk ESS >= 400 of 4000
draws), the budget of ``pm.sample``'s defaults is too small for a random walk on that
posterior whatever its preconditioning, and a kernel proposal has to do better than a
Gaussian one to meet them.  The models whose free variables have transforms other than
``log`` are not supported (a ``ValueError`` says which).

The results are on ``docs/benchmarks/suite.md``.
"""

from __future__ import annotations

import argparse

import numpy as np
import pymc as pm

from pymc_kameleon import RandomWalkStep

from ..common import STEP_CLASSES as STEPS
from ..common import model_dim

__all__ = ["learned_spread", "main", "reference_covariance"]


def reference_covariance(model: pm.Model, name: str) -> np.ndarray:
    """Covariance of the reference draws of suite model ``name`` in the order and the
    (unconstrained) coordinates of ``model``'s value variables, as a step samples them."""
    from ..suite.models import free_var_labels
    from ..suite.reference import load_reference

    ref = load_reference(name)
    if ref.sample is None:
        raise ValueError(f"{name}: the reference has no draws (a closed form)")
    names, labels = free_var_labels(model)
    if list(ref.labels) != labels:
        raise ValueError(f"{name}: the reference's labels do not match the model's")
    draws = np.asarray(ref.sample, dtype=float)
    columns = []
    for rv_name in names:
        rv = model[rv_name]
        idx = [i for i, label in enumerate(labels)
               if label == rv_name or label.startswith(rv_name + "[")]
        block = draws[:, idx]
        transform = model.rvs_to_transforms.get(rv)
        kind = type(transform).__name__ if transform is not None else None
        if kind == "LogTransform":
            block = np.log(block)
        elif kind is not None:
            raise ValueError(f"{name}: {rv_name} has a {kind}, not supported here")
        columns.append(block)
    return np.cov(np.concatenate(columns, axis=1), rowvar=False)


def learned_spread(name: str, seed: int, tune: int = 1000) -> tuple[float, float]:
    """Smallest and largest eigenvalue of ``L^-1 C L^-T``: ``C`` the reference covariance
    of suite model ``name``, ``L`` the preconditioner of ``RandomWalkStep``'s warm-up after
    one chain of ``tune`` tuning draws with ``random_seed=seed``."""
    from scipy.linalg import solve_triangular

    from ..suite.models import MODELS

    model = MODELS[name].factory()
    cov = reference_covariance(model, name)
    with model:
        step = RandomWalkStep()
        pm.sample(step=step, tune=tune, draws=1, chains=1, cores=1, random_seed=seed,
                  progressbar=False, compute_convergence_checks=False)
    chol = step.preconditioner.chol
    white = solve_triangular(chol, solve_triangular(chol, cov, lower=True).T, lower=True)
    eig = np.linalg.eigvalsh(0.5 * (white + white.T))
    return float(eig[0]), float(eig[-1])


def _known(name: str, factor: int):
    """A factory of the frozen random walk with the reference covariance of ``name``."""

    def build():
        model = pm.modelcontext(None)
        return RandomWalkStep(cov=reference_covariance(model, name), adapt_scale=False,
                              n_steps=factor * model_dim(model))

    return build


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="radon-nc")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", default="rw,kamh,fkamh,khmc")
    args = parser.parse_args(argv)
    from ..suite.variants import compare_variants

    seeds = [int(s) for s in args.seeds.split(",")]
    for name in args.models.split(","):
        print(f"\n**{name}**\n")
        print("| seed | reference covariance whitened by the learned preconditioner: "
              "smallest eigenvalue | largest |")
        print("|---|---|---|")
        for seed in seeds:
            low, high = learned_spread(name, seed)
            print(f"| {seed} | {low:.2f} | {high:.2f} |", flush=True)
        print()
        variants = {"reference covariance, d per draw": _known(name, 1),
                    "reference covariance, 2d per draw": _known(name, 2)}
        variants.update({STEPS[k].__name__: STEPS[k] for k in args.steps.split(",")})
        compare_variants([name], seeds, variants)


if __name__ == "__main__":
    main()
