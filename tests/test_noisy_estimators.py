"""KameleonStep, FastKameleonStep and RandomWalkStep on a noisy likelihood estimator (issue 13).

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
  acceptance near 0.16): at sigma 2 the scales run down to their lower bounds, ESS 3 (KAMH,
  RW) and 21 (F-KAMH with the ceiling kept in the warm-up only): the no-collapse test fails.
"""

import arviz as az
import numpy as np
import pytest
from checks import NOISY_POST_MEAN as POST_MEAN
from checks import NOISY_POST_SD as POST_SD
from checks import noisy_model, sample

from pymc_kameleon import FastKameleonStep, KameleonStep, RandomWalkStep

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


@pytest.mark.slow
@pytest.mark.parametrize("cls", STEPS, ids=lambda c: c.__name__)
def test_large_noise_does_not_collapse(cls):
    """Log-noise sd 2 caps the acceptance near 0.16: the chain keeps moving (ESS 478-843
    measured, 3-21 without the noise ceiling) and the scale stays finite and positive.

    The ESS of a correct step varies a lot between seeds at this noise: FastKameleonStep on
    PyMC 6.4, seeds 0-2, gave 180, 336, 708 (``trace_tolerance`` 0.03, the default) and 201,
    509, 722 (0, the default before), so the bound is 100, which the collapsed variants
    (3-21) still fail by a factor of five; it was 200, which seed 0 missed with both."""
    x, stats = _run(cls, 2.0)
    scale = stats.scaling.values
    ess = float(az.ess(x))
    print(f"{cls.__name__} at log-noise sd 2: bulk ESS {ess:.0f} of {x.size}, "
          f"acceptance {float(stats.accepted.mean()):.3f}, scaling min {np.min(scale):.3g}")
    assert np.all(np.isfinite(scale)) and np.min(scale) > 0
    assert float(stats.accepted.mean()) > 0.05
    assert ess > 100, ess
