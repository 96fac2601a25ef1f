"""KernelHMCStep on a noisy likelihood estimator (issue 13 item 7).

1-d posterior: 20 observations y ~ N(mu, 1) from a fixed seed, prior mu ~ N(0, 10^2); the log
likelihood carries unbiased log-normal noise N(-sigma^2 / 2, sigma^2) at every evaluation.

Checked once: with the plain Robbins-Monro rule toward 0.65 (main before this change) the
finite surrogate at sigma = 1.2 gave a mean error of +0.25 posterior sd, an sd ratio of 0.71,
ESS 17 and a median step size of 1.4e-4 (2.4e-14 at sigma = 2): the accuracy test fails.
"""

import arviz as az
import numpy as np
import pymc as pm
import pytest
from checks import sample

from pymc_kameleon import KernelHMCStep, pseudo_marginal_potential

Y = np.random.default_rng(2026).normal(0.7, 1.0, 20)
PREC = Y.size + 1.0 / 100.0
POST_MEAN, POST_SD = Y.sum() / PREC, PREC**-0.5


def noisy_model(sigma: float) -> pm.Model:
    def estimator(mu, rng):
        return -0.5 * np.sum((Y - mu) ** 2) + sigma * rng.normal() - 0.5 * sigma**2

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pseudo_marginal_potential("lik", estimator, mu)
    return model


def _run(surrogate: str, sigma: float):
    idata = sample(noisy_model(sigma), lambda: KernelHMCStep(surrogate=surrogate),
                   draws=10000, tune=2000, chains=2, seed=0)
    x = idata.posterior.mu.values
    return x, idata.sample_stats.step_size.values


@pytest.mark.slow
@pytest.mark.parametrize("surrogate", ["lite", "finite"])
@pytest.mark.parametrize("sigma", [0.5, 1.2])
def test_noisy_posterior_mean_and_sd(surrogate, sigma):
    x, _ = _run(surrogate, sigma)
    assert abs(x.mean() - POST_MEAN) < 0.15 * POST_SD, (x.mean() - POST_MEAN) / POST_SD
    assert abs(x.std() / POST_SD - 1.0) < 0.10, x.std() / POST_SD


LITE_AT_SIGMA_2 = pytest.mark.xfail(
    reason="open: lite at sigma 2 (seed 0) sticks: median step 0.005, ESS 3, mean off by 1.2 sd; "
    "its surrogate is refitted on the sticky history and the anchor follows it down",
    strict=False,
)


@pytest.mark.slow
@pytest.mark.parametrize("surrogate", [pytest.param("lite", marks=LITE_AT_SIGMA_2), "finite"])
def test_large_noise_does_not_collapse_the_step_size(surrogate):
    """Log-noise sd 2 caps the acceptance near 0.16: the step size must stay a sizeable
    fraction of the posterior sd (measured: median 0.04 finite; ESS ~700 of 20000)."""
    x, eps = _run(surrogate, 2.0)
    assert np.median(eps) > 0.02 * POST_SD and eps.min() > 1e-3 * POST_SD
    assert float(az.ess(x)) > 50
