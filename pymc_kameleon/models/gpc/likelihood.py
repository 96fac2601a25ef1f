"""The unbiased importance-sampling estimator of the GP classifier's marginal likelihood.

References
----------
- M. Filippone and M. Girolami, "Pseudo-marginal Bayesian inference for Gaussian
  processes", IEEE Trans. Pattern Anal. Mach. Intell. 36(11), 2014.
- D. Sejdinovic, H. Strathmann, M. Lomeli Garcia, C. Andrieu and A. Gretton, "Kernel
  adaptive Metropolis-Hastings", ICML 2014, Section 5.1.
"""

from __future__ import annotations

import numpy as np

from .latent import LaplaceApproximation, ard_kernel, laplace_approximation

__all__ = ["GPClassificationLikelihood"]

# Exceptions that signal a numerical failure for one value of theta (never a usage error).
_NUMERICAL_ERRORS = (np.linalg.LinAlgError, FloatingPointError, ZeroDivisionError, OverflowError)


def _log_mean_exp(log_w: np.ndarray) -> float:
    """``log(mean(exp(log_w)))`` without under/overflow (log-sum-exp with the maximum shift)."""
    m = float(np.max(log_w))
    if not np.isfinite(m):  # all weights zero (-inf), or a NaN/+inf that is caught upstream
        return m
    return m + float(np.log(np.mean(np.exp(log_w - m))))


