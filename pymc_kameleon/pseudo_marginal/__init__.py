"""Pseudo-marginal likelihoods: a user's likelihood *estimator* as a PyMC potential.

A pseudo-marginal Metropolis-Hastings chain that replaces the likelihood by a non-negative
unbiased estimate targets the exact posterior, provided the estimate at the current point
is *stored* and reused until a proposal is accepted (Andrieu and Roberts, 2009).  The step
methods of this package do exactly that.  PyMC's Metropolis, DEMetropolisZ and Slice
re-evaluate the current point every iteration ("Monte Carlo within Metropolis"), which is
biased; :func:`~pymc_kameleon.pseudo_marginal_potential` warns when such a step is built for
a model that contains an estimator.

* :mod:`.potential`: :func:`~pymc_kameleon.pseudo_marginal_potential`, an estimator as a
  potential of a PyMC model;
* :mod:`.op`: :class:`LikelihoodEstimatorOp`, the Python Op that calls the estimator, on
  PyTensor's C and Python virtual machines and, in object mode, on Numba;
* :mod:`.compiling`: :func:`compiling_for`, the sampler a log density is compiled for, and
  the :class:`PseudoMarginalWarning` for one that is not exact;
* :mod:`.graphs`: the estimator Ops of a compiled function, inner graphs included
  (:func:`find_estimators`), their generators replaced (:func:`reseed_estimators`), saved
  and restored (:func:`estimator_states`, :func:`set_estimator_states`).

Which backends run an estimator, and how its seeds and saved states work on each, is told in
:doc:`/pseudo_marginal` ("Compiled backends, seeds and saved states").  Every name is
importable from ``pymc_kameleon.pseudo_marginal`` itself.

References
----------
- Andrieu, Roberts (2009). The pseudo-marginal approach for efficient Monte Carlo
  computations. Annals of Statistics 37(2).
- Filippone, Girolami (2014). Pseudo-marginal Bayesian inference for Gaussian processes.
  IEEE TPAMI 36(11).
"""

from .compiling import PseudoMarginalWarning, compiling_for
from .graphs import estimator_states, find_estimators, reseed_estimators, set_estimator_states
from .op import LikelihoodEstimatorOp
from .potential import pseudo_marginal_potential

__all__ = [
    "LikelihoodEstimatorOp",
    "PseudoMarginalWarning",
    "compiling_for",
    "estimator_states",
    "find_estimators",
    "pseudo_marginal_potential",
    "reseed_estimators",
    "set_estimator_states",
]
