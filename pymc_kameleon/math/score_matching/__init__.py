"""Score-matching estimators of an unnormalised log density (the kernel-HMC surrogates).

Both estimators minimise the empirical score-matching objective (Hyvarinen 2005), eq. (2.9)
of the thesis,

    J(f) = (1/n) sum_i sum_l [ d^2 f / dx_l^2 (x_i) + 1/2 (d f / dx_l (x_i))^2 ],

which is quadratic in the coefficients of ``f``, so fitting is a linear solve.

* :class:`LiteScoreEstimator` (KMC lite): ``f(x) = sum_i alpha_i k(x, z_i)`` on the fitted
  points ``z_i``; gradients vanish away from the data.
* :class:`FiniteScoreEstimator` (KMC finite): ``f(x) = theta . phi(x)`` with random Fourier
  features; sums over all data can be updated online in ``O(d m^2)`` per point.
* :func:`cross_validate`: choose the bandwidth and regularisation by the held-out objective.

Public signatures use the bandwidth ``s`` of ``k(x, y) = exp(-||x - y||^2 / (2 s^2))``; the
thesis writes ``exp(-||x - y||^2 / sigma)``, i.e. ``sigma = 2 s^2``.

This package is their one import path: the lite estimator is in :mod:`.lite`, the finite
one in :mod:`.finite`, the grid search in :mod:`.cross_validation`.

References
----------
- Strathmann (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Chapter 4
  (Propositions 3 and 4, Sections 4.5 and 4.6).
- Strathmann, Sejdinovic, Livingstone, Szabo, Gretton (2015). Gradient-free Hamiltonian
  Monte Carlo with efficient kernel exponential families. NIPS.
"""

from .cross_validation import CVResult, cross_validate
from .finite import FiniteScoreEstimator
from .lite import LiteScoreEstimator

__all__ = ["CVResult", "FiniteScoreEstimator", "LiteScoreEstimator", "cross_validate"]
