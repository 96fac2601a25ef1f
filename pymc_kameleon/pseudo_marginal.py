"""Pseudo-marginal likelihoods: a user's likelihood *estimator* as a PyMC potential.

A pseudo-marginal Metropolis-Hastings chain that replaces the likelihood by a non-negative
unbiased estimate targets the exact posterior, provided the estimate at the current point
is *stored* and reused until a proposal is accepted (Andrieu and Roberts, 2009).  The step
methods of this package do exactly that.  PyMC's Metropolis, DEMetropolisZ and Slice
re-evaluate the current point every iteration ("Monte Carlo within Metropolis"), which is
biased; :func:`~pymc_kameleon.pseudo_marginal_potential` warns when such a step is built for
a model that contains an estimator.

References
----------
- Andrieu, Roberts (2009). The pseudo-marginal approach for efficient Monte Carlo
  computations. Annals of Statistics 37(2).
- Filippone, Girolami (2014). Pseudo-marginal Bayesian inference for Gaussian processes.
  IEEE TPAMI 36(11).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

__all__ = [
    "LikelihoodEstimatorOp",
    "PseudoMarginalWarning",
    "pseudo_marginal_potential",
    "reseed_estimators",
]


class PseudoMarginalWarning(UserWarning):
    """A step method that is not exact for likelihood estimators is being used with one.

    Issued when a step method that re-evaluates the log density at the current point every
    iteration (PyMC's ``Metropolis``, ``DEMetropolisZ``, ``Slice``, ...) compiles a model that
    contains a :func:`~pymc_kameleon.pseudo_marginal_potential`.  Such a chain re-estimates the
    current likelihood ("Monte Carlo within Metropolis") and does not target the exact
    posterior.
    The step methods of this package never trigger it.  Turn it into an error with
    ``warnings.simplefilter("error", PseudoMarginalWarning)``.

    Parameters
    ----------
    *args
        The message, as for every :class:`Warning`.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2), 697-725 (Section 2.2 and
       Table 1 compare it with Monte Carlo within Metropolis).

    Examples
    --------
    >>> import warnings
    >>> import pymc as pm
    >>> from pymc_kameleon import PseudoMarginalWarning, pseudo_marginal_potential
    >>> def noisy_loglik(mu, rng):
    ...     return -0.5 * mu**2 + 0.3 * rng.normal() - 0.045
    >>> with pm.Model():
    ...     mu = pm.Normal("mu")
    ...     lik = pseudo_marginal_potential("lik", noisy_loglik, mu)
    ...     with warnings.catch_warnings(record=True) as caught:
    ...         warnings.simplefilter("always")
    ...         step = pm.Metropolis()
    >>> any(issubclass(w.category, PseudoMarginalWarning) for w in caught)
    True
    """


class LikelihoodEstimatorOp(Op):
    """PyTensor Op that calls ``estimator(*param_values, rng)`` and sums the result.

    The Op owns a :class:`numpy.random.Generator`; the step methods of this package replace
    it per chain (see :func:`reseed_estimators`), so runs are reproducible from
    ``pm.sample(random_seed=...)`` and different chains get different randomness.  It has no
    gradient.  A NaN estimate is returned as ``-inf`` (a rejected proposal).  Usually built
    by :func:`~pymc_kameleon.pseudo_marginal_potential` rather than directly.

    Parameters
    ----------
    estimator : callable
        ``estimator(*param_values, rng) -> float or array``, the log of a non-negative
        unbiased likelihood estimate; array outputs are summed.
    name : str
        Shown in printed graphs and in warnings.
    seed : int or numpy.random.Generator, optional
        Seed of the Op's own generator.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2).

    Examples
    --------
    Every evaluation is a new, independent estimate, even at the same point:

    >>> import numpy as np, pytensor, pytensor.tensor as pt
    >>> def noisy_loglik(x, rng):  # log-normal noise with E[exp(noise)] = 1
    ...     return -0.5 * x**2 + rng.normal() - 0.5
    >>> op = LikelihoodEstimatorOp(noisy_loglik, "lik", seed=0)
    >>> x = pt.dscalar("x")
    >>> f = pytensor.function([x], op(x))
    >>> bool(f(1.0) != f(1.0))
    True
    """

    def __init__(self, estimator: Callable[..., Any], name: str, seed=None):
        self.estimator = estimator
        self.name = name
        self.rng = np.random.default_rng(seed)

    def __str__(self) -> str:
        return f"LikelihoodEstimator{{{self.name}}}"

    def make_node(self, *inputs):
        inputs = [pt.as_tensor_variable(x) for x in inputs]
        return Apply(self, inputs, [pt.dscalar()])

    def perform(self, node, inputs, output_storage):
        with np.errstate(all="ignore"):
            value = float(np.sum(self.estimator(*inputs, self.rng)))
        output_storage[0][0] = np.asarray(value if not np.isnan(value) else -np.inf)

    def grad(self, inputs, output_gradients):
        comment = (
            f"The pseudo-marginal likelihood {self.name!r} is an estimator and has no "
            "gradient: sample it with a gradient-free step such as KameleonStep, "
            "FastKameleonStep or KernelHMCStep."
        )
        return [grad_not_implemented(self, i, x, comment) for i, x in enumerate(inputs)]

    def make_thunk(self, node, storage_map, compute_map, no_recycling, impl=None):
        _warn_if_inexact_step(self.name)
        return super().make_thunk(node, storage_map, compute_map, no_recycling, impl=impl)


def _warn_if_inexact_step(name: str) -> None:
    """Warn if a PyMC step that re-estimates the current point is compiling us."""
    from pymc.step_methods.compound import BlockedStep

    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, BlockedStep):
            if not getattr(owner, "exact_for_pseudo_marginal", False):
                warnings.warn(
                    f"{type(owner).__name__} re-evaluates the log density at the current point "
                    f"every iteration, so the likelihood estimator {name!r} is re-estimated "
                    "there (Monte Carlo within Metropolis) and the chain does NOT target the "
                    "exact posterior. Use KameleonStep, FastKameleonStep or KernelHMCStep, "
                    "which store the current estimate.",
                    PseudoMarginalWarning,
                    stacklevel=2,
                )
            return
        frame = frame.f_back


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
        is a :class:`numpy.random.Generator`; use it for *all* randomness.  NaN counts as
        ``-inf`` (a rejected proposal).
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


def reseed_estimators(fn, rng: np.random.Generator) -> int:
    """Give every estimator Op in a compiled PyTensor function a generator drawn from ``rng``.

    The step methods of this package call it from ``set_rng``, so that the likelihood
    estimates of a chain are reproducible from ``pm.sample(random_seed=...)`` and differ
    between chains.

    Parameters
    ----------
    fn : pytensor.compile.function.types.Function
        A compiled function (e.g. ``model.compile_logp().f``).
    rng : numpy.random.Generator
        Source of the new seeds.

    Returns
    -------
    int
        The number of :class:`LikelihoodEstimatorOp` nodes reseeded (visited in topological
        order, so the result is deterministic).

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu")
    ...     lik = pseudo_marginal_potential("lik", lambda mu, rng: rng.normal() - 0.5, mu)
    >>> logp = model.compile_logp()
    >>> reseed_estimators(logp.f, np.random.default_rng(1))
    1
    """
    count = 0
    for node in fn.maker.fgraph.toposort():
        if isinstance(node.op, LikelihoodEstimatorOp):
            node.op.rng = np.random.default_rng(rng.integers(2**63))
            count += 1
    return count
