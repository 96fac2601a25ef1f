"""KMC lite: a score-matching surrogate of kernel functions on the fitted points."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.linalg import cho_solve
from scipy.spatial.distance import cdist

from ..hmc import leapfrog
from ..linalg import ridge_solves, safe_cholesky
from .cross_validation import _finite_or_inf

__all__ = ["LiteScoreEstimator"]


def _lite_system(Z: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray]:
    """``b`` and ``C`` of Proposition 3 for basis/data ``Z`` and bandwidth ``s``.

    ``b_i = sum_j K_ij ||z_i - z_j||^2 / s^2 - d sum_j K_ij`` and
    ``C_ij = sum_k K_ki K_kj (z_i - z_k) . (z_j - z_k)``; the latter equals the thesis'
    ``sum_l (D_l K - K D_l)(K D_l - D_l K)`` and is expanded into three ``n x n`` products
    (cost independent of ``d``).  Both are translation invariant, so ``Z`` is centred first.
    """
    Zc = Z - Z.mean(axis=0)
    d = Z.shape[1]
    sq = cdist(Zc, Zc, "sqeuclidean")
    K = np.exp(-sq / (2.0 * s**2))
    b = (K * sq).sum(axis=1) / s**2 - d * K.sum(axis=1)
    G = Zc @ Zc.T
    M = (K * G) @ K
    C = (K @ K) * G - M - M.T + (K * np.diag(G)) @ K
    return b, 0.5 * (C + C.T)


def _train_indices(n: int, test: np.ndarray) -> np.ndarray:
    return np.setdiff1d(np.arange(n), test, assume_unique=True)


class LiteScoreEstimator:
    """KMC lite: ``f(x) = sum_i alpha_i k(x, z_i)`` fitted by regularised score matching.

    :meth:`fit` uses the closed form of Proposition 3 (thesis Section 4.2.1, proof in 4.5.1),
    ``alpha = -(sigma/2) (C + lam I)^{-1} b`` with ``sigma = 2 s^2``.  This is the exact
    minimiser of ``J(alpha) + lam / (2 n s^4) ||alpha||^2`` (``= 2 lam / (n sigma^2)``), where
    ``J`` is the empirical objective on the ``n`` fitted points; the thesis' constant
    ``n sigma^2 lam / 2`` is a typo.  ``C`` and ``b`` are sums over points (not means), so the
    effective regularisation of a fixed ``lam`` weakens as ``n`` grows.  Cost ``O(n^3)``.

    Parameters
    ----------
    bandwidth : float
        Kernel bandwidth ``s``.
    lam : float
        Regularisation ``lambda >= 0`` of Proposition 3.

    Attributes
    ----------
    basis : ndarray, shape (n, d)
        The fitted points ``z_i`` (``None`` before :meth:`fit`).
    alpha : ndarray, shape (n,)
        Coefficients (``None`` before :meth:`fit`).

    References
    ----------
    .. [1] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 4.2.1, Proposition 3 and Section 4.5.1.
    .. [2] Hyvarinen, A. (2005). Estimation of non-normalized statistical models by score
       matching. JMLR 6, 695-709.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(200, 2))
    >>> est = LiteScoreEstimator(bandwidth=1.0, lam=0.1).fit(X)
    >>> g = est.grad(np.array([1.0, 0.0]))  # true score of N(0, I) is (-1, 0)
    >>> bool(g[0] < -0.5 and abs(g[1]) < 0.3)
    True
    """

    def __init__(self, bandwidth: float, lam: float) -> None:
        self.bandwidth = float(bandwidth)
        self.lam = float(lam)
        self.basis: np.ndarray | None = None
        self.alpha: np.ndarray | None = None

    def fit(self, X: np.ndarray) -> LiteScoreEstimator:
        """Fit to the rows of ``X`` (shape ``(n, d)``); they become the basis."""
        Z = np.array(X, dtype=float, ndmin=2)
        b, C = _lite_system(Z, self.bandwidth)
        C[np.diag_indices_from(C)] += self.lam
        L, _ = safe_cholesky(C)
        self.basis = Z
        self._centre = Z.mean(axis=0)
        self._Zc = Z - self._centre
        self.alpha = -(self.bandwidth**2) * cho_solve((L, True), b, check_finite=False)
        return self

    def _terms(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``f``, ``grad f`` (rows) and the Laplacian of ``f`` at the rows of ``X``."""
        if self.alpha is None:
            raise RuntimeError("LiteScoreEstimator: call fit() first")
        s2 = self.bandwidth**2
        Zc, Xc = self._Zc, X - self._centre
        sq = cdist(Xc, Zc, "sqeuclidean")
        K = np.exp(-sq / (2.0 * s2))
        f = K @ self.alpha
        grad = ((K * self.alpha) @ Zc - f[:, None] * Xc) / s2
        lap = (K * sq) @ self.alpha / s2**2 - X.shape[1] * f / s2
        return f, grad, lap

    def log_density(self, x: np.ndarray) -> float | np.ndarray:
        """Unnormalised log density ``f(x)``: a float for ``(d,)``, shape ``(m,)`` for rows."""
        x = np.asarray(x, dtype=float)
        f = self._terms(np.atleast_2d(x))[0]
        return float(f[0]) if x.ndim == 1 else f

    def grad(self, x: np.ndarray) -> np.ndarray:
        """``grad f(x)``: shape ``(d,)`` for one point, ``(m, d)`` for rows."""
        x = np.asarray(x, dtype=float)
        g = self._terms(np.atleast_2d(x))[1]
        return g[0] if x.ndim == 1 else g

    def leapfrog(self, q: np.ndarray, p: np.ndarray, step_size: float | np.ndarray,
                 n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~pymc_kameleon.math.hmc.leapfrog` with :meth:`grad`."""
        return leapfrog(q, p, self.grad, step_size, n_steps)

    def score_matching_loss(self, X_test: np.ndarray) -> float:
        """Empirical objective ``mean_x sum_l [d^2 f/dx_l^2 + (df/dx_l)^2 / 2]`` over ``X_test``.

        Evaluated directly from kernel derivatives (no regulariser): the held-out loss for
        :func:`cross_validate`.  On the fitted points it equals the thesis' closed form
        ``2/(n sigma) alpha.b + 2/(n sigma^2) alpha.C.alpha``.
        """
        _, grad, lap = self._terms(np.array(X_test, dtype=float, ndmin=2))
        return float(np.mean(lap + 0.5 * np.einsum("ij,ij->i", grad, grad)))

    def lambda_path_losses(
        self, X: np.ndarray, folds: Sequence[np.ndarray], lams: Sequence[float]
    ) -> np.ndarray:
        """Held-out losses of this bandwidth for every ``lam``, without refitting per ``lam``.

        For each fold, ``b`` and ``C`` of Proposition 3 on the training rows and the kernel
        between test and training rows are computed once; each ``lam`` then costs one
        Cholesky solve.  Entry ``[j, k]`` equals
        ``LiteScoreEstimator(s, lams[j]).fit(X[train_k]).score_matching_loss(X[test_k])``
        (``inf`` where that fails or is not finite).

        Parameters
        ----------
        X : ndarray, shape (n, d)
            Data.
        folds : sequence of int arrays
            Test rows of each fold; the other rows train.
        lams : sequence of float
            Regularisation values.

        Returns
        -------
        ndarray, shape (len(lams), len(folds))

        References
        ----------
        .. [1] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
           Section 4.3 ("Free parameters") and Proposition 3.
        """
        X = np.array(X, dtype=float, ndmin=2)
        n, d = X.shape
        s2 = self.bandwidth**2
        out = np.full((len(lams), len(folds)), np.inf)
        for k, test in enumerate(folds):
            Z = X[_train_indices(n, test)]
            try:
                with np.errstate(all="ignore"):
                    b, C = _lite_system(Z, self.bandwidth)
                    centre = Z.mean(axis=0)
                    Zc, Xc = Z - centre, X[test] - centre
                    sq = cdist(Xc, Zc, "sqeuclidean")
                    K = np.exp(-sq / (2.0 * s2))
                    Ksq = K * sq
            except (np.linalg.LinAlgError, ValueError, FloatingPointError):
                continue
            with np.errstate(all="ignore"):
                for j, x in enumerate(ridge_solves(C, b, [float(lam) for lam in lams])):
                    if x is None:
                        continue
                    alpha = -s2 * x
                    f = K @ alpha
                    grad = ((K * alpha) @ Zc - f[:, None] * Xc) / s2
                    lap = Ksq @ alpha / s2**2 - d * f / s2
                    loss = np.mean(lap + 0.5 * np.einsum("ij,ij->i", grad, grad))
                    out[j, k] = _finite_or_inf(loss)
        return out
