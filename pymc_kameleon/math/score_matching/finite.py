"""KMC finite: a score-matching surrogate on random Fourier features, updated online."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.linalg import cho_solve

from ..compiled import cholesky_update, rff_leapfrog
from ..linalg import ridge_solves, safe_cholesky
from ..rff import RandomFourierFeatures
from .cross_validation import _finite_or_inf

__all__ = ["FiniteScoreEstimator"]

_CHUNK = 512  # rows per block when accumulating feature-derivative sums


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
