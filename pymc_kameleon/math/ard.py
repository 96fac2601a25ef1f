"""Per-coordinate kernel lengths of the finite score-matching surrogate, by cross-validation.

The kernel samplers work in the whitened coordinates of the warm-up, where every marginal
variance is about 1.  An isotropic kernel then gives every coordinate the same bandwidth,
but a posterior's non-linear structure rarely lives in every coordinate alike: on the 8-d
banana B(0.03, 100) six coordinates are Gaussian (a log density quadratic in them wants a
very wide kernel) and the banana's curvature lives in the first (which wants a narrow
one).  The isotropic compromise there is a near-quadratic surrogate that cannot follow the
banana: kernel HMC's step size collapses and the chain stays in the middle.

:func:`search_lengths` chooses relative per-coordinate lengths ``l`` (automatic relevance
determination: ``k(x, y) = exp(-sum_i (x_i - y_i)^2 / (2 s^2 l_i^2))``) by coordinate
descent on the same held-out score-matching loss that chooses the bandwidth ``s`` and the
regularisation ``lambda`` (:func:`~pymc_kameleon.math.score_matching.cross_validate`): each
coordinate's length is halved or doubled while that lowers the loss, then ``s`` is searched
again.  The lengths are normalised to a geometric mean of 1, so ``s`` keeps its meaning as
the overall scale.  What the lengths gain on a curved target is measured on
``docs/benchmarks/synthetic.md``.

References
----------
- Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Section 4.3
  ("Free parameters": hyperparameters chosen by the held-out score-matching objective).
- Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine Learning.
  MIT Press, Section 5.1 (automatic relevance determination).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .rff import RandomFourierFeatures
from .score_matching import FiniteScoreEstimator, cross_validate

__all__ = ["LengthSearch", "search_lengths"]

_FACTORS = (0.5, 2.0)  # per-coordinate moves of one coordinate-descent sweep
# A coordinate's bandwidth s l_i stays within [min(grid) / 4, max(grid)]: without a bound,
# warm-started searches let the lengths of Gaussian coordinates drift (the loss barely
# changes between wide and very wide) up to a kernel flat along them, whose surrogate has
# no gradient there, so kernel HMC's trajectories leave the target (seen on the 8-d banana:
# docs/algorithms/kernel_hmc.md, "Per-coordinate lengths").
_LOWER = 0.25


@dataclass(frozen=True)
class LengthSearch:
    """Outcome of :func:`search_lengths`.

    Parameters
    ----------
    lengths : ndarray, shape (d,)
        Relative per-coordinate lengths, geometric mean 1.
    bandwidth, lam : float
        The overall bandwidth ``s`` and the regularisation for these lengths.
    loss : float
        Their mean held-out score-matching loss.
    isotropic_loss : float
        The best loss with the lengths the search started from.
    n_evaluated : int
        Bandwidth-and-lengths configurations scored (each for every ``lam`` at once).
    """

    lengths: np.ndarray
    bandwidth: float
    lam: float
    loss: float
    isotropic_loss: float
    n_evaluated: int


def search_lengths(
    X: np.ndarray,
    features: RandomFourierFeatures,
    bandwidths: Sequence[float],
    lams: Sequence[float],
    lengths: np.ndarray | None = None,
    n_sweeps: int = 2,
    n_folds: int = 5,
    min_bandwidth: float = 0.0,
) -> LengthSearch:
    """Bandwidth, regularisation and per-coordinate lengths of a finite surrogate.

    1. The grid ``bandwidths x lams`` with the starting ``lengths`` (default: isotropic).
    2. Up to ``n_sweeps`` coordinate-descent sweeps at the best bandwidth ``s``: each
       coordinate's length is halved, else doubled, when that lowers the best loss over
       the best ``lam`` and its two grid neighbours; a sweep that changes nothing ends the
       search.  Every coordinate's bandwidth ``s l_i`` stays within
       ``[max(min(bandwidths) / 4, min_bandwidth), max(bandwidths)]``.  Grid bandwidths
       that would take a coordinate below ``min_bandwidth`` are left out of every search
       (if that leaves none, the starting lengths below the floor are raised to it).
    3. The lengths are normalised to geometric mean 1 (the bandwidth absorbs the factor:
       the same kernel) and the grid is searched again with that bandwidth added, so the
       result is never worse than the sweeps' best.

    Folds are contiguous blocks of the rows (blocked cross-validation, for rows in chain
    order).

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Data, in chain order.
    features : RandomFourierFeatures
        The random basis (its bandwidth and lengths are replaced).
    bandwidths, lams : sequences of float
        The grid of overall bandwidths and regularisations.
    lengths : ndarray, shape (d,), optional
        Starting lengths (e.g. the last search's); default all ones.
    n_sweeps : int, default 2
    n_folds : int, default 5
    min_bandwidth : float, default 0
        Absolute floor of every coordinate's bandwidth ``s l_i`` (a sampler's bandwidth
        floor, e.g. against a history collapsed on a lucky likelihood estimate).

    Returns
    -------
    LengthSearch

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x1 = rng.normal(size=400)
    >>> X = np.column_stack([x1, np.sin(3 * x1) + 0.1 * rng.normal(size=400),
    ...                      rng.normal(size=400)])
    >>> rff = RandomFourierFeatures.draw(3, 200, 1.0, rng)
    >>> res = search_lengths(X, rff, [0.5, 1.0, 2.0], [1e-3, 1e-2, 1e-1])
    >>> bool(res.loss <= res.isotropic_loss), res.lengths.shape
    (True, (3,))
    """
    X = np.array(X, dtype=float, ndmin=2)
    d = X.shape[1]
    lam_grid = np.asarray(lams, dtype=float)
    lengths = np.ones(d) if lengths is None else np.array(lengths, dtype=float)
    floor = float(min_bandwidth) * (1.0 - 1e-12)  # (rounding of lengths at the floor)
    count = 0

    def score(ls: np.ndarray, grid: Sequence[float], lams: np.ndarray):
        nonlocal count
        count += len(grid)
        basis = features.with_lengths(ls)
        return cross_validate(X, grid, lams,
                              lambda s, lam: FiniteScoreEstimator(basis.with_bandwidth(s), lam),
                              n_folds=n_folds, shuffle=False)

    def above_floor(ls: np.ndarray) -> list[float]:
        """The grid's bandwidths that keep every coordinate at or above the floor."""
        return [b for b in bandwidths if b * float(np.min(ls)) >= floor]

    lo = max(_LOWER * float(np.min(bandwidths)), float(min_bandwidth))
    hi = float(np.max(bandwidths))
    # if no grid bandwidth keeps the floor (warm-started lengths too short for this grid),
    # the short lengths are raised
    grid = above_floor(lengths)
    if not grid:
        grid = list(bandwidths)
        lengths = np.maximum(lengths, float(min_bandwidth) / float(np.min(grid)))
    start = score(lengths, grid, lam_grid)
    s, best = start.best_bandwidth, start.best_loss
    # the sweeps score the best lambda and its grid neighbours only (half the Cholesky solves)
    j = int(np.argmin(np.abs(lam_grid - start.best_lam)))
    near = lam_grid[max(j - 1, 0) : j + 2]
    for _ in range(int(n_sweeps)):
        changed = False
        for i in range(d):
            for factor in _FACTORS:
                trial = lengths.copy()
                trial[i] *= factor
                if not lo <= s * trial[i] <= hi:
                    continue
                loss = score(trial, [s], near).best_loss
                if loss < best:
                    lengths, best, changed = trial, loss, True
                    break  # halving helped: no need to try doubling
        if not changed:
            break
    gm = float(np.exp(np.mean(np.log(lengths))))
    lengths = lengths / gm
    # s gm keeps every s l_i >= lo; a smaller grid bandwidth may take one below the floor
    final = score(lengths, [*above_floor(lengths), s * gm], lam_grid)
    return LengthSearch(lengths, final.best_bandwidth, final.best_lam, final.best_loss,
                        start.best_loss, count)
