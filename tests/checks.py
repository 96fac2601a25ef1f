"""Statistical checks shared by the sampler tests.

Thresholds are stated in units of Monte Carlo standard errors computed from ArviZ's ESS,
so they mean the same thing for every sampler; each was confirmed once to reject a
deliberately broken sampler (see the tests that use them).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytest
import xarray as xr
from pytensor.compile.mode import predefined_modes

try:  # PyTensor's decorator for a Python function as an Op (formerly as_op), for the tests
    from pytensor.compile.ops import wrap_py
except ImportError:  # pragma: no cover - older PyTensor
    from pytensor.compile.ops import as_op as wrap_py  # noqa: F401
from scipy import stats

from pymc_kameleon import (
    FastKameleonStep,
    KameleonSMC,
    KameleonStep,
    KernelHMCStep,
    RandomWalkStep,
    pseudo_marginal_potential,
)
from pymc_kameleon.compat import ARVIZ_VERSION, group_dataset, max_rhat
from pymc_kameleon.models.targets import banana_coverage_error

logging.getLogger("pymc").setLevel(logging.ERROR)

#: Covariance of the correlated 2-d Gaussian used by the ``gauss`` fixture (conftest.py).
GAUSS_COV = np.array([[4.0, 1.8], [1.8, 1.0]])


def _backends() -> list[str]:
    """PyTensor compile modes that can run a Python Op (the likelihood estimator) here: Numba
    (PyTensor 3's default; only when Numba is installed: PyTensor 2.31, the last release
    for Python 3.10, does not require it), the C virtual machine (PyTensor 2's default; needs
    a C compiler; PyTensor 2.31 calls it ``FAST_RUN``, later releases also ``CVM``) and the
    Python virtual machine."""
    modes = ["NUMBA"] if importlib.util.find_spec("numba") is not None else []
    if pytensor.config.cxx:
        modes.append("CVM" if "CVM" in predefined_modes else "FAST_RUN")
    return [*modes, "FAST_COMPILE"]


BACKENDS = _backends()

# ------------------------------------------------------------------ noisy 1-d estimator model
#: 20 observations y ~ N(mu, 1) from a fixed seed; prior mu ~ N(0, 10^2): the exact posterior.
NOISY_Y = np.random.default_rng(2026).normal(0.7, 1.0, 20)
_NOISY_PREC = NOISY_Y.size + 1.0 / 100.0
NOISY_POST_MEAN, NOISY_POST_SD = NOISY_Y.sum() / _NOISY_PREC, _NOISY_PREC**-0.5


def noisy_model(sigma: float) -> pm.Model:
    """The 1-d model above whose log likelihood carries unbiased log-normal noise
    N(-sigma^2 / 2, sigma^2) at every evaluation (a pseudo-marginal potential)."""

    def estimator(mu, rng):
        return -0.5 * np.sum((NOISY_Y - mu) ** 2) + sigma * rng.normal() - 0.5 * sigma**2

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pseudo_marginal_potential("lik", estimator, mu)
    return model


def tempered(logp):
    """A ``logp_wrapper`` for deliberately broken variants: the step samples the target to
    the power 0.7 (on a Gaussian every variance 1/0.7 times the truth) while claiming the
    target itself."""
    return lambda x: 0.7 * logp(x)


def sample(model, step_factory, *, draws, tune, chains=2, cores=1, seed=0, **kwargs):
    """``pm.sample`` with quiet defaults; ``step_factory`` is called inside the model."""
    with model:
        return pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=cores,
            step=step_factory(),
            random_seed=seed,
            **{"progressbar": False, "compute_convergence_checks": False, **kwargs},
        )


def plot_trace(idata, group: str = "posterior", var_names: list[str] | None = None):
    """``az.plot_trace`` of one group: ArviZ 1 takes ``group=``, ArviZ 0.x the group itself."""
    if ARVIZ_VERSION[0] >= 1:
        return az.plot_trace(idata, group=group, var_names=var_names)
    return az.plot_trace(group_dataset(idata, group), var_names=var_names)


def moment_zscores(x: np.ndarray, mean: float, var: float) -> tuple[float, float]:
    """z-scores of the sample mean and variance of ``x`` (chain, draw) against the truth.

    Standard errors: ``sd / sqrt(ESS)`` for the mean and ``sqrt(Var[(x - mean)^2] / ESS_2)``
    for the variance, with ESS of ``x`` and of ``(x - mean)^2`` respectively.
    """
    ess_1 = float(az.ess(x))
    sq = (x - mean) ** 2
    ess_2 = float(az.ess(sq))
    z_mean = (x.mean() - mean) / np.sqrt(var / ess_1)
    z_var = (sq.mean() - var) / np.sqrt(sq.var() / ess_2)
    return float(z_mean), float(z_var)


def gaussian_groups_passing(draws: np.ndarray, cov: np.ndarray, n_groups: int,
                            threshold: float = 4.0) -> int:
    """Disjoint groups of chains whose mean and variance z-scores (:func:`moment_zscores`)
    are all below ``threshold`` in absolute value, every coordinate, against a zero-mean
    Gaussian of covariance ``cov``.

    ``draws`` has shape (chain, draw, d); chains are split into ``n_groups`` equal groups.
    """
    size = draws.shape[0] // n_groups
    passing = 0
    for g in range(n_groups):
        block = draws[g * size : (g + 1) * size]
        z = [moment_zscores(block[:, :, j], 0.0, cov[j, j]) for j in range(draws.shape[2])]
        passing += int(np.max(np.abs(z)) < threshold)
    return passing


def gaussian_posterior(prior_sd: float, n: int, total: float,
                       noise_sd: float = 1.0) -> tuple[float, float]:
    """Exact posterior (mean, sd) of ``mu`` with prior ``N(0, prior_sd^2)`` and ``n``
    observations ``N(mu, noise_sd^2)`` summing to ``total``."""
    precision = n / noise_sd**2 + 1.0 / prior_sd**2
    return total / noise_sd**2 / precision, precision**-0.5


def mean_error_in_mcse(x: np.ndarray, mean: float, sd: float) -> float:
    """Error of the mean of draws ``x`` (one chain, or (chain, draw)) against the exact
    posterior, in Monte Carlo standard errors ``sd / sqrt(ESS)`` with the exact posterior
    ``sd``: about N(0, 1) for a correct sampler, so ``|.| < 4`` fails a correct one with
    probability about 6e-5; a chain that barely moves has a small ESS, never a small error.
    """
    return moment_zscores(np.atleast_2d(x), mean, sd**2)[0]


def thinned(x: np.ndarray) -> np.ndarray:
    """Pool chains after thinning each to roughly independent draws (step ``2 N / ESS``)."""
    n = x.shape[1]
    step = max(1, int(np.ceil(2 * n * x.shape[0] / float(az.ess(x)))))
    return x[:, ::step].ravel()


def ks_pvalue(x: np.ndarray, cdf) -> float:
    """Kolmogorov-Smirnov p-value of thinned draws ``x`` (chain, draw) against ``cdf``."""
    return float(stats.kstest(thinned(x), cdf).pvalue)


def banana_check(idata, b: float, v: float, name: str = "x") -> tuple[float, float]:
    """(quantile coverage error of |z|^2 against chi2_d, max R-hat) of a banana posterior
    (``idata`` a ``pm.sample`` result or a posterior dataset)."""
    post = idata if isinstance(idata, xr.Dataset) else group_dataset(idata, "posterior")
    x = post[name].values
    err = banana_coverage_error(x.reshape(-1, x.shape[-1]), b, v)
    rhat = max_rhat(post, [name])
    return float(err), rhat


def banana_check_groups(idata, b: float, v: float, size: int = 4,
                        name: str = "x") -> list[tuple[float, float]]:
    """:func:`banana_check` of each disjoint group of ``size`` chains (a 16-chain run holds
    four 4-chain runs: the power of a 4-chain test at the price of one run)."""
    post = group_dataset(idata, "posterior")
    return [banana_check(post.isel(chain=slice(start, start + size)), b, v, name)
            for start in range(0, post.sizes["chain"] - size + 1, size)]


#: Group design of the banana tests: a run of 16 chains holds four disjoint 4-chain groups,
#: at least 2 of which must pass; each test states its per-group criterion, the measured
#: group pass rates and the resulting error probabilities.
BANANA_CHAINS, BANANA_MIN_PASSING = 16, 2


def banana_groups_passing(idata, b: float, v: float, max_error: float,
                          max_rhat: float = np.inf) -> tuple[int, list[tuple[float, float]]]:
    """(number of 4-chain groups with coverage error below ``max_error`` and R-hat below
    ``max_rhat``, every group's (error, R-hat)) of a banana run."""
    groups = banana_check_groups(idata, b, v)
    return sum(e < max_error and r < max_rhat for e, r in groups), groups


@dataclass(frozen=True)
class Sampler:
    cls: type
    #: stats that stay constant after tuning (frozen adaptation)
    frozen: tuple[str, ...]
    #: a stat that changes while tuning
    adapted: str
    #: stat values of a run without tuning (nothing learned: a random walk)
    untuned: dict
    kwargs: dict = field(default_factory=dict)

    def __call__(self, *args, **kwargs):
        return self.cls(*args, **{**self.kwargs, **kwargs})


_KAMH_UNTUNED = {"n_history": 0, "scaling": np.nan}
_KMC_FROZEN = ("bandwidth", "kernel_sigma", "lambda", "surrogate")
_KMC_UNTUNED = {"surrogate": 0}
SAMPLERS = {
    "RandomWalkStep": Sampler(RandomWalkStep, ("scaling",), "scaling", {}),
    "KameleonStep": Sampler(
        KameleonStep, ("scaling", "gamma", "bandwidth", "n_history"), "scaling", _KAMH_UNTUNED
    ),
    "FastKameleonStep": Sampler(
        FastKameleonStep, ("scaling", "gamma", "bandwidth", "n_features", "n_history"),
        "scaling", _KAMH_UNTUNED,
    ),
    # shorter trajectories keep the suite fast; test_kernel_hmc.py runs the defaults
    "KernelHMCStep-lite": Sampler(
        KernelHMCStep, _KMC_FROZEN, "step_size", _KMC_UNTUNED,
        {"surrogate": "lite", "n_leapfrog": (5, 20)},
    ),
    "KernelHMCStep-finite": Sampler(
        KernelHMCStep, _KMC_FROZEN, "step_size", _KMC_UNTUNED,
        {"surrogate": "finite", "n_leapfrog": (5, 20)},
    ),
}

#: ``SAMPLERS`` for the long statistical tests on known targets (use as
#: ``@pytest.mark.parametrize("sampler", STATISTICAL_SAMPLERS, indirect=True)``): kernel HMC's
#: "lite" surrogate runs them only in the slow run.  It is the same step as "finite" with
#: another surrogate, its trajectories cost the most per iteration, and these runs were a
#: seventh of CI's test time (docs/installation.md); its API tests and its own tests
#: (test_kernel_hmc.py, the Gaussian checks) stay in CI.
STATISTICAL_SAMPLERS = [
    pytest.param(name, marks=pytest.mark.slow) if name == "KernelHMCStep-lite" else name
    for name in SAMPLERS
]


# ------------------------------------------------------------------ pm.sample_smc helpers


# ----------------------------------------------------------------------------- progress bars
#: The progress board of the last :class:`WatchedSMC` run (the main process's).
WATCHED_BOARD: list = []


class WatchedSMC(KameleonSMC):
    """``KameleonSMC`` whose progress board (the main process's) a test can read."""

    def progress_config(self, n_chains: int = 1):
        out = super().progress_config(n_chains)
        WATCHED_BOARD[:] = [self._board]
        return out
