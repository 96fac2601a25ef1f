"""Points ordered along a Hilbert curve, so that points next in the order are near in space.

Systematic resampling that visits the points in this order picks, from every stretch of
the curve, as many copies as the stretch's weight asks for: the resampled draws' mean then
differs from the weighted mean far less than with any order unrelated to the points
(Gerber, Chopin and Whiteley 2019).  The index is Skilling's (2004): the "transpose" of a
point's grid cell, read bit level by bit level.

References
----------
Skilling, J. (2004). Programming the Hilbert curve. AIP Conference Proceedings 707, 381.
Gerber, M., Chopin, N. and Whiteley, N. (2019). Negative association, ordering and
convergence of resampling methods. Annals of Statistics 47(4), 2236-2260.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from .whitening import AffineMap

__all__ = ["hilbert_keys", "hilbert_order"]

#: Bits of a word of the sort key (a level of the grid is ``d`` bits, split in such words).
_WORD = 62


def hilbert_keys(cells: np.ndarray, bits: int) -> np.ndarray:
    """The Hilbert index of grid cells as sort keys, most significant first.

    Parameters
    ----------
    cells : ndarray of int, shape (n, d)
        Cell coordinates, each in ``0 .. 2**bits - 1``.
    bits : int
        Bits per coordinate.

    Returns
    -------
    ndarray of int64, shape (words, n)
        ``np.lexsort(keys[::-1])`` orders the cells along the curve; consecutive cells of a
        full grid differ by one in one coordinate.
    """
    X = np.array(cells, dtype=np.int64, copy=True)
    n, d = X.shape
    q = 1 << (bits - 1)
    while q > 1:  # undo the excess work of the curve's rotations, level by level
        low = q - 1
        for i in range(d):
            on = (X[:, i] & q) != 0
            X[on, 0] ^= low  # invert X[0]'s lower bits
            t = (X[~on, 0] ^ X[~on, i]) & low  # exchange X[0]'s and X[i]'s lower bits
            X[~on, 0] ^= t
            X[~on, i] ^= t
        q >>= 1
    for i in range(1, d):  # Gray encode
        X[:, i] ^= X[:, i - 1]
    t = np.zeros(n, dtype=np.int64)
    q = 1 << (bits - 1)
    while q > 1:
        t[(X[:, d - 1] & q) != 0] ^= q - 1
        q >>= 1
    X ^= t[:, None]
    # the index's bits: every coordinate's top bit, then every coordinate's next, ...
    stream = [(X[:, i] >> level) & 1 for level in range(bits - 1, -1, -1) for i in range(d)]
    words = []
    for start in range(0, len(stream), _WORD):
        word = np.zeros(n, dtype=np.int64)
        for bit in stream[start:start + _WORD]:
            word = (word << 1) | bit
        words.append(word)
    return np.array(words)


def hilbert_order(X: np.ndarray, log_w: np.ndarray | None = None, bits: int = 10) -> np.ndarray:
    """The indices of the rows of ``X`` along a Hilbert curve through their whitened cloud.

    The points are whitened by their (weighted) mean and covariance and mapped into the
    unit cube by the normal distribution function before the grid of ``2**bits`` cells a
    side is laid: the curve's resolution is where the weight is.

    Parameters
    ----------
    X : ndarray, shape (n, d)
    log_w : ndarray, shape (n,), optional
        Log weights of the points (non-finite: weight 0); None: equal weights.
    bits : int
        Bits per coordinate of the grid.

    Examples
    --------
    >>> order = hilbert_order(np.array([[0.0, 0.0], [5.0, 5.0], [0.1, 0.0], [5.0, 5.1]]))
    >>> sorted([set(order[:2].tolist()), set(order[2:].tolist())], key=min)
    [{0, 2}, {1, 3}]
    """
    X = np.asarray(X, dtype=float)
    n = len(X)
    w = np.ones(n)
    if log_w is not None:
        log_w = np.asarray(log_w, dtype=float)
        ok = np.isfinite(log_w)
        if ok.any():
            w = np.where(ok, np.exp(log_w - np.max(log_w, where=ok, initial=-np.inf)), 0.0)
    w = w / w.sum()
    mean = w @ X
    cov = (X - mean).T @ ((X - mean) * w[:, None])
    if np.all(np.isfinite(cov)) and np.trace(cov) > 0:
        whitening = AffineMap.from_cov(mean, cov)
    else:  # one point of weight: the points' own spread
        whitening = AffineMap.from_sample(X)
    U = ndtr(whitening.rows_to_u(X))
    cells = np.minimum((U * (1 << bits)).astype(np.int64), (1 << bits) - 1)
    return np.lexsort(hilbert_keys(cells, bits)[::-1])
