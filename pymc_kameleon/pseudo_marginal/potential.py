"""A likelihood estimator added to a PyMC model as a potential."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymc as pm

from .op import LikelihoodEstimatorOp

__all__ = ["pseudo_marginal_potential"]


def pseudo_marginal_potential(
    name: str,
    estimator: Callable[..., Any],
    *params,
    seed=None,
    model: pm.Model | None = None,
):
    """Add a likelihood *estimator* to a PyMC model as a potential.

    Parameters
    ----------
    name : str
        Name of the potential.
    estimator : callable
        ``estimator(*param_values, rng) -> float or array``: the log of a non-negative,
        unbiased estimate of the likelihood at the given parameter values (NumPy arrays, on
        the constrained scale as the user defined them).  Array outputs are summed.  ``rng``
        is a :class:`numpy.random.Generator`; use it for *all* randomness.  ``-inf`` (an
        estimate of zero) is a rejected proposal; so is NaN, but the steps of this package
        also count it (sample stat ``n_nan``) and report it, as they do an exception with
        ``on_error="reject"`` (see ``docs/robustness.md`` for what either does to
        exactness).
    *params : PyMC variables or tensors
        The parameters passed to the estimator.
    seed : int, optional
        Seed of the estimator's generator before a step method of this package reseeds it
        from ``pm.sample(random_seed=...)`` (it matters only when evaluating the model
        outside such a step).
    model : pymc.Model, optional
        Taken from the context if not given.

    Returns
    -------
    TensorVariable
        The potential.

    Notes
    -----
    The potential has no gradient, so NUTS cannot be used.  PyMC's Metropolis, DEMetropolisZ
    and Slice re-estimate the current point and are therefore biased for such a model; a
    :class:`~pymc_kameleon.PseudoMarginalWarning` is issued when one of them is built for it.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2), 697-725.
    .. [2] Filippone, M., Girolami, M. (2014). Pseudo-marginal Bayesian inference for
       Gaussian processes. IEEE TPAMI 36(11), 2214-2226.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> def noisy_loglik(mu, rng):  # log of an unbiased estimate of N(1.0 | mu, 1)
    ...     noise = rng.normal(0.0, 0.5)
    ...     return -0.5 * (1.0 - mu) ** 2 - 0.5 * np.log(2 * np.pi) + noise - 0.125
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     loglik = pseudo_marginal_potential("loglik", noisy_loglik, mu, seed=1)
    >>> float(model.compile_logp()({"mu": 0.0})) < 0
    True
    """
    model = pm.modelcontext(model)
    op = LikelihoodEstimatorOp(estimator, name, seed=seed)
    return pm.Potential(name, op(*params), model=model)
