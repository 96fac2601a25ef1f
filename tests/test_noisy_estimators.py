"""KameleonStep, FastKameleonStep and RandomWalkStep on a noisy likelihood estimator.

The 1-d model ``checks.noisy_model`` (KernelHMCStep is tested in ``test_kernel_hmc_noise``):
20 observations y ~ N(mu, 1), prior mu ~ N(0, 10^2), the log likelihood carrying unbiased
log-normal noise of sd ``sigma`` at every evaluation.  The exact posterior is known in closed form.

Measured (PyMC 5.28.5, seed 0, 2 chains of 2000 tune + 10000 draws):

======================  =====================  =====================  ======================
step                    sigma 0.5              sigma 1.2              sigma 2
======================  =====================  =====================  ======================
KameleonStep            +0.008 sd, 0.996, 5580 +0.008 sd, 1.000, 2912 +0.070 sd, 1.042, 478
FastKameleonStep        -0.005 sd, 1.015, 5404 +0.012 sd, 1.007, 2923 +0.022 sd, 1.011, 588
RandomWalkStep          +0.009 sd, 1.005, 7427 +0.006 sd, 1.008, 3532 +0.052 sd, 0.981, 843
======================  =====================  =====================  ======================

(mean error in posterior sd, sd ratio, bulk ESS of 20000.)

Checked once that the tests fail on broken variants:

* Monte Carlo within Metropolis (the current value re-estimated before every decision):
  sd ratio 1.23 (KAMH), 1.23 (F-KAMH), 1.26 (RW) at sigma 1.2: the accuracy test fails.
* No noise ceiling (acceptance targets 0.234 / 0.44 kept although the noise caps the
  acceptance near 0.16): at sigma 2 the scales run down to their lower bounds and the chains
  stop mixing; ``test_large_noise_does_not_collapse`` runs these variants as its negative
  control.
"""

import arviz as az
import numpy as np
import pytest
from checks import NOISY_POST_MEAN as POST_MEAN
from checks import NOISY_POST_SD as POST_SD
from checks import noisy_model, sample

from pymc_kameleon import FastKameleonStep, KameleonStep, RandomWalkStep
from pymc_kameleon.adaptation import screen as screen_module
from pymc_kameleon.adaptation.warmup import NoiseCeiling

STEPS = [KameleonStep, FastKameleonStep, RandomWalkStep]


def _run(cls, sigma: float):
    idata = sample(noisy_model(sigma), cls, draws=10000, tune=2000, chains=2, seed=0)
    return idata.posterior.mu.values, idata.sample_stats


