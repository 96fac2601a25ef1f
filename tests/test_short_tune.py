"""The samplers start within a short tuning phase on both PyMC majors:
the warm-up takes half of ``tune``, which PyMC 6 hands to the step and PyMC 5's chain loop
holds (``compat.caller_tuning_draws``)."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

from pymc_kameleon import KameleonStep
from pymc_kameleon.compat import PYMC_VERSION, caller_tuning_draws

TUNE = 300


@pytest.fixture(scope="module")
def normal2():
    with pm.Model() as model:
        pm.Normal("x", 0.0, [1.0, 3.0])
    return model


@pytest.mark.parametrize("cores", [1, 2])
def test_sampler_starts_within_tune_300(normal2, cores):
    """KAMH's own adaptation (its ``scaling`` stat, NaN during the warm-up) starts after the
    warm-up's 150 draws and well before tuning ends, and no "never started" warning is
    given (before: the warm-up took 500 draws on PyMC 5 and the sampler never ran)."""
    with normal2, warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", "More chains", UserWarning)  # ArviZ, 2 draws
        idata = pm.sample(tune=TUNE, draws=2, chains=2, cores=cores, step=KameleonStep(),
                          random_seed=1, discard_tuned_samples=False, progressbar=False,
                          compute_convergence_checks=False)
    scaling = np.asarray(idata.warmup_sample_stats["scaling"].values)
    started = np.argmax(np.isfinite(scaling), axis=1)
    assert np.all(np.isfinite(scaling[:, -1])), scaling[:, -1]
    assert np.all((started >= TUNE // 2) & (started < TUNE - 100)), started


def test_caller_tuning_draws_outside_a_chain_loop():
    """Outside PyMC's loops (and always on PyMC 6, whose steps are told) there is nothing to
    read."""
    assert caller_tuning_draws() is None


@pytest.mark.skipif(PYMC_VERSION[0] >= 6, reason="PyMC 6 tells the step (setup_chain)")
def test_caller_tuning_draws_reads_pymc5_sequential_loop(normal2):
    seen = []

    class Probe(pm.Metropolis):
        def astep(self, q0):
            seen.append(caller_tuning_draws())
            return super().astep(q0)

    with normal2:
        pm.sample(tune=7, draws=1, chains=1, cores=1, step=Probe(), progressbar=False,
                  compute_convergence_checks=False, random_seed=1)
    assert set(seen) == {7}
