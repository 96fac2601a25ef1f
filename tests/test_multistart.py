"""The Laplace start searches from dispersed starts (issue 42): a chain whose initial point
lies in the basin of a local mode without mass starts at the global mode instead, and a
chain the user started keeps its start."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from checks import sample, wrap_py

from pymc_kameleon import LogDensityError, RandomWalkStep

#: modes of the potential: a local one at -1 (e^-8 of the mass) and the global one at 6
LOCAL, GLOBAL = -1.0, 6.0
CHAINS = 8


@pytest.fixture(scope="module")
def two_basins():
    """``x ~ N(0, 5)`` times two narrow bumps; PyMC's initial point 0 lies in the basin of
    the local mode.  A prior draw lies in the global mode's basin (``x > 2.5``) with
    probability 0.31, so 4 prior draws miss it with probability 0.23."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 5.0)
        pm.Potential("bumps", pt.logaddexp(-0.5 * ((x - LOCAL) / 0.3) ** 2 - 8.0,
                                           -0.5 * ((x - GLOBAL) / 0.3) ** 2))
    return model


def _first_draws(model, **step_kwargs) -> tuple[np.ndarray, np.ndarray]:
    idata = sample(model, lambda: RandomWalkStep(**step_kwargs), draws=2, tune=10,
                   chains=CHAINS, seed=3, discard_tuned_samples=False)
    first = np.asarray(idata.warmup_posterior["x"].values)[:, 0]
    start = np.asarray(idata.warmup_sample_stats["laplace_start"].values)[:, 0]
    return first, start


def test_dispersed_starts_find_the_global_mode(two_basins):
    """Each chain misses the global mode with probability 0.23 (its 4 prior draws all in
    the local basin); at least half of 8 chains must find it: a false failure has
    probability P(Binomial(8, 0.77) < 4) = 0.003.  From the initial point alone
    (``laplace_starts=0``, the behaviour before) no chain does."""
    first, start = _first_draws(two_basins)
    found = np.abs(first - GLOBAL) < 1.5
    assert found.sum() >= CHAINS // 2, first
    assert np.all(start[found] > 0)  # the mode came from a prior draw
    first, start = _first_draws(two_basins, laplace_starts=0)
    assert np.all(np.abs(first - LOCAL) < 1.5) and np.all(start == 0), first


def test_user_initvals_keep_their_start(two_basins):
    """A chain given its own start begins there, in its basin: no dispersed search."""
    with two_basins:
        idata = pm.sample(tune=3, draws=1, chains=2, cores=1, step=RandomWalkStep(),
                          initvals=[{"x": -1.2}, {"x": 5.5}], random_seed=1,
                          discard_tuned_samples=False, progressbar=False,
                          compute_convergence_checks=False)
    first = np.asarray(idata.warmup_posterior["x"].values)[:, 0]
    assert abs(first[0] - LOCAL) < 1.0 and abs(first[1] - GLOBAL) < 1.0, first
    assert np.all(np.asarray(idata.warmup_sample_stats["laplace_start"].values) == -1)


def test_laplace_starts_is_validated(two_basins):
    with two_basins:
        for bad in (-1, 1.5, True):
            with pytest.raises((TypeError, ValueError), match="laplace_starts"):
                RandomWalkStep(laplace_starts=bad)


def test_a_log_density_raising_far_out_does_not_stop_the_start_search():
    """A black-box log density that raises outside |x| < 20 (an ODE solver failing at
    extreme rates) under a wide prior: most of the Laplace start's prior-draw starts lie
    where it raises.  The search treats those points as -inf and the chains run with no
    failure reported; the chain's own proposals still follow ``on_error`` (a chain
    started outside the region raises)."""

    @wrap_py(itypes=[pt.dscalar], otypes=[pt.dscalar])
    def fragile(x):
        if abs(x) > 20.0:
            raise RuntimeError("solver failed")
        return np.asarray(-0.5 * x**2)

    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1000.0)
        pm.Potential("lik", fragile(x))
    idata = sample(model, RandomWalkStep, draws=200, tune=300, chains=2, seed=2)
    stats = idata.sample_stats
    assert int(stats.n_errors.sum()) == 0 and int(stats.n_nan.sum()) == 0
    assert 0.7 < float(idata.posterior.x.std()) < 1.3
    with pytest.raises(LogDensityError, match="raised at draw 0"):
        sample(model, RandomWalkStep, draws=5, tune=5, chains=1, seed=2,
               initvals={"x": 25.0})
