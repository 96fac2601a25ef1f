"""The samplers start within a short tuning phase on both PyMC majors: the warm-up takes half
of the number of tuning draws, which PyMC 6 tells the step (``setup_chain``) and which the
user gives on PyMC 5 (``tune_draws``).  On PyMC 5 without it the step assumes
``pm.sample``'s default, 1000, and says so when the chain tuned for another number."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

from pymc_kameleon import KameleonStep, RandomWalkStep
from pymc_kameleon.compat import PM_SAMPLE_TUNE, TELLS_TUNING_DRAWS

TUNE = 300


@pytest.fixture(scope="module")
def normal2():
    with pm.Model() as model:
        pm.Normal("x", 0.0, [1.0, 3.0])
    return model


def _sample(model, step, *, tune=TUNE, cores=1, chains=2):
    """``pm.sample`` with ``step()`` built in ``model``."""
    with model:
        return pm.sample(tune=tune, draws=2, chains=chains, cores=cores, step=step(),
                         random_seed=1, discard_tuned_samples=False, progressbar=False,
                         compute_convergence_checks=False)


def _first_sampler_draw(idata) -> np.ndarray:
    """Per chain, the first tuning draw of KAMH's own adaptation (its ``scaling`` stat is
    NaN during the warm-up)."""
    scaling = np.asarray(idata.warmup_sample_stats["scaling"].values)
    assert np.all(np.isfinite(scaling[:, -1])), scaling[:, -1]
    return np.argmax(np.isfinite(scaling), axis=1)


@pytest.mark.parametrize("cores", [1, 2])
def test_sampler_starts_within_tune_300(normal2, cores):
    """KAMH's own adaptation starts after the warm-up's 150 draws and well before tuning
    ends, and no warning is given (neither "never started" nor a wrong number of tuning
    draws), on both majors: PyMC 6 tells the step, PyMC 5 users pass ``tune_draws``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", "More chains", UserWarning)  # ArviZ, 2 draws
        idata = _sample(normal2, lambda: KameleonStep(tune_draws=TUNE), cores=cores)
    started = _first_sampler_draw(idata)
    assert np.all((started >= TUNE // 2) & (started < TUNE - 100)), started


def test_tune_draws_is_checked_and_readable(normal2):
    with normal2:
        assert KameleonStep(tune_draws=TUNE).tune_draws == TUNE
        assert RandomWalkStep().tune_draws is None
        assert RandomWalkStep(tune_draws=np.int64(0)).tune_draws == 0
        with pytest.raises(ValueError, match="tune_draws"):
            RandomWalkStep(tune_draws=-1)
        with pytest.raises(ValueError, match="tune_draws"):
            RandomWalkStep(tune_draws=2.5)
        with pytest.raises(TypeError, match="tune_draws"):
            RandomWalkStep(tune_draws="300")


@pytest.mark.skipif(not TELLS_TUNING_DRAWS, reason="PyMC 5 does not tell the step")
def test_pymc6_setup_chain_wins_over_tune_draws(normal2):
    """PyMC 6's ``setup_chain`` tells the chain's 300 tuning draws: the warm-up takes 150
    whatever ``tune_draws`` says (50 would make it 25), and nothing warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", "More chains", UserWarning)
        idata = _sample(normal2, lambda: KameleonStep(tune_draws=50))
    started = _first_sampler_draw(idata)
    assert np.all(started >= TUNE // 2), started


@pytest.mark.skipif(TELLS_TUNING_DRAWS, reason="PyMC 6 tells the step (setup_chain)")
def test_pymc5_without_tune_draws_assumes_the_default_and_warns_once(normal2):
    """Not told, the step plans for ``pm.sample``'s 1000 tuning draws (a warm-up of 500,
    longer than the 300 here) and warns once per step, at the end of the first chain's
    tuning, with the draws the chain ran and the argument that fixes it."""
    with pytest.warns(UserWarning) as record:
        idata = _sample(normal2, KameleonStep)
    told = [str(w.message) for w in record if "tune_draws=" in str(w.message)]
    assert len(told) == 1, told  # two chains, one step object
    assert "KameleonStep['x']" in told[0]
    assert f"ran {TUNE} tuning draws" in told[0]
    assert f"planned its tuning for {PM_SAMPLE_TUNE}" in told[0]
    assert f"Pass tune_draws={TUNE} to the step" in told[0]
    # the warm-up took half of the assumed 1000 tuning draws: all 300 here
    scaling = np.asarray(idata.warmup_sample_stats["scaling"].values)
    assert np.all(np.isnan(scaling)), scaling


@pytest.mark.skipif(TELLS_TUNING_DRAWS, reason="PyMC 6 tells the step (setup_chain)")
def test_pymc5_default_tune_needs_no_tune_draws(normal2):
    """At ``pm.sample``'s default tune=1000 the assumption holds: nothing to warn about."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", "More chains", UserWarning)
        _sample(normal2, RandomWalkStep, tune=PM_SAMPLE_TUNE, chains=1)
