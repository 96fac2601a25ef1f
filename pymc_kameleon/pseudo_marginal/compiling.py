"""The sampler a log density is compiled for, and the warning when it is not exact.

A :class:`~pymc_kameleon.pseudo_marginal.LikelihoodEstimatorOp` checks, when its graph is
compiled, the sampler named by :func:`compiling_for`; unless that sampler stores the current
estimate it issues the :class:`PseudoMarginalWarning`.

References
----------
- Andrieu, Roberts (2009). The pseudo-marginal approach for efficient Monte Carlo
  computations. Annals of Statistics 37(2).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .op import LikelihoodEstimatorOp

__all__ = ["PseudoMarginalWarning", "compiling_for"]


class PseudoMarginalWarning(UserWarning):
    """A likelihood estimator may be used by a step method that is not exact for it.

    Issued when a log density that contains a
    :func:`~pymc_kameleon.pseudo_marginal_potential` is compiled other than for a sampler
    that stores the current estimate (:func:`compiling_for`): by a step method that
    re-evaluates the log density at the current point every iteration (PyMC's
    ``Metropolis``, ``DEMetropolisZ``, ``Slice``, ...), whose chain re-estimates the current
    likelihood ("Monte Carlo within Metropolis") and does not target the exact posterior, or
    for another use (``model.compile_logp()``, PyMC's SMC kernels), where it does no harm.
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


#: The sampler a log density is being compiled for (:func:`compiling_for`), else None.
_COMPILING_FOR: ContextVar[Any] = ContextVar("pymc_kameleon_compiling_for", default=None)


@contextmanager
def compiling_for(sampler) -> Iterator[None]:
    """Compile, inside the block, log densities for ``sampler``.

    A :class:`LikelihoodEstimatorOp` compiled inside the block issues no
    :class:`PseudoMarginalWarning` if ``sampler`` stores the current estimate (its attribute
    ``exact_for_pseudo_marginal`` is true), and names ``sampler`` in the warning otherwise.
    The step methods of this package compile their log density inside it; compiled outside
    it (PyMC's steps cannot say what they are), an estimator warns.  The state is a context
    variable, so threads compiling at the same time do not see each other's.

    Parameters
    ----------
    sampler : object
        The step method (or other sampler) the compiled functions are for.

    Examples
    --------
    >>> import warnings
    >>> import pymc as pm
    >>> from pymc_kameleon import pseudo_marginal_potential
    >>> class StoresEstimates:
    ...     exact_for_pseudo_marginal = True
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu")
    ...     lik = pseudo_marginal_potential("lik", lambda mu, rng: rng.normal() - 0.5, mu)
    >>> with warnings.catch_warnings(), compiling_for(StoresEstimates()):
    ...     warnings.simplefilter("error", PseudoMarginalWarning)
    ...     logp = model.compile_logp()
    """
    token = _COMPILING_FOR.set(sampler)
    try:
        yield
    finally:
        _COMPILING_FOR.reset(token)


def _warn_if_inexact_step(op: LikelihoodEstimatorOp) -> None:
    """Warn unless ``op`` is compiled for a sampler that stores the current estimate."""
    if op.copied:  # a pickled or copied graph: checked where it was compiled first
        return
    sampler = _COMPILING_FOR.get()
    if getattr(sampler, "exact_for_pseudo_marginal", False):
        return
    advice = ("Use KameleonStep, FastKameleonStep, KernelHMCStep or RandomWalkStep, which "
              "store the current estimate")
    if sampler is None:  # PyMC's steps, but also model.compile_logp() or PyMC's SMC
        message = (
            f"The likelihood estimator {op.name!r} is compiled other than for a sampler that "
            "stores the current estimate. A step method that re-evaluates the log density "
            "at the current point every iteration (PyMC's Metropolis, DEMetropolisZ and "
            "Slice do) re-estimates the likelihood there (Monte Carlo within Metropolis), "
            f"and its chain does NOT target the exact posterior. {advice} (compiled for "
            "another use, e.g. model.compile_logp() or PyMC's SMC, it does no harm).")
    else:
        message = (
            f"{type(sampler).__name__} re-evaluates the log density at the current point "
            f"every iteration, so the likelihood estimator {op.name!r} is re-estimated "
            "there (Monte Carlo within Metropolis) and the chain does NOT target the exact "
            f"posterior. {advice}.")
    warnings.warn(
        message,
        PseudoMarginalWarning,
        stacklevel=2,
    )
