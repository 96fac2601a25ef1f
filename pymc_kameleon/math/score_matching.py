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

References
----------
- Strathmann (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Chapter 4
  (Propositions 3 and 4, Sections 4.5 and 4.6).
- Strathmann, Sejdinovic, Livingstone, Szabo, Gretton (2015). Gradient-free Hamiltonian
  Monte Carlo with efficient kernel exponential families. NIPS.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.linalg import cho_solve
from scipy.spatial.distance import cdist

from .compiled import cholesky_update, rff_leapfrog
from .hmc import leapfrog
from .linalg import ridge_solves, safe_cholesky
from .rff import RandomFourierFeatures

__all__ = ["CVResult", "FiniteScoreEstimator", "LiteScoreEstimator", "cross_validate"]

_CHUNK = 512  # rows per block when accumulating feature-derivative sums


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


class _Estimator(Protocol):
    def fit(self, X: np.ndarray) -> _Estimator: ...

    def score_matching_loss(self, X_test: np.ndarray) -> float: ...


def _finite_or_inf(value: float) -> float:
    return float(value) if np.isfinite(value) else np.inf


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


class FiniteScoreEstimator:
    """KMC finite: ``f(x) = theta . phi(x)`` with random Fourier features ``phi``.

    Proposition 4 of the thesis (Section 4.2.2, proof and online updates in 4.6).  With
    ``b = mean_i phi(x_i) * ||omega_j||^2`` (elementwise over features ``j``) and
    ``C = mean_i sum_l dphi/dx_l (x_i) dphi/dx_l (x_i)^T``, the empirical objective is
    ``0.5 theta.C.theta - theta.b`` and :meth:`fit` returns ``theta = (C + lam I)^{-1} b``,
    the minimiser of the objective plus ``lam/2 ||theta||^2``.

    Internally the sums ``Cbar = n C`` and ``bbar = n b`` are kept together with the lower
    Cholesky factor of ``Cbar + lam * n_fit * I``, where ``n_fit`` is the number of points of
    the last :meth:`fit`.  :meth:`update` adds points to the sums and updates the factor by a
    rank-``d`` Cholesky update in ``O(d m^2)`` (Section 4.6.3), keeping the ridge
    ``lam * n_fit`` fixed: afterwards ``theta = (Cbar + lam n_fit I)^{-1} bbar``.  So the prior
    strength is fixed when fitting and the relative regularisation shrinks as data arrive (a
    ridge proportional to ``n`` could not be updated by low-rank updates).  Calling
    :meth:`update` before any :meth:`fit` uses ``n_fit = 1`` (ridge ``lam``).

    Parameters
    ----------
    features : RandomFourierFeatures
        The basis ``phi`` (its bandwidth is the kernel bandwidth).
    lam : float
        Regularisation ``lambda >= 0`` (``> 0`` for :meth:`update` without :meth:`fit`).

    References
    ----------
    .. [1] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 4.2.2, Proposition 4 and Section 4.6 (online updates, 4.6.3).
    .. [2] Hyvarinen, A. (2005). Estimation of non-normalized statistical models by score
       matching. JMLR 6, 695-709.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> rff = RandomFourierFeatures.draw(dim=2, n_features=100, bandwidth=1.5, rng=rng)
    >>> X = rng.normal(size=(300, 2))
    >>> est = FiniteScoreEstimator(rff, lam=1e-3).fit(X[:200])
    >>> est.update(X[200:])  # online, O(d m^2) per point
    >>> est.n_seen
    300
    >>> g = est.grad(np.array([1.0, 0.0]))  # true score of N(0, I) is (-1, 0)
    >>> bool(g[0] < -0.5 and abs(g[1]) < 0.3)
    True
    """

    def __init__(self, features: RandomFourierFeatures, lam: float) -> None:
        self.features = features
        self.lam = float(lam)
        m = features.n_features
        self._omega_sq = features.omega_sq_norms()
        self._C_sum = np.zeros((m, m))
        self._b_sum = np.zeros(m)
        self._n_seen = 0
        self._n_fit = 0
        self._chol: np.ndarray | None = None
        self.theta = np.zeros(m)
        self._omega_t: np.ndarray | None = None  # frequencies transposed, for leapfrog

    @property
    def n_seen(self) -> int:
        """Number of points in the sums (fitted plus updated)."""
        return self._n_seen

    @property
    def ridge(self) -> float:
        """The ridge ``lam * n_fit`` added to ``Cbar``."""
        return self.lam * max(self._n_fit, 1)

    @property
    def cholesky_factor(self) -> np.ndarray | None:
        """Lower Cholesky factor of ``Cbar + ridge * I`` (``None`` before any data)."""
        return self._chol

    def _add_to_sums(self, X: np.ndarray) -> None:
        for start in range(0, X.shape[0], _CHUNK):
            rows = X[start : start + _CHUNK]
            V = self.features.jacobian_columns(rows)
            self._C_sum += V @ V.T
            self._b_sum += self.features.features(rows).sum(axis=0) * self._omega_sq
        self._n_seen += X.shape[0]

    def _solve(self) -> None:
        self.theta = cho_solve((self._chol, True), self._b_sum, check_finite=False)

    def fit(self, X: np.ndarray) -> FiniteScoreEstimator:
        """Batch fit on the rows of ``X``, discarding earlier data: ``O(n d m^2 + m^3)``."""
        X = np.array(X, dtype=float, ndmin=2)
        m = self.features.n_features
        self._C_sum = np.zeros((m, m))
        self._b_sum = np.zeros(m)
        self._n_seen = 0
        self._add_to_sums(X)
        self._n_fit = X.shape[0]
        A = self._C_sum.copy()
        A[np.diag_indices_from(A)] += self.ridge
        self._chol, _ = safe_cholesky(A)
        self._solve()
        return self

    def update(self, x: np.ndarray) -> None:
        """Add one point (shape ``(d,)``) or several rows: ``O(d m^2)`` per point.

        The sums and the Cholesky factor are updated by a rank-``d`` update per point; the
        factor is never recomputed from scratch.
        """
        X = np.array(x, dtype=float, ndmin=2)
        if self._chol is None:
            if self.lam <= 0.0:
                raise ValueError("update() before fit() needs lam > 0")
            self._chol = np.sqrt(self.lam) * np.eye(self.features.n_features)
        for start in range(0, X.shape[0], _CHUNK):
            rows = X[start : start + _CHUNK]
            V = self.features.jacobian_columns(rows)
            self._C_sum += V @ V.T
            self._b_sum += self.features.features(rows).sum(axis=0) * self._omega_sq
            cholesky_update(self._chol, np.ascontiguousarray(V))
        self._n_seen += X.shape[0]
        self._solve()

    def log_density(self, x: np.ndarray) -> float | np.ndarray:
        """Unnormalised log density ``theta . phi(x)``: float for ``(d,)``, ``(m,)`` for rows."""
        f = self.features.features(np.asarray(x, dtype=float)) @ self.theta
        return float(f) if np.ndim(f) == 0 else f

    def grad(self, x: np.ndarray) -> np.ndarray:
        """``J(x)^T theta``: shape ``(d,)`` for one point, ``(m, d)`` for rows."""
        J = self.features.jacobian(np.asarray(x, dtype=float))
        return np.einsum("...jl,j->...l", J, self.theta)

    def leapfrog(self, q: np.ndarray, p: np.ndarray, step_size: float | np.ndarray,
                 n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~pymc_kameleon.math.hmc.leapfrog` with :meth:`grad`, compiled
        (:func:`~pymc_kameleon.math.compiled.rff_leapfrog`: one call per trajectory
        instead of ``n_steps + 1`` NumPy gradients)."""
        if n_steps < 0:
            raise ValueError(f"n_steps must be >= 0, got {n_steps}")
        q = np.asarray(q, dtype=float)
        # always a new writable C array: a read-only view (broadcast_to of a (d,) step) is
        # another Numba type, which would be compiled again in the middle of a run
        step = np.empty(q.shape)
        step[...] = step_size
        if self._omega_t is None:
            self._omega_t = np.ascontiguousarray(self.features.omega.T)
        return rff_leapfrog(q, np.asarray(p, dtype=float), self._omega_t, self.features.phase,
                            self.theta, self.features.embedding == "sincos", step,
                            int(n_steps))

    def score_matching_loss(self, X_test: np.ndarray) -> float:
        """Held-out objective ``mean_x [Laplacian f(x) + |grad f(x)|^2 / 2]``.

        Equals ``0.5 theta.C_test.theta - theta.b_test`` (no regulariser); the Laplacian is
        ``-theta.(phi(x) * ||omega_j||^2)``.
        """
        X = np.array(X_test, dtype=float, ndmin=2)
        total = 0.0
        for start in range(0, X.shape[0], _CHUNK):
            rows = X[start : start + _CHUNK]
            g = self.grad(rows)
            lap = -(self.features.features(rows) * self._omega_sq) @ self.theta
            total += float(np.sum(lap) + 0.5 * np.sum(g * g))
        return total / X.shape[0]

    def lambda_path_losses(
        self, X: np.ndarray, folds: Sequence[np.ndarray], lams: Sequence[float]
    ) -> np.ndarray:
        """Held-out losses of these features for every ``lam``, without refitting per ``lam``.

        The sums ``Cbar`` and ``bbar`` of every fold are accumulated once (training sums are
        the total minus the fold's), so the feature Jacobians are computed once per point
        instead of once per point, fold and ``lam``; each ``lam`` then costs one ``m x m``
        Cholesky solve.  The held-out loss is ``0.5 theta.C_test.theta - theta.b_test`` with
        test means.  Entry ``[j, k]`` equals
        ``FiniteScoreEstimator(features, lams[j]).fit(X[train_k]).score_matching_loss(X[test_k])``
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
           Section 4.3 ("Free parameters"), Proposition 4 and Section 4.6.
        """
        X = np.array(X, dtype=float, ndmin=2)
        m = self.features.n_features
        sums = []
        with np.errstate(all="ignore"):
            for test in folds:
                C_k, b_k = np.zeros((m, m)), np.zeros(m)
                for start in range(0, len(test), _CHUNK):
                    rows = X[test[start : start + _CHUNK]]
                    V = self.features.jacobian_columns(rows)
                    C_k += V @ V.T
                    b_k += self.features.features(rows).sum(axis=0) * self._omega_sq
                sums.append((C_k, b_k, len(test)))
            C_all = sum(c for c, _, _ in sums)
            b_all = sum(b for _, b, _ in sums)
        out = np.full((len(lams), len(folds)), np.inf)
        n = X.shape[0]
        with np.errstate(all="ignore"):
            for k, (C_k, b_k, n_k) in enumerate(sums):
                C_train, b_train, n_train = C_all - C_k, b_all - b_k, n - n_k
                ridges = [float(lam) * max(n_train, 1) for lam in lams]
                for j, theta in enumerate(ridge_solves(C_train, b_train, ridges)):
                    if theta is not None:
                        loss = (0.5 * theta @ C_k @ theta - theta @ b_k) / n_k
                        out[j, k] = _finite_or_inf(loss)
        return out


@dataclass(frozen=True)
class CVResult:
    """Outcome of :func:`cross_validate`.

    ``losses[i, j]`` is the mean held-out loss for ``bandwidths[i]`` and ``lams[j]``
    (``inf`` where a fit failed or gave a non-finite loss).  If every entry is ``inf`` the
    first grid point is reported and ``best_loss`` is ``inf``.

    Parameters
    ----------
    best_bandwidth, best_lam : float
        The grid point with the smallest mean held-out loss.
    best_loss : float
        That loss.
    losses : ndarray, shape (len(bandwidths), len(lams))
        Mean held-out loss of every grid point.
    bandwidths, lams : ndarray
        The grid.

    References
    ----------
    .. [1] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 4.3 ("Free parameters").

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(1).normal(size=(60, 2))
    >>> res = cross_validate(X, [0.5, 2.0], [0.1, 1.0], LiteScoreEstimator, n_folds=3, rng=0)
    >>> res.losses.shape
    (2, 2)
    >>> bool(res.best_loss == res.losses.min())
    True
    """

    best_bandwidth: float
    best_lam: float
    best_loss: float
    losses: np.ndarray
    bandwidths: np.ndarray
    lams: np.ndarray


def cross_validate(
    X: np.ndarray,
    bandwidths: Sequence[float],
    lams: Sequence[float],
    make_estimator: Callable[[float, float], _Estimator],
    n_folds: int = 5,
    rng: np.random.Generator | int | None = None,
    shuffle: bool = True,
) -> CVResult:
    """Grid search of ``(bandwidth, lam)`` by k-fold held-out score-matching loss.

    Thesis Section 4.3 ("Free parameters"): the score-matching objective makes the
    hyperparameters learnable, unlike those of KAMH.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Data (e.g. the chain history or a subsample of it).
    bandwidths, lams : sequences of float
        The grid.
    make_estimator : callable
        ``make_estimator(bandwidth, lam)`` returns an unfitted estimator with ``fit`` and
        ``score_matching_loss``, e.g. ``LiteScoreEstimator`` or
        ``lambda s, lam: FiniteScoreEstimator(features.with_bandwidth(s), lam)``.
    n_folds : int
        Number of folds (``2 <= n_folds <= n``).
    rng : numpy.random.Generator, int or None
        Source of the random fold assignment.
    shuffle : bool
        ``True``: random folds.  ``False``: contiguous blocks of rows in the given order
        (blocked cross-validation).  Use the latter for rows in chain order: with random
        folds, the neighbours of a held-out point of an autocorrelated chain are in the
        training set, which rewards over-fitting (small bandwidths and regularisation).

    Returns
    -------
    CVResult

    Notes
    -----
    Estimators with a ``lambda_path_losses(X, folds, lams)`` method (both estimators of this
    module) are scored for all ``lams`` of a bandwidth at once from per-fold sufficient
    statistics: the same losses at a fraction of the cost (for the finite estimator one
    feature-Jacobian pass over ``X`` per bandwidth instead of one per fold and ``lam``).

    Use a grid around the data scale (e.g. the median heuristic times ``2^-3 .. 2^3``).  For
    bandwidths far below the data scale the held-out loss is heavy tailed (a test point that
    happens to land on a narrow bump of ``f`` contributes a large negative Laplacian), and the
    minimum over a grid can then pick such a bandwidth by chance; this was observed for the
    lite estimator with bandwidths of 1/30 of the data's standard deviation and below.  For a
    single Gaussian the lite loss decreases towards large bandwidths (a quadratic log density
    is their limit), so the optimum may lie at the upper end of the grid.

    References
    ----------
    .. [1] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 4.3 ("Free parameters").
    .. [2] Arlot, S., Celisse, A. (2010). A survey of cross-validation procedures for model
       selection. Statistics Surveys 4, 40-79 (Section 8.1, dependent data).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> X[:, 0] += rng.choice([-2.0, 2.0], size=100)  # two blobs
    >>> res = cross_validate(X, [0.3, 3.0, 30.0], [1.0], LiteScoreEstimator, n_folds=3, rng=0)
    >>> res.losses.shape, res.best_bandwidth
    ((3, 1), 3.0)
    """
    X = np.array(X, dtype=float, ndmin=2)
    n = X.shape[0]
    if not 2 <= n_folds <= n:
        raise ValueError(f"need 2 <= n_folds <= n, got n_folds={n_folds}, n={n}")
    rng = np.random.default_rng(rng)
    order = rng.permutation(n) if shuffle else np.arange(n)
    folds = np.array_split(order, n_folds)
    bws = np.asarray(bandwidths, dtype=float)
    lam_grid = np.asarray(lams, dtype=float)
    losses = np.zeros((bws.size, lam_grid.size))
    for i, s in enumerate(bws):
        path = getattr(make_estimator(float(s), float(lam_grid[0])), "lambda_path_losses", None)
        if path is not None:  # sufficient statistics shared by all lambdas of a bandwidth
            losses[i] = path(X, folds, lam_grid).mean(axis=1)
            continue
        for j, lam in enumerate(lam_grid):
            fold_losses = []
            for test in folds:
                train = np.setdiff1d(np.arange(n), test, assume_unique=True)
                try:
                    with np.errstate(all="ignore"):
                        est = make_estimator(float(s), float(lam))
                        loss = est.fit(X[train]).score_matching_loss(X[test])
                except (np.linalg.LinAlgError, ValueError, FloatingPointError):
                    loss = np.inf
                fold_losses.append(loss if np.isfinite(loss) else np.inf)
            losses[i, j] = np.mean(fold_losses)
    i, j = np.unravel_index(np.argmin(losses), losses.shape)
    return CVResult(float(bws[i]), float(lam_grid[j]), float(losses[i, j]), losses, bws, lam_grid)
