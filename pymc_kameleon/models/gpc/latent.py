"""The GP classifier's latent function: its prior covariance and Laplace approximation.

:func:`ard_kernel` is the prior covariance ``K_theta`` of the latent values ``f``;
:func:`laplace_approximation` approximates ``p(f | y, theta)`` by Newton's method in the
stable form of Rasmussen & Williams, the importance density of the likelihood estimate.

References
----------
- C. E. Rasmussen and C. K. I. Williams, *Gaussian Processes for Machine Learning*,
  MIT Press, 2006, Sections 3.4 (Algorithms 3.1 and 3.2) and 5.1.
- M. Filippone and M. Girolami, "Pseudo-marginal Bayesian inference for Gaussian
  processes", IEEE Trans. Pattern Anal. Mach. Intell. 36(11), 2014.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import linalg as sla
from scipy.linalg import blas
from scipy.spatial.distance import pdist, squareform
from scipy.special import expit

__all__ = ["LaplaceApproximation", "ard_kernel", "laplace_approximation"]

_LOG_2PI = float(np.log(2.0 * np.pi))


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


def _log_lik(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``sum_a log sigmoid(y_a f_a)`` along axis 0 (``f`` of shape (n,) or (n, m))."""
    yf = y.reshape((-1,) + (1,) * (np.ndim(f) - 1)) * f
    return -np.sum(np.logaddexp(0.0, -yf), axis=0)


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
