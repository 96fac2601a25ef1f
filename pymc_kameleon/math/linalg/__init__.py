"""Robust Cholesky factorisation and a small Gaussian density/sampler built on it.

* :mod:`.cholesky`: :func:`safe_cholesky` (jitter when a matrix is not numerically positive
  definite), :func:`ridge_solves` for a path of ridges, the rank-``r`` update
  :func:`cholesky_update` and the local-Gaussian factor :func:`gaussian_factor`;
* :mod:`.gaussian`: :class:`MultivariateNormal`, :class:`BatchedMultivariateNormal` and
  :func:`gaussian_logpdf`, the proposal densities of the step methods;
* :mod:`.lowrank`: :func:`lowrank_root` (truncated eigendecomposition), its warm-started
  :func:`refine_lowrank_root` and :func:`orthonormalise`.

This package is their one import path.
"""

from .cholesky import cholesky_update, gaussian_factor, ridge_solves, safe_cholesky
from .gaussian import BatchedMultivariateNormal, MultivariateNormal, gaussian_logpdf
from .lowrank import lowrank_root, orthonormalise, refine_lowrank_root

__all__ = [
    "BatchedMultivariateNormal",
    "MultivariateNormal",
    "cholesky_update",
    "gaussian_factor",
    "gaussian_logpdf",
    "lowrank_root",
    "orthonormalise",
    "refine_lowrank_root",
    "ridge_solves",
    "safe_cholesky",
]
