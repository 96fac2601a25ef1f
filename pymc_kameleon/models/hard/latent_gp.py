"""Latent Gaussian processes under Poisson counts: a funnel, centred or as Stan writes it.

* :func:`gp_poisson_model`: the latent GP centred, a funnel between the GP's amplitude and
  its 11 latent values (d = 13); :func:`gp_poisson_noncentred` is the same posterior for the
  NUTS reference;
* :func:`gp_pois_regr_model`: posteriordb's ``gp_pois_regr-gp_pois_regr``, the latent GP
  written non-centred as Stan writes it (d = 13); its reference is posteriordb's.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.linalg import solve_triangular

__all__ = [
    "GP_COUNTS",
    "GP_JITTER",
    "GP_OFFSET",
    "GP_POIS_REGR_JITTER",
    "GP_POIS_REGR_K",
    "GP_POIS_REGR_X",
    "GP_SEED",
    "GP_TRUE",
    "GP_X",
    "gp_correlation",
    "gp_pois_regr_cov",
    "gp_pois_regr_from_posteriordb",
    "gp_pois_regr_model",
    "gp_poisson_model",
    "gp_poisson_noncentred",
    "gp_simulate",
]

#: Inputs of the latent GP (11 equally spaced periods) and the fixed log-rate offset.
GP_X = np.arange(11.0)
GP_OFFSET = 0.5
#: True amplitude and lengthscale of the simulated latent function.
GP_TRUE = (0.8, 2.0)
GP_SEED = 20261127
#: Relative jitter on the GP's correlation matrix (part of the model: ``K = amp^2 (R + eps I)``).
GP_JITTER = 1e-6
#: Counts at :data:`GP_X`: ``f ~ GP(0, K(GP_TRUE))``, ``y ~ Poisson(exp(GP_OFFSET + f))``
#: drawn with ``np.random.default_rng(GP_SEED)`` (``gp_simulate()`` recomputes them).
GP_COUNTS = np.array([4, 5, 3, 2, 4, 6, 5, 5, 4, 4, 0])


def gp_correlation(lengthscale) -> pt.TensorVariable:
    """The latent GP's correlation matrix on :data:`GP_X`: squared exponential with
    ``lengthscale`` plus ``1e-6 I`` (a PyTensor expression; ``.eval()`` for its values)."""
    d2 = (GP_X[:, None] - GP_X[None, :]) ** 2
    return pt.exp(-0.5 * d2 / lengthscale**2) + GP_JITTER * np.eye(GP_X.size)


def gp_simulate() -> np.ndarray:
    """The counts of :data:`.GP_COUNTS`, recomputed from :data:`GP_TRUE` and :data:`GP_SEED`."""
    amp, ls = GP_TRUE
    rng = np.random.default_rng(GP_SEED)
    cov = amp**2 * gp_correlation(ls).eval()
    f = rng.multivariate_normal(np.zeros(GP_X.size), cov)
    return rng.poisson(np.exp(GP_OFFSET + f))


_GP_PRIOR = {"log_amp": (0.0, 1.0), "log_ls": (np.log(2.0), 0.5)}


def _gp(centred: bool) -> pm.Model:
    with pm.Model() as model:
        log_amp = pm.Normal("log_amp", *_GP_PRIOR["log_amp"])
        log_ls = pm.Normal("log_ls", *_GP_PRIOR["log_ls"])
        chol = pt.exp(log_amp) * pt.linalg.cholesky(gp_correlation(pt.exp(log_ls)))
        if centred:
            f = pm.MvNormal("f", mu=np.zeros(GP_X.size), chol=chol)
        else:
            z = pm.Normal("z", 0.0, 1.0, shape=GP_X.size)
            f = pm.Deterministic("f", pt.dot(chol, z))
        pm.Poisson("y", pt.exp(GP_OFFSET + f), observed=GP_COUNTS)
    return model


def gp_poisson_model() -> pm.Model:
    """Latent GP Poisson regression, centred (d = 13): ``f ~ MvNormal(0, K)``,
    ``K = amp^2 (exp(-(x - x')^2 / (2 ls^2)) + 1e-6 I)``, ``y ~ Poisson(exp(0.5 + f))``.

    ``log amp ~ N(0, 1)``, ``log ls ~ N(log 2, 0.5)``: the latent values and the GP's
    amplitude form a funnel (small counts inform ``f`` weakly).
    """
    return _gp(centred=True)


def gp_poisson_noncentred() -> pm.Model:
    """The same posterior, non-centred: ``f = L(amp, ls) z`` (for the NUTS reference)."""
    return _gp(centred=False)


# ------------------------------------------------------- posteriordb gp_pois_regr
#: posteriordb's data ``gp_pois_regr``: 11 inputs and counts (public, posteriordb's
#: ``posterior_database/data/data/gp_pois_regr.json.zip``).
GP_POIS_REGR_X = np.arange(-10.0, 11.0, 2.0)
GP_POIS_REGR_K = np.array([40, 37, 29, 12, 4, 3, 9, 19, 77, 82, 33])
#: Stan's jitter on the covariance (``diag_matrix(rep_vector(1e-10, N))``).
GP_POIS_REGR_JITTER = 1e-10


def gp_pois_regr_cov(alpha, rho):
    """``gp_exp_quad_cov(x, alpha, rho) + 1e-10 I`` (NumPy or PyTensor arguments)."""
    d2 = (GP_POIS_REGR_X[:, None] - GP_POIS_REGR_X[None, :]) ** 2
    lib = pt if isinstance(alpha, pt.TensorVariable) else np
    return alpha**2 * lib.exp(-0.5 * d2 / rho**2) + GP_POIS_REGR_JITTER * np.eye(d2.shape[0])


def gp_pois_regr_model() -> pm.Model:
    """posteriordb's ``gp_pois_regr-gp_pois_regr`` as its Stan model writes it (d = 13).

    ``rho ~ Gamma(25, 4)``, ``alpha ~ HalfNormal(2)``, ``f_tilde ~ N(0, I_11)``,
    ``f = L f_tilde`` with ``L L^T = alpha^2 exp(-(x - x')^2 / (2 rho^2)) + 1e-10 I``,
    ``k ~ Poisson(exp(f))``: the hyperparameters act on the counts only through ``L``.
    """
    with pm.Model() as model:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", 2.0)
        f_tilde = pm.Normal("f_tilde", 0.0, 1.0, shape=GP_POIS_REGR_X.size)
        chol = pt.linalg.cholesky(gp_pois_regr_cov(alpha, rho))
        f = pm.Deterministic("f", pt.dot(chol, f_tilde))
        pm.Poisson("k", pt.exp(f), observed=GP_POIS_REGR_K)
    return model


def gp_pois_regr_from_posteriordb(draws: dict[str, np.ndarray]) -> np.ndarray:
    """posteriordb's reference draws (``rho``, ``alpha``, ``f[1]`` .. ``f[11]``, each
    ``(chains, draws)``) as the model's free variables ``(rho, alpha, f_tilde)``, shape
    ``(chains, draws, 13)``: posteriordb stores ``f``, the model samples
    ``f_tilde = L^{-1} f`` (L's condition number stays below 1e6 there, so the 15 digits
    stored leave ``f_tilde`` exact to about 1e-9)."""
    rho, alpha = np.asarray(draws["rho"], float), np.asarray(draws["alpha"], float)
    f = np.stack([np.asarray(draws[f"f[{i + 1}]"], float)
                  for i in range(GP_POIS_REGR_X.size)], axis=-1)
    f_tilde = np.empty_like(f)
    for idx in np.ndindex(rho.shape):
        chol = np.linalg.cholesky(gp_pois_regr_cov(float(alpha[idx]), float(rho[idx])))
        f_tilde[idx] = solve_triangular(chol, f[idx], lower=True)
    return np.concatenate([rho[..., None], alpha[..., None], f_tilde], axis=-1)
