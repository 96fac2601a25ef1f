"""State bugs of reused steps, mixed precision blocks and overflowing proposals."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from pymc_kameleon import FastKameleonStep, KameleonStep, RandomWalkStep


@pytest.fixture(scope="module")
def mixed_model():
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=2)
        pm.Poisson("k", 3.0)
    return model


def test_reused_step_in_a_compound_tunes_again(mixed_model):
    """A step object reused in a second pm.sample inside a CompoundStep tunes again (PyMC
    sets ``tune`` only on the CompoundStep; ``reset_tuning`` must set it on ours)."""
    with mixed_model:
        step = KameleonStep([mixed_model["x"]], warmup_draws=50)
        kwargs = dict(draws=50, tune=300, chains=1, random_seed=1, progressbar=False,
                      compute_convergence_checks=False, discard_tuned_samples=False)
        pm.sample(step=[step, pm.Metropolis([mixed_model["k"]])], **kwargs)
        idata = pm.sample(step=[step, pm.Metropolis([mixed_model["k"]])], **kwargs)
    warm = idata.warmup_sample_stats
    n_history = warm["n_history"].values.reshape(warm.sizes["draw"], -1).max(axis=1)
    assert n_history[-1] > 0
    scaling = warm["scaling"].values
    assert np.isfinite(scaling[..., -1]).any()


def test_mixed_float32_float64_block_does_not_re_evaluate():
    """PyMC rounds a float32 variable when it stores the point; the step evaluates at the
    rounded point, so the stored value still matches and no refresh is needed."""
    with pm.Model():
        pm.Normal("a", 0.0, 1.0, dtype="float32")
        pm.Normal("b", 0.0, 1.0, shape=2)
        idata = pm.sample(draws=200, tune=100, chains=1, step=RandomWalkStep(), random_seed=2,
                          progressbar=False, compute_convergence_checks=False)
    n_evals = idata.sample_stats["n_evals"].values
    assert np.all(n_evals == 5)  # d = 3: the default's 5 iterations per draw, nothing else
    assert idata.posterior["a"].dtype == np.float32


@pytest.mark.parametrize("cls, key", [(KameleonStep, "nu2"), (FastKameleonStep, "eta2")])
def test_overflowing_proposal_is_a_rejection(cls, key):
    """A fixed, absurd scale makes proposals overflow: rejections, never an error."""
    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=2)
        step = cls(**{key: 1.7e308}, adapt_scale=False, warmup_draws=20)
        idata = pm.sample(draws=50, tune=200, chains=1, step=step, random_seed=3,
                          progressbar=False, compute_convergence_checks=False)
    assert np.all(np.isfinite(idata.posterior["x"].values))


def test_float32_model_evaluates_once_per_iteration():
    import pytensor

    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model():
            pm.Normal("x", 0.0, 1.0, shape=2)
            idata = pm.sample(draws=100, tune=100, chains=1, step=RandomWalkStep(),
                              random_seed=2, progressbar=False, compute_convergence_checks=False)
    assert np.all(idata.sample_stats["n_evals"].values == 5)  # d = 2: the floor of 5