class GPClassificationLikelihood:
    """Unbiased importance-sampling estimator of the GP-classification marginal likelihood.

    Estimates ``p(y | theta) = ∫ prod_a sigmoid(y_a f_a) N(f; 0, K_theta) df`` by

    ``p^(y|theta) = (1/N) sum_i p(y|f_i) N(f_i; 0, K_theta) / q(f_i)``, ``f_i ~ q``,

    with ``q`` the Laplace approximation of ``p(f | y, theta)`` (Filippone & Girolami, 2014),
    computed in log space with log-sum-exp.  ``exp`` of :meth:`log_likelihood_estimate` is
    unbiased for ``p(y | theta)``, which is what pseudo-marginal MCMC requires.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Inputs (e.g. whitened, see :func:`load_glass`).
    y : ndarray, shape (n,)
        Labels in ``{-1, +1}``.
    n_importance : int, default 100
        Number ``N`` of importance samples per estimate.
    jitter : float, default 1e-3
        Diagonal jitter added to ``K_theta`` (part of the model).
    prior_variance : float, default 5.0
        Variance of the ``N(0, prior_variance I)`` prior on ``theta``.

    Notes
    -----
    Calling the object, ``lik(theta, rng)``, is the same as ``lik.log_likelihood_estimate(theta,
    rng)``, so it can be passed directly to :func:`pymc_kameleon.pseudo_marginal_potential`.
    Numerical failures (overflow, a failed Cholesky factorisation, non-finite ``theta``) give
    ``-inf`` (the proposal is then rejected) rather than an exception.  The Laplace fit for the
    most recent ``theta`` is cached; it is deterministic, so repeated estimates at the same
    point are still independent.

    References
    ----------
    .. [1] M. Filippone and M. Girolami, "Pseudo-marginal Bayesian inference for Gaussian
       processes", IEEE TPAMI 36(11), 2014.
    .. [2] C. E. Rasmussen and C. K. I. Williams, *Gaussian Processes for Machine Learning*,
       MIT Press, 2006, Section 3.4.
    .. [3] D. Sejdinovic et al., "Kernel adaptive Metropolis-Hastings", ICML 2014, Section 5.1.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 2))
    >>> y = np.where(X[:, 0] + 0.3 * rng.normal(size=30) > 0, 1, -1)
    >>> lik = GPClassificationLikelihood(X, y, n_importance=50)
    >>> theta = np.zeros(2)
    >>> est = lik(theta, np.random.default_rng(1))
    >>> bool(np.isfinite(est)), bool(abs(est - lik.laplace_log_marginal(theta)) < 1.0)
    (True, True)
    >>> est == lik.log_likelihood_estimate(theta, np.random.default_rng(1))
    True
    >>> round(lik.log_prior(theta), 3)  # -d/2 log(2 pi 5)
    -3.447
    """

    def __init__(
        self,
        X: np.ndarray,
        y: np.ndarray,
        n_importance: int = 100,
        jitter: float = 1e-3,
        prior_variance: float = 5.0,
    ) -> None:
        X = np.array(X, dtype=float)
        y = np.asarray(y).reshape(-1)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-d array, got shape {X.shape}")
        if y.size != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.size} labels")
        if not np.all(np.isin(y, (-1, 1))):
            raise ValueError("labels y must be -1 or +1")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains non-finite values")
        if int(n_importance) < 1:
            raise ValueError("n_importance must be a positive integer")
        if not jitter >= 0:
            raise ValueError("jitter must be non-negative")
        if not prior_variance > 0:
            raise ValueError("prior_variance must be positive")
        self.X = X
        self.y = y.astype(float)
        self.n_importance = int(n_importance)
        self.jitter = float(jitter)
        self.prior_variance = float(prior_variance)
        self._cache: tuple[bytes, LaplaceApproximation] | None = None

    @property
    def n_dim(self) -> int:
        """Dimension of ``theta`` (number of input features)."""
        return self.X.shape[1]

    def _theta(self, theta) -> np.ndarray:
        theta = np.asarray(theta, dtype=float).reshape(-1)
        if theta.size != self.n_dim:
            raise ValueError(f"theta must have {self.n_dim} entries, got {theta.size}")
        return theta

    def kernel(self, theta: np.ndarray) -> np.ndarray:
        """Prior covariance ``K_theta`` (with jitter), see :func:`ard_kernel`.

        All other methods obtain the covariance from here, so a subclass may override it
        (e.g. to add a signal variance).
        """
        return ard_kernel(self.X, self._theta(theta), self.jitter)

    def laplace(self, theta: np.ndarray) -> LaplaceApproximation:
        """Laplace approximation of ``p(f | y, theta)`` (cached for the last ``theta``).

        Raises :class:`numpy.linalg.LinAlgError` on numerical failure.
        """
        theta = self._theta(theta)
        key = theta.tobytes()
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        if not np.all(np.isfinite(theta)):
            raise np.linalg.LinAlgError("non-finite theta")
        with np.errstate(over="ignore", under="ignore"):
            approx = laplace_approximation(self.kernel(theta), self.y)
        self._cache = (key, approx)
        return approx

    def laplace_log_marginal(self, theta: np.ndarray) -> float:
        """Deterministic Laplace approximation of ``log p(y | theta)`` (``-inf`` on failure)."""
        try:
            return self.laplace(theta).log_marginal
        except _NUMERICAL_ERRORS:
            return -np.inf

    def log_likelihood_estimate(
        self,
        theta: np.ndarray,
        rng: np.random.Generator | int | None = None,
        n_importance: int | None = None,
    ) -> float:
        """Log of the unbiased importance-sampling estimate ``p^(y | theta)``.

        Parameters
        ----------
        theta : array_like, shape (d,)
            Log squared lengthscales.
        rng : numpy.random.Generator or seed, optional
            Source of the importance draws.
        n_importance : int, optional
            Overrides the number of importance samples for this call.

        Returns
        -------
        float
            ``log p^(y | theta)``; ``-inf`` if the computation fails numerically.
        """
        theta = self._theta(theta)
        N = self.n_importance if n_importance is None else int(n_importance)
        if N < 1:
            raise ValueError("n_importance must be a positive integer")
        rng = np.random.default_rng(rng)
        try:
            approx = self.laplace(theta)
            with np.errstate(over="ignore", under="ignore"):
                log_w = approx.log_importance_weights(N, rng)
            value = _log_mean_exp(log_w)
        except _NUMERICAL_ERRORS:
            return -np.inf
        if np.isnan(value) or value == np.inf:
            return -np.inf
        return value

    def __call__(self, theta: np.ndarray, rng: np.random.Generator | int | None = None) -> float:
        """Same as :meth:`log_likelihood_estimate` (the ``(theta, rng) -> float`` estimator)."""
        return self.log_likelihood_estimate(theta, rng)

    def log_prior(self, theta: np.ndarray) -> float:
        """Log density of the prior ``theta ~ N(0, prior_variance * I)``."""
        theta = self._theta(theta)
        v = self.prior_variance
        return float(-0.5 * (theta.size * np.log(2.0 * np.pi * v) + theta @ theta / v))

    def log_posterior_estimate(
        self, theta: np.ndarray, rng: np.random.Generator | int | None = None
    ) -> float:
        """``log_prior(theta) + log_likelihood_estimate(theta, rng)`` (unnormalised)."""
        return self.log_prior(theta) + self.log_likelihood_estimate(theta, rng)
