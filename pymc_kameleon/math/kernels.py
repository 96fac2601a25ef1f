"""Gaussian kernel, its gradient, and the median-heuristic bandwidth.

Convention: ``k(x, y) = exp(-||x - y||^2 / (2 s^2))`` with bandwidth ``s > 0``.

References
----------
- Sejdinovic, Strathmann, Lomeli Garcia, Andrieu, Gretton (2014). Kernel Adaptive
  Metropolis-Hastings. ICML, Section 4.3 ("Gaussian kernel").
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist, pdist

__all__ = [
    "check_bandwidth",
    "distinct_rows",
    "exact_median",
    "gaussian_kernel",
    "gaussian_kernel_grad",
    "gaussian_kernel_grads",
    "median_heuristic",
]


def check_bandwidth(bandwidth: float | None) -> float | None:
    """A user's fixed kernel bandwidth as a float (``None``: chosen by the sampler).

    Raises ``ValueError`` unless it is ``None`` or a finite positive number.

    Examples
    --------
    >>> check_bandwidth(2), check_bandwidth(None)
    (2.0, None)
    """
    if bandwidth is None:
        return None
    if not (np.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"bandwidth must be a positive number, got {bandwidth!r}")
    return float(bandwidth)


def gaussian_kernel(X: np.ndarray, Y: np.ndarray, bandwidth: float) -> np.ndarray:
    """Gaussian kernel matrix ``K[i, j] = k(X[i], Y[j])``.

    Parameters
    ----------
    X : ndarray, shape (n, d)
    Y : ndarray, shape (m, d)
    bandwidth : float
        Kernel bandwidth ``s``.

    Returns
    -------
    ndarray, shape (n, m)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 4.3.

    Examples
    --------
    >>> import numpy as np
    >>> float(gaussian_kernel(np.zeros((1, 2)), np.ones((1, 2)), 1.0)[0, 0])  # exp(-1)
    0.36787944117144233
    """
    X = np.atleast_2d(X)
    Y = np.atleast_2d(Y)
    sq = cdist(X, Y, "sqeuclidean")
    return np.exp(-sq / (2.0 * bandwidth**2))


def gaussian_kernel_grad(x: np.ndarray, Z: np.ndarray, bandwidth: float) -> np.ndarray:
    """Gradients ``grad_x k(x, z_i)`` of the Gaussian kernel in its first argument.

    ``grad_x k(x, z) = k(x, z) (z - x) / s^2``.

    Parameters
    ----------
    x : ndarray, shape (d,)
        Point at which the gradients are taken.
    Z : ndarray, shape (n, d)
        Second arguments ``z_1 .. z_n``.
    bandwidth : float
        Kernel bandwidth ``s``.

    Returns
    -------
    ndarray, shape (n, d)
        Row ``i`` is ``grad_x k(x, z_i)``.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 4.3.

    Examples
    --------
    >>> import numpy as np
    >>> gaussian_kernel_grad(np.zeros(2), np.array([[1.0, 0.0]]), 1.0).round(4)
    array([[0.6065, 0.    ]])
    """
    return gaussian_kernel_grads(np.asarray(x)[None, :], Z, bandwidth)[0]


def gaussian_kernel_grads(Y: np.ndarray, Z: np.ndarray, bandwidth: float) -> np.ndarray:
    """:func:`gaussian_kernel_grad` at several points at once.

    Parameters
    ----------
    Y : ndarray, shape (m, d)
        Points at which the gradients are taken.
    Z : ndarray, shape (n, d)
        Second arguments ``z_1 .. z_n``.
    bandwidth : float
        Kernel bandwidth ``s``.

    Returns
    -------
    ndarray, shape (m, n, d)
        ``[j, i]`` is ``grad_x k(x, z_i)`` at ``x = Y[j]``.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 4.3.

    Examples
    --------
    >>> import numpy as np
    >>> gaussian_kernel_grads(np.zeros((2, 1)), np.array([[1.0]]), 1.0).shape
    (2, 1, 1)
    """
    diff = np.atleast_2d(Z)[None, :, :] - np.atleast_2d(Y)[:, None, :]
    inv_s2 = 1.0 / bandwidth**2
    w = np.exp(np.einsum("mij,mij->mi", diff, diff) * (-0.5 * inv_s2)) * inv_s2
    diff *= w[:, :, None]
    return diff


def distinct_rows(
    Z: np.ndarray, return_counts: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``Z``, each at its first occurrence, in their original order.

    The rows of ``np.unique(Z, axis=0)`` (``-0.0`` equals ``0.0``), found faster by comparing
    each row as one byte string (a Metropolis chain repeats a point on rejection as a
    bit-identical copy; timing on ``docs/benchmarks/numerics.md``).  With ``return_counts``
    also how often each occurs, so that ``(rows, counts)`` stand for ``Z`` as
    frequency-weighted points.

    Examples
    --------
    >>> import numpy as np
    >>> distinct_rows(np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0], [-0.0, 1.0]]))
    array([[1., 2.],
           [0., 1.]])
    >>> distinct_rows(np.array([[1.0], [0.0], [1.0]]), return_counts=True)[1]
    array([2, 1])
    """
    Z = np.atleast_2d(np.asarray(Z, dtype=float))
    keys = np.ascontiguousarray(Z + 0.0)  # + 0.0 turns -0.0 into 0.0
    rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel()
    _, first, counts = np.unique(rows, return_index=True, return_counts=True)
    order = np.argsort(first)
    if return_counts:
        return Z[first[order]], counts[order]
    return Z[first[order]]


