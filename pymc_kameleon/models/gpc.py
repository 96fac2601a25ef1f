"""Pseudo-marginal Gaussian-process classification: the UCI Glass benchmark.

This module provides the target of Section 5.1 of Sejdinovic et al. (2014): the marginal
posterior ``p(theta | y) ∝ p(y | theta) p(theta)`` of the ARD lengthscales of a Gaussian-process
classifier with logistic likelihood.  The marginal likelihood ``p(y | theta)`` is intractable
and is replaced by the unbiased importance-sampling estimate of Filippone & Girolami (2014),

.. math::

    \\hat p(y \\mid \\theta) = \\frac{1}{N} \\sum_{i=1}^N
        \\frac{p(y \\mid f_i)\\, \\mathcal N(f_i; 0, K_\\theta)}{q(f_i)},
    \\qquad f_i \\sim q,

where ``q`` is the Laplace approximation of ``p(f | y, theta)``.  Plugging the (log of the)
estimate into a pseudo-marginal MCMC step gives a chain whose stationary distribution is the
exact posterior ``p(theta | y)``.

Model (all conventions of the reference implementation):

* ``f | theta ~ N(0, K_theta)``, ``(K_theta)_ab = exp(-0.5 sum_i (x_ai - x_bi)^2 / l_i^2)`` plus a
  jitter of ``1e-3`` on the diagonal, ``theta_i = log l_i^2``;
* ``p(y_a | f_a) = 1 / (1 + exp(-y_a f_a))`` with ``y_a in {-1, +1}``;
* ``theta ~ N(0, 5 I)`` (variance 5).

Everything here is plain NumPy/SciPy (no PyMC import); the estimator has the signature
``(theta, rng) -> float`` expected by :func:`pymc_kameleon.pseudo_marginal_potential`.

References
----------
- M. Filippone and M. Girolami, "Pseudo-marginal Bayesian inference for Gaussian
  processes", IEEE Trans. Pattern Anal. Mach. Intell. 36(11), 2014.
- C. E. Rasmussen and C. K. I. Williams, *Gaussian Processes for Machine Learning*,
  MIT Press, 2006, Section 3.4 (Algorithms 3.1 and 3.2).
- D. Sejdinovic, H. Strathmann, M. Lomeli Garcia, C. Andrieu and A. Gretton, "Kernel
  adaptive Metropolis-Hastings", ICML 2014, Section 5.1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
from scipy import linalg as sla
from scipy.linalg import blas
from scipy.spatial.distance import pdist, squareform
from scipy.special import expit

__all__ = [
    "GLASS_ENV_VAR",
    "GPClassificationLikelihood",
    "LaplaceApproximation",
    "ard_kernel",
    "laplace_approximation",
    "load_glass",
    "whiten",
]

#: Environment variable that may point at ``glass.data``.
GLASS_ENV_VAR = "PYMC_KAMELEON_GLASS"

_LOG_2PI = float(np.log(2.0 * np.pi))

# Exceptions that signal a numerical failure for one value of theta (never a usage error).
_NUMERICAL_ERRORS = (np.linalg.LinAlgError, FloatingPointError, ZeroDivisionError, OverflowError)


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
def whiten(X: np.ndarray) -> np.ndarray:
    """Centre the columns of ``X`` and decorrelate them with the inverse Cholesky factor.

    With ``C = L L^T`` the sample covariance (``ddof=1``) of the rows of ``X`` and ``mu`` their
    mean, row ``x`` is mapped to ``L^{-1} (x - mu)``, so the returned matrix has zero mean and
    identity sample covariance.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Data matrix, one observation per row (``n > d``).

    Returns
    -------
    ndarray, shape (n, d)
        The whitened data.

    Raises
    ------
    ValueError
        If ``X`` is not a finite 2-d array or its covariance is singular (e.g. a constant column).

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.1 (the Glass features
       are whitened before the GP is fitted, as in the reference implementation).

    Examples
    --------
    >>> import numpy as np
    >>> mix = np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    >>> Z = whiten(np.random.default_rng(0).normal(size=(50, 3)) @ mix)
    >>> bool(np.allclose(Z.mean(axis=0), 0)), bool(np.allclose(np.cov(Z, rowvar=False), np.eye(3)))
    (True, True)
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be a 2-d array with at least two rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains non-finite values")
    centred = X - X.mean(axis=0)
    cov = np.atleast_2d(np.cov(centred, rowvar=False))
    try:
        chol = sla.cholesky(cov, lower=True)
    except np.linalg.LinAlgError as err:
        raise ValueError(
            "the covariance of X is singular (constant or collinear columns?); cannot whiten"
        ) from err
    return sla.solve_triangular(chol, centred.T, lower=True).T


