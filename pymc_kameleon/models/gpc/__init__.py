"""Pseudo-marginal Gaussian-process classification: the UCI Glass benchmark.

The target of Section 5.1 of Sejdinovic et al. (2014): the posterior ``p(theta | y)`` of the
ARD lengthscales of a Gaussian-process classifier with logistic likelihood, whose intractable
marginal likelihood ``p(y | theta)`` is replaced by the unbiased importance-sampling estimate
of Filippone & Girolami (2014).  The model and the estimator are written out in
:doc:`/pseudo_marginal`.

* :mod:`.glass`: the data (:func:`load_glass`, :func:`whiten`);
* :mod:`.latent`: the latent function's prior covariance (:func:`ard_kernel`) and the
  Laplace approximation of its posterior, the estimate's importance density
  (:func:`laplace_approximation`, :class:`LaplaceApproximation`);
* :mod:`.likelihood`: the estimator (:class:`GPClassificationLikelihood`), with the
  signature ``(theta, rng) -> float`` expected by
  :func:`pymc_kameleon.pseudo_marginal_potential`.

Everything here is plain NumPy/SciPy (no PyMC import); every name is importable from
``pymc_kameleon.models.gpc`` itself.

References
----------
- M. Filippone and M. Girolami, "Pseudo-marginal Bayesian inference for Gaussian
  processes", IEEE Trans. Pattern Anal. Mach. Intell. 36(11), 2014.
- C. E. Rasmussen and C. K. I. Williams, *Gaussian Processes for Machine Learning*,
  MIT Press, 2006, Section 3.4 (Algorithms 3.1 and 3.2).
- D. Sejdinovic, H. Strathmann, M. Lomeli Garcia, C. Andrieu and A. Gretton, "Kernel
  adaptive Metropolis-Hastings", ICML 2014, Section 5.1.
"""

from .glass import GLASS_ENV_VAR, load_glass, whiten
from .latent import LaplaceApproximation, ard_kernel, laplace_approximation
from .likelihood import GPClassificationLikelihood

__all__ = [
    "GLASS_ENV_VAR",
    "GPClassificationLikelihood",
    "LaplaceApproximation",
    "ard_kernel",
    "laplace_approximation",
    "load_glass",
    "whiten",
]
