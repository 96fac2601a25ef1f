"""Constant-memory summaries of a growing chain history.

* :class:`OnlineMeanCov`: Welford's running mean and (maximum-likelihood) covariance.
* :class:`Reservoir`: a uniform random subsample of fixed size of everything seen so far.
* :class:`WeightedReservoir`: a weighted one (each point with its own weight).

Both use ``O(capacity)`` memory and ``O(1)``-in-``t`` work per new point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["OnlineMeanCov", "Reservoir", "WeightedReservoir"]


@dataclass
class OnlineMeanCov:
    """Running mean and covariance (divisor ``n``) by Welford's algorithm.

    Parameters
    ----------
    dim : int
        Dimension of the points.
    count : int or float, default 0
        Number of points seen, the sum of their weights (leave at 0).

    References
    ----------
    .. [1] Welford, B. P. (1962). Note on a method for calculating corrected sums of squares
       and products. Technometrics 4(3), 419-420.
    .. [2] Chan, T. F., Golub, G. H., LeVeque, R. J. (1983). Algorithms for computing the
       sample variance: analysis and recommendations. The American Statistician 37(3),
       242-247 (pairwise combination, :meth:`update_batch`).
    .. [3] Kotlicki, A. (2015). Fast Kernel Adaptive Metropolis-Hastings Algorithm. MSc
       dissertation, University of Oxford, Section 4.1.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(1).normal(size=(50, 3))
    >>> acc = OnlineMeanCov(3)
    >>> for x in X:
    ...     acc.update(x)
    >>> bool(np.allclose(acc.cov, np.cov(X.T, bias=True)))
    True
    """

    dim: int
    count: int = 0
    mean: np.ndarray = field(init=False)
    _m2: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.mean = np.zeros(self.dim)
        self._m2 = np.zeros((self.dim, self.dim))

    def update(self, x: np.ndarray) -> None:
        """Add one point: ``O(dim^2)``."""
        self.count += 1
        delta = x - self.mean
        self.mean += delta / self.count
        self._m2 += np.outer(delta, x - self.mean)

    def update_batch(self, X: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Add the rows of ``X`` at once (Chan et al.'s pairwise combination).

        ``weights`` are frequency weights: row ``i`` counts as ``weights[i]`` copies of
        itself (a Metropolis-Hastings chain repeats its position after every rejection,
        so a history stored as distinct points with their multiplicities gives the same
        moments for a fraction of the work).
        """
        X = np.atleast_2d(X)
        if X.shape[0] == 0:
            return
        w = np.ones(X.shape[0]) if weights is None else np.asarray(weights, dtype=float)
        m = float(w.sum())
        mean_b = (w @ X) / m
        Xc = X - mean_b
        m2_b = (Xc * w[:, None]).T @ Xc
        n = self.count
        delta = mean_b - self.mean
        total = n + m
        self.mean = self.mean + delta * (m / total)
        m2_b += np.multiply.outer(delta * (n * m / total), delta)
        self._m2 += m2_b  # in place: (dim, dim) temporaries cost more than the product
        self.count = total

    @property
    def cov(self) -> np.ndarray:
        """Covariance with divisor ``count`` (zeros before the first point)."""
        m2 = self._m2 + self._m2.T
        m2 *= 0.5 / self.count if self.count else 0.5
        return m2


@dataclass
class _Subsample:
    """Storage of a fixed-size subsample of a stream (``seen``: points offered so far)."""

    capacity: int
    dim: int
    seen: int = 0
    _data: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"{type(self).__name__} capacity must be at least 1")
        self._data = np.empty((self.capacity, self.dim))

    @property
    def points(self) -> np.ndarray:
        """The current subsample, shape ``(min(seen, capacity), dim)`` (a copy)."""
        return self._data[: min(self.seen, self.capacity)].copy()


@dataclass
class Reservoir(_Subsample):
    """Uniform random subsample (without replacement) of a stream of points.

    Algorithm R (Vitter 1985): after ``t`` points each of them is in the reservoir with
    probability ``min(1, capacity / t)``.

    Parameters
    ----------
    capacity : int
        Maximum number of points kept (``>= 1``).
    dim : int
        Dimension of the points.
    seen : int, default 0
        Number of points offered so far (leave at 0).

    References
    ----------
    .. [1] Vitter, J. S. (1985). Random sampling with a reservoir. ACM Transactions on
       Mathematical Software 11(1), 37-57.

    Examples
    --------
    >>> import numpy as np
    >>> res = Reservoir(capacity=3, dim=1)
    >>> rng = np.random.default_rng(0)
    >>> for i in range(10):
    ...     res.add(np.array([float(i)]), rng)
    >>> res.points.shape, res.seen
    ((3, 1), 10)
    """

    _arrival: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._arrival = np.empty(self.capacity, dtype=np.int64)

    def add(self, x: np.ndarray, rng: np.random.Generator) -> None:
        """Offer one point to the reservoir."""
        if self.seen < self.capacity:
            j = self.seen
        else:
            j = int(rng.integers(self.seen + 1))
        if j < self.capacity:
            self._data[j] = x
            self._arrival[j] = self.seen
        self.seen += 1

    @property
    def points_in_order(self) -> np.ndarray:
        """The subsample sorted by arrival time (a copy)."""
        k = min(self.seen, self.capacity)
        return self._data[:k][np.argsort(self._arrival[:k], kind="stable")]

    def clear(self) -> None:
        self.seen = 0


@dataclass
class WeightedReservoir(_Subsample):
    """Weighted random subsample (without replacement) of a stream of points.

    Algorithm A-Res (Efraimidis and Spirakis 2006): each point gets the key
    ``log(E) - log_weight`` with ``E ~ Exp(1)`` and the ``capacity`` smallest keys are kept
    (the log form of keeping the largest ``u^(1/w)``: no overflow for any weight).  With
    capacity 1 a point is kept with probability ``w_i / sum(w)``; equal weights give a
    uniform subsample, as :class:`Reservoir`.

    Parameters
    ----------
    capacity, dim : int
        As for :class:`Reservoir`.

    References
    ----------
    .. [1] Efraimidis, P. S., Spirakis, P. G. (2006). Weighted random sampling with a
       reservoir. Information Processing Letters 97(5), 181-185.

    Examples
    --------
    >>> import numpy as np
    >>> res = WeightedReservoir(capacity=2, dim=1)
    >>> rng = np.random.default_rng(0)
    >>> for i in range(10):
    ...     res.add(np.array([float(i)]), 0.0 if i < 9 else 50.0, rng)
    >>> bool(9.0 in res.points)  # a weight e^50 times the others': always kept
    True
    """

    _keys: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._keys = np.full(self.capacity, np.inf)

    def add(self, x: np.ndarray, log_weight: float, rng: np.random.Generator) -> None:
        """Offer one point with weight ``exp(log_weight)`` (``O(capacity)`` work)."""
        key = float(np.log(rng.standard_exponential()) - log_weight)
        j = self.seen if self.seen < self.capacity else int(np.argmax(self._keys))
        if key < self._keys[j] or self.seen < self.capacity:
            self._data[j], self._keys[j] = x, key
        self.seen += 1
