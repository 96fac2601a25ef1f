"""PyMC models users sample: the banana target and GP-classification hyperparameters.

* :func:`banana_model`: one vector variable (``pm.Flat``) whose density is a ``pm.Potential``
  written in PyTensor, so gradient-based samplers (NUTS) run on the same model as the
  gradient-free step methods of this package.  Its log density equals
  :func:`pymc_kameleon.models.targets.banana_logp` exactly; check draws with
  :func:`~pymc_kameleon.models.targets.banana_coverage_error`.
* :func:`gp_classification_model`: the pseudo-marginal posterior of GP-classification
  hyperparameters (:mod:`pymc_kameleon.models.gpc`, guide: :doc:`/pseudo_marginal`).

The flower, Gaussian and Gaussian-mixture models and a log density that counts its
evaluations, which the tests and benchmarks share, are in :mod:`pymc_kameleon.models.synthetic`.

References
----------
- Haario, Saksman, Tamminen (1999). Adaptive proposal distribution for random walk
  Metropolis algorithm. Computational Statistics 14(3), 375-395.
- Sejdinovic, Strathmann, Lomeli, Andrieu, Gretton (2014). Kernel adaptive
  Metropolis-Hastings. ICML 2014, Sections 5.1 and 5.2.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from numpy.typing import ArrayLike

from ..validation import check_integral, check_positive
from .targets import LOG_2PI

__all__ = ["banana_model", "gp_classification_model"]


def vector_variable(name: str, dim: int, initval: np.ndarray, prior_sd: float | None):
    """The model's vector variable and the log prior to take out of its potential.

    Without ``prior_sd`` a ``pm.Flat`` (log prior 0).  With it, ``N(0, prior_sd^2 I)``, a proper
    prior SMC can start from; subtracting its log density in the potential leaves the
    posterior the normalised target, whose log evidence is then exactly 0.
    """
    if prior_sd is None:
        return pm.Flat(name, shape=(dim,), initval=initval), 0.0
    prior_sd = check_positive("prior_sd", prior_sd)
    # no initval: PyMC's SMC would start every particle there instead of at prior draws
    x = pm.Normal(name, 0.0, prior_sd, shape=(dim,))
    log_prior = -0.5 * pt.sum(x**2) / prior_sd**2 - dim * (0.5 * LOG_2PI + np.log(prior_sd))
    return x, log_prior


def banana_model(
    dim: int = 2, b: float = 0.1, v: float = 100.0, name: str = "x",
    prior_sd: float | None = None,
) -> pm.Model:
    """PyMC model of the banana target ``B(b, v)`` (Haario et al., 1999).

    One variable ``name`` of shape ``(dim,)``: a ``pm.Flat`` with initial value ``0`` and the
    normalised banana log density (see :func:`pymc_kameleon.models.targets.banana_logp`) as a
    ``pm.Potential`` named ``f"{name}_logp"``.  The expression is plain PyTensor, so it has a
    gradient.  (Because of the ``Flat`` variable the model has no prior predictive; use
    :func:`pymc_kameleon.models.targets.banana_sample` for exact draws.)

    Parameters
    ----------
    dim : int
        Dimension ``d >= 2`` (8 in Sejdinovic et al., 2014).
    b : float
        Twist (``0.03`` moderate, ``0.1`` strong).
    v : float
        Variance of the first coordinate.
    name : str
        Name of the vector variable.
    prior_sd : float, optional
        For SMC: ``x ~ N(0, prior_sd^2 I)`` instead of ``pm.Flat`` and the potential minus
        that log prior, so the posterior is still the normalised banana and the log
        evidence is 0 (the thesis' bridge starts at ``N(0, 50^2 I)``).

    Returns
    -------
    pymc.Model

    References
    ----------
    .. [1] Haario, H., Saksman, E., Tamminen, J. (1999). Adaptive proposal distribution for
       random walk Metropolis algorithm. Computational Statistics 14(3), 375-395.
    .. [2] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2.

    Examples
    --------
    >>> from pymc_kameleon.models.targets import banana_logp
    >>> model = banana_model(dim=3, b=0.1)
    >>> logp = model.compile_logp()
    >>> point = {"x": np.array([5.0, -7.0, 0.5])}
    >>> bool(np.isclose(logp(point), banana_logp(point["x"], b=0.1)))
    True
    """
    dim = check_integral("dim", dim, minimum=2)
    v = check_positive("v", v)
    b = float(b)
    with pm.Model() as model:
        x, log_prior = vector_variable(name, dim, np.zeros(dim), prior_sd)
        y1, y2 = x[0], x[1]
        twist = y2 - b * (y1**2 - v)
        rest = pt.sum(x[2:] ** 2)
        const = -0.5 * dim * LOG_2PI - 0.5 * np.log(v)
        pm.Potential(f"{name}_logp", -0.5 * (y1**2 / v + twist**2 + rest) + const - log_prior)
    return model


def gp_classification_model(
    X: ArrayLike,
    y: ArrayLike,
    n_importance: int = 100,
    prior_variance: float = 5.0,
    seed: int | None = None,
    name: str = "theta",
) -> pm.Model:
    """Pseudo-marginal posterior of GP-classification hyperparameters (KAMH paper, Sec. 5.1).

    ``theta_i = log l_i^2`` (one per input dimension) with prior ``N(0, prior_variance I)``;
    the likelihood ``p(y | theta)`` is replaced by the unbiased importance-sampling estimate
    of :class:`~.gpc.GPClassificationLikelihood` (Laplace proposal, ``n_importance``
    draws), added with :func:`pymc_kameleon.pseudo_marginal_potential`.  Sample it with a step
    method of this package, which keeps the current estimate (exact pseudo-marginal MCMC).

    Parameters
    ----------
    X : array, shape (n, d)
        Inputs (whitened, e.g. by :func:`pymc_kameleon.models.gpc.load_glass`).
    y : array, shape (n,)
        Labels in {-1, +1}.
    n_importance : int
        Importance samples per likelihood estimate.
    prior_variance : float
        Variance of the Gaussian prior on ``theta``.
    seed : int, optional
        Seed of the estimator outside the package's step methods (they reseed it per chain).
    name : str
        Name of the hyperparameter vector.

    Returns
    -------
    pymc.Model
        A model with one vector variable ``name`` of shape ``(d,)`` and the potential
        ``"log_likelihood"``.  It has no gradient: sample it with a step of this package.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.1.
    .. [2] Filippone, M., Girolami, M. (2014). Pseudo-marginal Bayesian inference for
       Gaussian processes. IEEE TPAMI 36(11), 2214-2226.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> model = gp_classification_model(X, y, n_importance=10, seed=1)
    >>> bool(np.isfinite(model.compile_logp()({"theta": np.zeros(2)})))
    True
    """
    from ..pseudo_marginal import pseudo_marginal_potential
    from .gpc import GPClassificationLikelihood

    likelihood = GPClassificationLikelihood(
        np.asarray(X, dtype=float), np.asarray(y), n_importance=n_importance,
        prior_variance=prior_variance,
    )
    with pm.Model() as model:
        theta = pm.Normal(name, 0.0, np.sqrt(prior_variance), shape=likelihood.n_dim)
        pseudo_marginal_potential("log_likelihood", likelihood, theta, seed=seed)
    return model
