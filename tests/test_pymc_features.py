"""Every step of ours through ``pm.sample`` on models built from PyMC's features.

The PyMC-feature models of :mod:`pymc_kameleon.models.features`: imputed missing
values, an LKJ packed Cholesky factor, a Dirichlet simplex, ``ZeroSumNormal`` effects, a
latent Gaussian random walk, ``Censored``, ``Truncated``, an ordered-mean mixture and a
Student-t regression on ``pm.Data`` with a ``Deterministic``.  A short run per model and
step (warm-up and kernel phase both reached) must return the model's variables from a
chain that moved, with the step's stored log density equal to the model's at every point
PyMC records.  Convergence and accuracy at ``pm.sample``'s defaults
are the suite's business (docs/benchmarks/suite.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from checks import sample

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep
from pymc_kameleon.models import features

# the non-centred time series only reparametrises the centred one (for NUTS's reference)
FEATURE_MODELS = [name for name in features.__all__ if name != "timeseries_noncentred"]
STEPS = {"KameleonStep": KameleonStep, "FastKameleonStep": FastKameleonStep,
         "KernelHMCStep": KernelHMCStep, "RandomWalkStep": RandomWalkStep}


@pytest.fixture(scope="module", params=FEATURE_MODELS)
def feature_model(request):
    return request.param, getattr(features, request.param)()


def test_step_runs_on_the_model(feature_model, step_name):
    name, model = feature_model
    logp = model.compile_logp()
    seen = []  # (the model's log density at the draw, the step's stored value)

    def check(trace, draw):
        seen.append((logp(draw.point), draw.stats[0]["model_logp"]))

    idata = sample(model, lambda: STEPS[step_name](warmup_draws=40, tune_draws=120), draws=40,
                   tune=120,
                   chains=1, seed=7, callback=check)
    post = {k: v.values[0] for k, v in idata.posterior.data_vars.items()}
    expected = {rv.name for rv in model.free_RVs} | {d.name for d in model.deterministics}
    assert expected <= set(post)
    for values in post.values():
        assert np.all(np.isfinite(values))
    # the stored log density is the model's at the point PyMC recorded, at every draw of
    # the warm-up, the kernel phase and after tuning (variables raveled in PyMC's order)
    assert len(seen) == 160
    np.testing.assert_allclose(*np.array(seen).T, rtol=1e-9, atol=1e-9)
    free = np.concatenate([post[rv.name].reshape(40, -1) for rv in model.free_RVs], axis=1)
    assert np.unique(free, axis=0).shape[0] > 4  # the chain moved after tuning
    assert np.all(idata.sample_stats["n_evals"].values >= 1)


@pytest.fixture(params=list(STEPS))
def step_name(request):
    return request.param