def median_heuristic(Z: np.ndarray, max_points: int | None = 1000) -> float:
    """Median pairwise Euclidean distance of the rows of ``Z``.

    This is the bandwidth ``s`` used by the papers' experiments ("median heuristic").
    Duplicate points (a Metropolis chain repeats itself on rejection) are removed first,
    so that a chain that rejected often does not shrink the bandwidth to zero.

    Parameters
    ----------
    Z : ndarray, shape (n, d)
    max_points : int or None
        Use only the first ``max_points`` distinct rows (the cost is quadratic).

    Returns
    -------
    float
        The median distance; ``0.0`` if fewer than two distinct points exist, which callers
        treat as "no bandwidth yet".

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5
       (bandwidth "selected according to the median heuristic").
    .. [2] Garreau, D., Jitkrittum, W., Kanagawa, M. (2017). Large sample analysis of the
       median heuristic. arXiv:1707.07269.

    Examples
    --------
    >>> import numpy as np
    >>> median_heuristic(np.array([[0.0], [1.0], [3.0]]))
    2.0
    """
    Z = distinct_rows(Z)
    if max_points is not None:
        Z = Z[:max_points]
    if Z.shape[0] < 2:
        return 0.0
    s = exact_median(pdist(Z))
    return s if np.isfinite(s) else 0.0


# below this size np.median's full selection is the cheaper one (docs/benchmarks/numerics.md)
_BRACKET_MIN_SIZE = 30_000
# size of the strided sample whose order statistics bracket the middle ranks, and the
# half-width of the bracket in sample ranks: wide enough that the bracket rarely misses a
# middle rank (a miss falls back to np.median: exact, only slower; docs/benchmarks/numerics.md)
_BRACKET_SAMPLE = 4096
_BRACKET_MARGIN = 200


def exact_median(x: np.ndarray) -> float:
    """``float(np.median(x))`` of a 1-d array, the same number, faster for large arrays.

    The median heuristic selects the middle of ``n (n - 1) / 2`` pairwise distances at every
    bandwidth refresh; NumPy's selection on all of them (``np.partition``) costs more than
    the distances themselves (timings: ``docs/benchmarks/numerics.md``).  Here the
    order statistics of an evenly strided sample of about 4000 values bracket the middle
    ranks, one vectorised pass counts the values below the bracket and keeps those in it,
    and only those few are partitioned.  Order statistics are exact, and the two middle
    values are averaged as ``np.median`` does (``(a + b) / 2``), so the result is the same
    floating-point number; when the bracket misses a middle rank, or the array holds NaN,
    it falls back to ``np.median`` itself.

    Parameters
    ----------
    x : ndarray, shape (n,)
        Converted to float64 first (as pairwise distances are): the number returned is
        ``np.median`` of the float64 array.

    Returns
    -------
    float
        ``np.median(x)`` (NaN for an empty array or one holding NaN).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(size=100_001)
    >>> exact_median(x) == float(np.median(x))
    True
    """
    x = np.asarray(x, dtype=float).ravel()
    n = x.size
    if n < _BRACKET_MIN_SIZE:
        return float(np.median(x))
    k_lo, k_hi = (n - 1) // 2, n // 2  # the middle ranks (equal for odd n)
    sample = np.sort(x[:: n // _BRACKET_SAMPLE])
    mid = sample.size // 2
    lo = sample[max(mid - _BRACKET_MARGIN, 0)]
    hi = sample[min(mid + _BRACKET_MARGIN, sample.size - 1)]
    n_below = int(np.count_nonzero(x < lo))
    inside = x[(x >= lo) & (x <= hi)]
    n_above = int(np.count_nonzero(x > hi))
    if (n_below + inside.size + n_above != n  # NaN somewhere (or lo > hi: NaN in the sample)
            or not n_below <= k_lo <= k_hi < n_below + inside.size):
        return float(np.median(x))
    j_lo, j_hi = k_lo - n_below, k_hi - n_below
    if j_lo == j_hi:  # odd n: the middle value itself (np.median's mean of one value)
        return float(np.partition(inside, j_lo)[j_lo])
    part = np.partition(inside, [j_lo, j_hi])
    return float((part[j_lo] + part[j_hi]) / 2.0)
