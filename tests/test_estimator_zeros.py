"""Likelihood estimates of zero (log = -inf): a valid value of the chain's state."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from pymc_kameleon import PseudoMarginalWarning, RandomWalkStep, pseudo_marginal_potential


class ZeroFirst:
    """An estimator whose first ``n_zero`` estimates are zero, then log-normal noise."""

    def __init__(self, n_zero: int, p_zero: float = 0.0):
        self.calls, self.n_zero, self.p_zero = 0, n_zero, p_zero

    def __call__(self, mu, rng):
        self.calls += 1
        if self.calls <= self.n_zero or rng.uniform() < self.p_zero:
            return -np.inf
        return -0.5 * (1.0 - mu) ** 2 + 0.5 * rng.normal() - 0.125


@pytest.mark.parametrize("n_zero", [1, 2, 5])
def test_zero_estimate_at_the_start_is_redrawn(n_zero):
    """An estimate of zero at the start is not a bad start: the step redraws it (a valid
    initialisation) instead of raising, also when the first two are zero (two equal values
    looked like a deterministic -inf: SamplingError)."""
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        pseudo_marginal_potential("lik", ZeroFirst(n_zero=n_zero), mu)
        idata = pm.sample(draws=300, tune=300, chains=1, cores=1, step=RandomWalkStep(),
                          random_seed=1, progressbar=False, compute_convergence_checks=False)
    assert np.isfinite(idata.sample_stats["lp"].values).all()


def test_a_deterministic_non_finite_start_still_raises_after_the_redraws():
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        pseudo_marginal_potential("lik", ZeroFirst(n_zero=100), mu)
        with pytest.raises(pm.exceptions.SamplingError):
            pm.sample(draws=10, tune=10, chains=1, cores=1, step=RandomWalkStep(),
                      random_seed=1, progressbar=False, compute_convergence_checks=False)


def test_zero_estimates_during_a_run_never_raise():
    """With another step moving a second variable, the stored value is refreshed; an
    estimate of zero there is the state's value (the next finite proposal is accepted)."""
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        k = pm.Poisson("k", 2.0)
        pseudo_marginal_potential("lik", ZeroFirst(n_zero=0, p_zero=0.2), mu)
        steps = [RandomWalkStep([mu]), pm.Metropolis([k])]
        with pytest.warns(PseudoMarginalWarning, match="not target the exact posterior"):
            idata = pm.sample(draws=300, tune=300, chains=1, cores=1, step=steps,
                              random_seed=2, progressbar=False,
                              compute_convergence_checks=False)
    assert idata.posterior["mu"].size == 300