def load_glass(path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load UCI Glass as the binary window / non-window problem of Sejdinovic et al. (2014).

    Parameters
    ----------
    path : str or path-like, optional
        Location of ``glass.data`` (comma-separated: id, 9 features, class 1..7; no header).
        If omitted, the environment variable ``PYMC_KAMELEON_GLASS`` is used.

    Returns
    -------
    X : ndarray, shape (214, 9)
        The features, whitened by :func:`whiten`.
    y : ndarray of int, shape (214,)
        ``+1`` for window glass (classes 1-4, 163 cases), ``-1`` otherwise (51 cases).

    Raises
    ------
    FileNotFoundError
        If the file does not exist (or no path is given and the variable is unset).
    ValueError
        If the file cannot be parsed as the Glass data set.

    References
    ----------
    .. [1] German, B. (1987). Glass Identification. UCI Machine Learning Repository.
    .. [2] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.1.

    Examples
    --------
    A file in the UCI format (here a made-up one with 12 rows):

    >>> import os, tempfile
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> classes = [1, 2, 5, 7, 3, 6, 1, 2, 4, 7, 1, 5]
    >>> rows = np.column_stack([np.arange(1, 13), rng.normal(size=(12, 9)), classes])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "glass.data")
    ...     np.savetxt(path, rows, delimiter=",")
    ...     X, y = load_glass(path)
    >>> X.shape, y.tolist()
    ((12, 9), [1, 1, -1, -1, 1, -1, 1, 1, 1, -1, 1, -1])
    """
    if path is None:
        env = os.environ.get(GLASS_ENV_VAR)
        if not env:
            raise FileNotFoundError(
                f"no path given and the environment variable {GLASS_ENV_VAR} is not set; "
                "pass the location of the UCI 'glass.data' file"
            )
        path = env
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"UCI Glass data file not found: {str(path)!r} (expected the comma-separated "
            "'glass.data' from the UCI repository, e.g. shared/data/glass.data)"
        )
    try:
        raw = np.loadtxt(path, delimiter=",", dtype=float, ndmin=2)
    except ValueError as err:
        raise ValueError(
            f"could not parse {str(path)!r} as comma-separated numbers: {err}"
        ) from err
    if raw.shape[1] != 11:
        raise ValueError(
            f"{str(path)!r} has {raw.shape[1]} columns; the Glass data has 11 "
            "(id, 9 features, class)"
        )
    if not np.all(np.isfinite(raw)):
        raise ValueError(f"{str(path)!r} contains non-finite values")
    classes = raw[:, 10]
    if np.any(classes != np.round(classes)) or np.any((classes < 1) | (classes > 7)):
        raise ValueError(f"{str(path)!r}: the class column must hold integers 1..7")
    y = np.where(classes <= 4, 1, -1).astype(int)
    return whiten(raw[:, 1:10]), y


# ---------------------------------------------------------------------------------------------
# Kernel
# ---------------------------------------------------------------------------------------------
def ard_kernel(X: np.ndarray, theta: np.ndarray, jitter: float = 1e-3) -> np.ndarray:
    """ARD squared-exponential Gram matrix with unit signal variance, plus diagonal jitter.

    ``K_ab = exp(-0.5 sum_i (x_ai - x_bi)^2 / l_i^2) + jitter * [a == b]`` with
    ``theta_i = log l_i^2``.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Inputs.
    theta : array_like, shape (d,)
        Log squared lengthscales.
    jitter : float, default 1e-3
        Added to the diagonal (part of the model, as in the reference implementation).

    Returns
    -------
    ndarray, shape (n, n)
        Symmetric positive-definite (for ``jitter > 0``) covariance matrix.  For absurd
        ``theta`` (``|theta_i| > ~700``) the result may contain non-finite entries.

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Section 5.1, eq. (5.2) (automatic relevance determination).

    Examples
    --------
    >>> import numpy as np
    >>> K = ard_kernel(np.array([[0.0], [1.0]]), np.array([0.0]), jitter=0.0)
    >>> bool(np.isclose(K[0, 1], np.exp(-0.5)))
    True
    """
    X = np.asarray(X, dtype=float)
    theta = np.asarray(theta, dtype=float).reshape(-1)
    if X.ndim != 2 or X.shape[1] != theta.size:
        raise ValueError(f"X must have shape (n, {theta.size}) to match theta, got {np.shape(X)}")
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = X * np.exp(-0.5 * theta)
        sq = squareform(pdist(scaled, "sqeuclidean")) if X.shape[0] > 1 else np.zeros((1, 1))
        K = np.exp(-0.5 * sq)
    K[np.diag_indices_from(K)] += jitter
    return K


# ---------------------------------------------------------------------------------------------
# Laplace approximation
# ---------------------------------------------------------------------------------------------
def _log_lik(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``sum_a log sigmoid(y_a f_a)`` along axis 0 (``f`` of shape (n,) or (n, m))."""
    yf = y.reshape((-1,) + (1,) * (np.ndim(f) - 1)) * f
    return -np.sum(np.logaddexp(0.0, -yf), axis=0)


