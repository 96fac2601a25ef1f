"""Block-wise sampling with a likelihood estimator stays exact (issue: pseudo-marginal
across blocks).

a, b ~ N(0, 1) independent; one estimator whose log-noise has sd 1.5 where a > 0 and none
elsewhere (mean-corrected, so its exponential is unbiased): P(a > 0) = 0.5 exactly.  Two of
our steps, one per variable, must share the stored estimate of the full point; re-estimating
it when the other block moved (Monte Carlo within Metropolis) gave P(a > 0) ~ 0.35.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from checks import SAMPLERS

from pymc_kameleon import pseudo_marginal_potential

NOISE_SD = 1.5


def _noisy(a, rng):
    if a > 0:
        return NOISE_SD * rng.normal() - 0.5 * NOISE_SD**2
    return 0.0


@pytest.fixture(scope="module")
def model():
    with pm.Model() as m:
        a = pm.Normal("a", 0.0, 1.0)
        pm.Normal("b", 0.0, 1.0)
        pseudo_marginal_potential("noise", _noisy, a)
    return m


def _fraction_positive(model, make, seed):
    with model:
        steps = [make([model["a"]]), make([model["b"]])]
        idata = pm.sample(draws=3000, tune=1000, chains=2, cores=1, step=steps,
                          random_seed=seed, progressbar=False, compute_convergence_checks=False)
    a = idata.posterior["a"].values
    return float((a > 0).mean()), a


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_two_blocks_share_the_stored_estimate(model, name):
    """Three seeds; each fraction within 5 Monte Carlo standard errors of 0.5 (the
    standard error from the ESS of the indicator).  The base before this change, which
    re-evaluated the log density whenever the other block moved, gave 0.34-0.35 for
    RandomWalkStep on three seeds (the issue's reproduction), outside the tolerance."""
    import arviz as az

    for seed in (1, 2, 3):
        frac, a = _fraction_positive(model, SAMPLERS[name], seed)
        ess = float(az.ess((a > 0).astype(float)))
        se = 0.5 / np.sqrt(max(ess, 1.0))
        assert abs(frac - 0.5) < max(5 * se, 0.04), (seed, frac, ess)


def test_block_steps_evaluate_once_per_iteration(model):
    """The second block finds the first block's value: no evaluation to refresh it."""
    with model:
        steps = [SAMPLERS["RandomWalkStep"]([model["a"]]),
                 SAMPLERS["RandomWalkStep"]([model["b"]])]
        idata = pm.sample(draws=50, tune=50, chains=1, step=steps, random_seed=1,
                          progressbar=False, compute_convergence_checks=False)
    n_evals = idata.sample_stats["n_evals"].values  # (chain, draw, step)
    # n_steps iterations per draw (d = 1: the default's floor, 5), no refresh evaluations
    assert steps[0].n_steps == steps[1].n_steps == 5
    assert np.all(n_evals == 5)