@pytest.mark.slow
@pytest.mark.parametrize("cls", STEPS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("sigma", [0.5, 1.2])
def test_noisy_posterior_mean_and_sd(cls, sigma):
    x, _ = _run(cls, sigma)
    assert abs(x.mean() - POST_MEAN) < 0.15 * POST_SD, (x.mean() - POST_MEAN) / POST_SD
    assert abs(x.std() / POST_SD - 1.0) < 0.10, x.std() / POST_SD


class NoCeiling(NoiseCeiling):
    """Deliberately broken: the acceptance target ignores the noise's ceiling."""

    def target(self, target: float) -> float:
        return float(target)


def without_noise_ceiling(cls: type) -> type:
    """A deliberately broken ``cls``: the acceptance targets (0.234 / 0.44) are kept in the
    warm-up and after it although the estimator's noise caps the acceptance near 0.16.

    The ceiling is the warm-up state's ``noise`` (``step.warmup_state``, created at the
    chain's first draw), which every acceptance target of the step reads; it is replaced
    before each later draw.  It is read before it is replaced, so a renamed field fails
    here, not silently."""

    def step(self, point):
        walk = self.warmup_state
        if walk is not None and not isinstance(walk.noise, NoCeiling):
            assert isinstance(walk.noise, NoiseCeiling)
            walk.noise = NoCeiling()
        return cls.step(self, point)

    return type(f"NoCeiling{cls.__name__}", (cls,), {"step": step})


#: Group design of ``test_large_noise_does_not_collapse``: each chain is a group (no
#: R-hat needed), 2000 tuning and 5000 draws (the 2 x 10000 draws before, in four
#: groups); a chain passes with a bulk ESS of at least 20, and at least 3 of the 4 must.
COLLAPSE_CHAINS, COLLAPSE_DRAWS, MIN_CHAIN_ESS, MIN_PASSING = 4, 5000, 20.0, 3


@pytest.mark.slow
@pytest.mark.parametrize("cls, broken", [
    *((cls, False) for cls in STEPS),
    # without the ceiling only RandomWalkStep collapses in every chain (see below)
    (RandomWalkStep, True),
], ids=lambda v: v.__name__ if isinstance(v, type) else ("no-ceiling" if v else "correct"))
def test_large_noise_does_not_collapse(cls, broken):
    """Log-noise sd 2 caps the acceptance near 0.16: the chains keep moving and the scale
    stays finite and positive; without the noise ceiling (``broken``) they collapse.

    Criterion (group design, each chain a group): at least 3 of 4 chains of 5000 draws
    have a bulk ESS of 20 or more (pass rates in ``docs/benchmarks/test_calibration.md``).

    Negative control, the same criterion inverted: RandomWalkStep without the ceiling
    collapses in every chain.  Without the ceiling KameleonStep and FastKameleonStep no
    longer collapse reliably (their own adaptation keeps most chains moving), so they are
    not controls of this criterion.
    """
    step = without_noise_ceiling(cls) if broken else cls
    idata = sample(noisy_model(2.0), step, draws=COLLAPSE_DRAWS, tune=2000,
                   chains=COLLAPSE_CHAINS, cores=2, seed=0)
    x, stats = idata.posterior.mu.values, idata.sample_stats
    ess = [float(az.ess(chain[None])) for chain in x]
    passing = sum(e >= MIN_CHAIN_ESS for e in ess)
    print(f"{step.__name__} at log-noise sd 2: bulk ESS per chain {np.round(ess)}, "
          f"acceptance {float(stats.accepted.mean()):.3f}")
    if broken:
        assert passing < MIN_PASSING, ess
        return
    scale = stats.scaling.values
    assert np.all(np.isfinite(scale)) and np.min(scale) > 0
    assert float(stats.accepted.mean()) > 0.05
    assert passing >= MIN_PASSING, ess


#: Group design of ``test_screen_on_a_noisy_estimator``: each chain a group of 5000 draws
#: (bulk ESS about 4000: 0.15 sd is about 9 standard errors of the mean, 10 % about 9 of
#: the sd); at least 3 of 4 must be within both tolerances.
SCREEN_CHAINS, SCREEN_DRAWS, SCREEN_PASSING = 4, 5000, 3


@pytest.mark.slow
@pytest.mark.parametrize("broken", [False, True], ids=["correct", "no-surrogate-ratio"])
@pytest.mark.parametrize("cls", [RandomWalkStep, KameleonStep], ids=lambda c: c.__name__)
def test_screen_on_a_noisy_estimator(cls, broken, monkeypatch):
    """Log-noise sd 0.5: the surrogate screen turns on (its held-out error is below one
    nat) and the screened chain keeps the exact posterior, the stored estimate entering
    both stages.  With the second stage's surrogate ratio dropped (``broken``, the
    variant test_screen.py uses) the chains sample another target and fewer than 3 of 4
    pass.  At sd 1.2 it stayed off (its held-out error above one nat; measured once,
    docs/benchmarks/test_calibration.md), so there the draws are the unscreened ones
    tested above."""
    if broken:
        monkeypatch.setattr(screen_module, "stage2_log_ratio", lambda lx, ly, sx, sy: ly - lx)
    idata = sample(noisy_model(0.5), lambda: cls(screen=True), draws=SCREEN_DRAWS,
                   tune=2000, chains=SCREEN_CHAINS, seed=0)
    x = idata.posterior.mu.values
    active = idata.sample_stats["screen_active"].values[:, -1]
    assert active.sum() >= SCREEN_PASSING, active  # else the test would test nothing
    passing = sum(abs(c.mean() - POST_MEAN) < 0.15 * POST_SD
                  and abs(c.std() / POST_SD - 1.0) < 0.10 for c in x)
    print(f"{cls.__name__} screened at log-noise sd 0.5 ({'broken' if broken else 'correct'}):"
          f" chains passing {passing} of {len(x)}, means {np.round(x.mean(1), 3)}, "
          f"sds {np.round(x.std(1), 3)} (exact {POST_MEAN:.3f}, {POST_SD:.3f})")
    if broken:
        assert passing < SCREEN_PASSING
    else:
        assert passing >= SCREEN_PASSING