def _log_mean_exp(log_w: np.ndarray) -> float:
    """``log(mean(exp(log_w)))`` without under/overflow (log-sum-exp with the maximum shift)."""
    m = float(np.max(log_w))
    if not np.isfinite(m):  # all weights zero (-inf), or a NaN/+inf that is caught upstream
        return m
    return m + float(np.log(np.mean(np.exp(log_w - m))))


@dataclass(eq=False)
class LaplaceApproximation:
    """Laplace approximation ``q(f) = N(f_hat, (K^{-1} + W)^{-1})`` of ``p(f | y, theta)``.

    Produced by :func:`laplace_approximation`.  Sampling uses the factorisation
    ``Sigma = L_K A^{-1} L_K^T`` with ``K = L_K L_K^T`` and ``A = I + L_K^T W L_K = L_A L_A^T``
    (``A`` has the same spectrum as ``B``, so it is as well conditioned), computed lazily the
    first time it is needed.

    Parameters
    ----------
    f_hat : ndarray, shape (n,)
        Posterior mode of ``f``.
    a : ndarray, shape (n,)
        ``K^{-1} f_hat`` (equal to the gradient of ``log p(y | f)`` at the mode).
    W : ndarray, shape (n,)
        Diagonal of ``-grad^2 log p(y | f)`` at the mode (``pi (1 - pi)`` for the logistic).
    L_B : ndarray, shape (n, n)
        Lower Cholesky factor of ``B = I + W^{1/2} K W^{1/2}`` at the mode.
    log_marginal : float
        Laplace approximation of ``log p(y | theta)`` (GPML eq. 3.32).
    n_iter : int
        Newton iterations used.
    converged : bool
        Whether the objective change fell below the tolerance within ``max_iter`` iterations.
    K, y : ndarray
        The prior covariance and labels the approximation was computed for.

    All parameters are stored as attributes of the same names.

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Section 3.4 (Algorithms 3.1 and 3.2).
    .. [2] Filippone, M., Girolami, M. (2014). Pseudo-marginal Bayesian inference for
       Gaussian processes. IEEE TPAMI 36(11) (the Laplace approximation as importance
       density).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.linspace(-1, 1, 5)[:, None]
    >>> la = laplace_approximation(ard_kernel(X, np.zeros(1)), np.array([-1, -1, 1, 1, 1]))
    >>> la.n, la.sample(3, rng=0).shape
    (5, (3, 5))
    >>> bool(np.allclose(la.cov, la.cov.T))
    True
    """

    f_hat: np.ndarray
    a: np.ndarray
    W: np.ndarray
    L_B: np.ndarray
    log_marginal: float
    n_iter: int
    converged: bool
    K: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)

    @property
    def n(self) -> int:
        """Number of latent values."""
        return self.f_hat.size

    @cached_property
    def _factors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """``(L_K, L_A, L_K^{-1} f_hat, sum log diag L_A)``."""
        L_K = sla.cholesky(self.K, lower=True, check_finite=False)
        sWL = np.sqrt(self.W)[:, None] * L_K
        # A = I + (W^{1/2} L_K)^T (W^{1/2} L_K); only the lower triangle is formed and read.
        A = blas.dsyrk(1.0, sWL, beta=1.0, c=np.eye(self.n), trans=1, lower=1)
        L_A = sla.cholesky(A, lower=True, check_finite=False)
        v_hat = sla.solve_triangular(L_K, self.f_hat, lower=True, check_finite=False)
        return L_K, L_A, v_hat, float(np.sum(np.log(np.diag(L_A))))

    @property
    def cov(self) -> np.ndarray:
        """Covariance ``(K^{-1} + W)^{-1} = K - K W^{1/2} B^{-1} W^{1/2} K`` (formed densely)."""
        sW = np.sqrt(self.W)
        V = sla.solve_triangular(self.L_B, sW[:, None] * self.K, lower=True, check_finite=False)
        return self.K - V.T @ V

    def _draw_standard(self, size: int, rng: np.random.Generator):
        """Draw ``z ~ N(0, I)``, shape (n, size); return ``(f, z, v)`` with ``v = L_K^{-1} f``."""
        L_K, L_A, v_hat, _ = self._factors
        z = rng.standard_normal((self.n, size))
        # f = f_hat + L_K L_A^{-T} z  has covariance L_K A^{-1} L_K^T = Sigma.
        w = sla.solve_triangular(L_A, z, lower=True, trans="T", check_finite=False)
        v = v_hat[:, None] + w
        f = blas.dtrmm(1.0, L_K, v, lower=1)  # L_K @ v, exploiting the triangular shape
        return f, z, v

    def sample(self, size: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Draw ``size`` samples from ``q``; returns an array of shape ``(size, n)``."""
        f, _, _ = self._draw_standard(int(size), np.random.default_rng(rng))
        return f.T

    def log_q(self, f: np.ndarray) -> np.ndarray:
        """Log density of ``q`` at ``f`` (shape ``(n,)`` or ``(m, n)``)."""
        L_K, L_A, _, logdet_A = self._factors
        F = np.atleast_2d(np.asarray(f, dtype=float))
        u = sla.solve_triangular(L_K, (F - self.f_hat).T, lower=True, check_finite=False)
        z = L_A.T @ u
        # log|Sigma| = 2 sum log diag L_K - 2 sum log diag L_A.
        logdet_sigma = 2.0 * np.sum(np.log(np.diag(L_K))) - 2.0 * logdet_A
        out = -0.5 * (self.n * _LOG_2PI + logdet_sigma + np.sum(z * z, axis=0))
        return out if np.ndim(f) > 1 else out[0]

    def log_prior_f(self, f: np.ndarray) -> np.ndarray:
        """Log density of the GP prior ``N(f; 0, K)`` at ``f`` (shape ``(n,)`` or ``(m, n)``)."""
        L_K = self._factors[0]
        F = np.atleast_2d(np.asarray(f, dtype=float))
        v = sla.solve_triangular(L_K, F.T, lower=True, check_finite=False)
        logdet_K = 2.0 * np.sum(np.log(np.diag(L_K)))
        out = -0.5 * (self.n * _LOG_2PI + logdet_K + np.sum(v * v, axis=0))
        return out if np.ndim(f) > 1 else out[0]

    def log_importance_weights(
        self, size: int, rng: np.random.Generator | int | None = None
    ) -> np.ndarray:
        """Log importance weights ``log p(y|f) + log N(f; 0, K) - log q(f)`` of draws ``f ~ q``.

        All draws are made in one matrix operation.  ``log|K|`` cancels between prior and
        proposal, leaving ``log p(y|f) - 0.5 |L_K^{-1} f|^2 + 0.5 |z|^2 - log|L_A|``.
        """
        f, z, v = self._draw_standard(int(size), np.random.default_rng(rng))
        logdet_A = self._factors[3]
        return (
            _log_lik(self.y, f)
            - 0.5 * np.sum(v * v, axis=0)
            + 0.5 * np.sum(z * z, axis=0)
            - logdet_A
        )


def laplace_approximation(
    K: np.ndarray, y: np.ndarray, tol: float = 1e-9, max_iter: int = 100
) -> LaplaceApproximation:
    """Laplace approximation of ``p(f | y) ∝ prod_a sigmoid(y_a f_a) N(f; 0, K)``.

    Newton's method in the numerically stable form of Rasmussen & Williams (2006,
    Algorithm 3.1): with ``W = -grad^2 log p(y|f)`` and ``B = I + W^{1/2} K W^{1/2} = L L^T``,

    ``b = W f + grad log p(y|f)``, ``a = b - W^{1/2} L^{-T} L^{-1} W^{1/2} K b``, ``f = K a``,

    so no inverse of the (possibly ill-conditioned) ``K`` is ever formed.  A step that does not
    increase the objective ``Psi(f) = log p(y|f) - a^T f / 2`` is halved (back-tracking in
    ``a``), which makes the iteration robust for extreme kernels.

    Parameters
    ----------
    K : ndarray, shape (n, n)
        Prior covariance of ``f`` (positive definite, e.g. from :func:`ard_kernel`).
    y : ndarray, shape (n,)
        Labels in ``{-1, +1}``.
    tol : float, default 1e-9
        Stop when the objective increases by less than ``tol * (1 + |Psi|)``.
    max_iter : int, default 100
        Maximum number of Newton iterations.

    Returns
    -------
    LaplaceApproximation
        Mode, Newton quantities, log-marginal approximation and a sampler/density for ``q``.

    Raises
    ------
    numpy.linalg.LinAlgError
        If a Cholesky factorisation fails (``K`` not positive definite or non-finite).

    References
    ----------
    C. E. Rasmussen and C. K. I. Williams, *Gaussian Processes for Machine Learning*, MIT
    Press, 2006, Algorithms 3.1 and 3.2 and eq. (3.32).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.linspace(-1, 1, 5)[:, None]
    >>> la = laplace_approximation(ard_kernel(X, np.zeros(1)), np.array([-1, -1, 1, 1, 1]))
    >>> la.converged, bool(np.all(np.sign(la.f_hat[[0, 4]]) == [-1, 1]))
    (True, True)
    """
    K = np.asarray(K, dtype=float)
    y = np.asarray(y, dtype=float).reshape(-1)
    n = y.size
    if K.shape != (n, n):
        raise ValueError(f"K must have shape ({n}, {n}), got {K.shape}")
    if not np.all(np.isfinite(K)):
        raise np.linalg.LinAlgError("K contains non-finite entries")
    t = 0.5 * (y + 1.0)  # targets in {0, 1}
    diag = np.diag_indices(n)

    def newton_quantities(f):
        pi = expit(f)
        W = pi * (1.0 - pi)
        sW = np.sqrt(W)
        B = sW[:, None] * K * sW[None, :]
        B[diag] += 1.0
        L = sla.cholesky(B, lower=True, check_finite=False)
        return W, sW, L, t - pi

    f = np.zeros(n)
    a = np.zeros(n)
    psi = float(_log_lik(y, f))
    W, sW, L, grad = newton_quantities(f)
    converged = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        b = W * f + grad
        c = sla.cho_solve((L, True), sW * (K @ b), check_finite=False)
        a_new = b - sW * c
        step = a_new - a
        psi_old = psi
        for _ in range(60):  # back-tracking on the Newton direction
            f_try = K @ a_new
            psi_try = float(-0.5 * a_new @ f_try + _log_lik(y, f_try))
            if np.isfinite(psi_try) and psi_try >= psi_old - 1e-12 * (1.0 + abs(psi_old)):
                break
            step *= 0.5
            a_new = a + step
        else:
            raise np.linalg.LinAlgError("Laplace Newton iteration failed to increase the objective")
        a, f, psi = a_new, f_try, psi_try
        # Newton quantities at the new iterate: used by the next step or, on convergence,
        # for the log marginal and the Laplace covariance (W evaluated at the mode).
        W, sW, L, grad = newton_quantities(f)
        if psi - psi_old < tol * (1.0 + abs(psi)):
            converged = True
            break

    # Newton iterate a (f = K a); at the exact mode a = K^{-1} f = grad log p(y|f).
    log_marginal = float(-0.5 * a @ f + _log_lik(y, f) - np.sum(np.log(np.diag(L))))
    if not np.isfinite(log_marginal):
        raise np.linalg.LinAlgError("non-finite Laplace log marginal likelihood")
    return LaplaceApproximation(
        f_hat=f,
        a=a,
        W=W,
        L_B=L,
        log_marginal=log_marginal,
        n_iter=n_iter,
        converged=converged,
        K=K,
        y=y,
    )


# ---------------------------------------------------------------------------------------------
# Pseudo-marginal likelihood
# ---------------------------------------------------------------------------------------------
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
