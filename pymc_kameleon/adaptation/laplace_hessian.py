"""The curvature at a mode of the Laplace start: finite-difference Hessians and their checks.

:func:`finite_difference_hessian` and the inverse Hessian at an optimiser's mode, with the
checks that the point is a usable maximum: no marginal standard deviation too small to be
a statistical model's (a spike), and no coordinate along which the log density still
rises.  :mod:`.laplace` uses them for the Laplace start and is their import path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["finite_difference_hessian"]

_BIG = 1e300  # -log p where the log density is not finite (outside the support)
# a marginal standard deviation below this times (1 + |mode_i|) is a spike, not a mode: no
# statistical model is that sharp (docs/tuning.md, "Laplace start")
_SPIKE = 1e-10
# a maximum has zero slope: along each coordinate the 1-d Newton step |slope| / curvature
# must be at most this many conditional sds 1 / sqrt(curvature); an optimiser stopped in the
# neck of a density that grows without bound is far beyond it (docs/tuning.md)
_RISE = 3.0


def finite_difference_hessian(
    f: Callable[[np.ndarray], float], x: np.ndarray, fx: float, steps: np.ndarray,
    rows: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Central finite-difference Hessian of ``f`` at ``x`` (``2 d^2`` evaluations).

    ``rows``, if given, evaluates ``f`` at the rows of an array: then the ``2 d^2`` points
    are one call (one batch on an executor), with the same values and Hessian.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> H = finite_difference_hessian(lambda v: 0.5 * v @ A @ v, np.zeros(2), 0.0,
    ...                               np.full(2, 0.1))
    >>> bool(np.allclose(H, A))
    True
    """
    d = x.shape[0]
    E = np.diag(steps)
    points = []  # in the order a loop over i, then j < i, evaluates them
    for i in range(d):
        points += [x + E[i], x - E[i]]
        for j in range(i):
            points += [x + E[i] + E[j], x + E[i] - E[j], x - E[i] + E[j], x - E[i] - E[j]]
    values = iter(one_by_one(f)(np.array(points)) if rows is None else rows(np.array(points)))
    H = np.empty((d, d))
    for i in range(d):
        H[i, i] = (next(values) - 2.0 * fx + next(values)) / steps[i] ** 2
        for j in range(i):
            fpp, fpm, fmp, fmm = (next(values) for _ in range(4))
            H[i, j] = H[j, i] = (fpp - fpm - fmp + fmm) / (4.0 * steps[i] * steps[j])
    return H


def one_by_one(f: Callable[[np.ndarray], float]) -> Callable[[np.ndarray], np.ndarray]:
    """``f`` of one point as a function of the rows of an array (a loop)."""
    return lambda X: np.array([f(x) for x in X], dtype=float)


def _curvature_probe(neg, x: np.ndarray, fx: float,
                     rows: Callable[[np.ndarray], np.ndarray] | None = None,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate, a step whose second difference rises above rounding, the curvature
    and the slope there (NaN where a step left the support).

    Starts at ``1e-4 (1 + |x_i|)`` and grows tenfold (at most 10 times) while the second
    difference is below ``1e-6`` (a scale of ``1e3`` needs steps of about 1).  Every
    coordinate still growing takes its next two points in one call of ``rows`` (values
    at the rows of an array; default a loop over ``neg``): at most 10 batches.
    """
    rows = one_by_one(neg) if rows is None else rows
    d = x.size
    steps = 1e-4 * (1.0 + np.abs(x))
    up, down, d2 = np.empty(d), np.empty(d), np.empty(d)
    todo = np.arange(d)
    for _ in range(10):
        E = np.eye(d)[todo] * steps[todo, None]
        values = rows(np.concatenate([x + E, x - E]))
        up[todo], down[todo] = values[:todo.size], values[todo.size:]
        d2[todo] = up[todo] - 2.0 * fx + down[todo]
        # a coordinate is done once its second difference rises above rounding
        todo = todo[~((np.abs(d2[todo]) > 1e-6) | ~np.isfinite(d2[todo]))]
        steps[todo] *= 10.0  # (also after the last attempt, as the loop always did)
        if not todo.size:
            break
    curv = d2 / steps**2
    with np.errstate(all="ignore"):
        slope = np.where(np.maximum(up, down) < _BIG, (up - down) / (2.0 * steps), np.nan)
    return steps, curv, slope


def _rise(x: np.ndarray, curv: np.ndarray, slope: np.ndarray) -> str:
    """Where ``x`` is no maximum: a coordinate along which the log density still rises, its
    one-dimensional maximum more than ``_RISE`` conditional sds away (empty if none).

    A proper posterior has a maximum where the slope is zero; an optimiser that stopped on a
    slope it could not follow (the neck of a density that grows without bound, where the
    slope stays while the curvature vanishes) has not found one.
    """
    with np.errstate(all="ignore"):
        ratio = np.abs(slope) / np.sqrt(curv)
    rising = np.flatnonzero((curv > 0) & (ratio > _RISE))
    if not rising.size:
        return ""
    i = int(rising[0])
    return (f"the log density still rises along coordinate {i} at {x[i]:.6g} (its "
            f"one-dimensional maximum {ratio[i]:.3g} conditional sds away)")


def _scaled_eigen(H: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool] | None:
    """The eigen-decomposition of a symmetrised Hessian on its diagonally scaled form
    (scales may differ by orders of magnitude; a non-positive diagonal entry is scaled by
    the median positive one): ``scale, w, V`` and whether every diagonal entry was
    positive; None if ``H`` is not finite or has no positive diagonal entry."""
    if not np.all(np.isfinite(H)):
        return None
    H = 0.5 * (H + H.T)
    diag = np.diag(H).copy()
    good = diag > 0
    if not np.any(good):
        return None
    diag[~good] = np.median(diag[good])
    scale = 1.0 / np.sqrt(diag)
    w, V = np.linalg.eigh(H * np.outer(scale, scale))
    return scale, w, V, bool(np.all(good))


def _covariance(eigen) -> np.ndarray | None:
    """Inverse of a symmetrised Hessian from its :func:`_scaled_eigen`; non-positive
    curvatures get the median positive one."""
    if eigen is None:
        return None
    scale, w, V, _ = eigen
    positive = w[w > 0]
    if positive.size == 0:
        return None
    w = np.where(w > 1e-10 * positive.max(), w, np.median(positive))
    return np.outer(scale, scale) * ((V / w) @ V.T)


def _saddle(eigen) -> bool:
    """Whether the scaled Hessian of ``-log p`` (:func:`_scaled_eigen`, every diagonal
    entry positive) has an eigenvalue at or below zero: the point is no maximum (a ridge an
    optimiser could not follow)."""
    return eigen is not None and eigen[3] and bool(eigen[1][0] <= 0.0)


def _inverse_hessian(neg: Callable[[np.ndarray], float], mode: np.ndarray,
                     f_mode: float, rows: Callable[[np.ndarray], np.ndarray] | None = None,
                     ) -> tuple[np.ndarray | None, np.ndarray, str, str, bool]:
    """Inverse finite-difference Hessian of ``neg`` at ``mode``, the steps it used, where it
    is a spike and where ``mode`` is no maximum (:func:`_rise`; both empty if not), and
    whether the Hessian is indefinite there (:func:`_saddle`; the inverse then has the
    median curvature in place of the non-positive ones).
    ``rows`` evaluates ``neg`` at the rows of an array (one batch; default a loop)."""
    # steps: a first pass with small relative steps measures the curvature per coordinate,
    # the second uses half a marginal standard deviation (well inside the support)
    h0, diag, slope = _curvature_probe(neg, mode, f_mode, rows)
    rise = _rise(mode, diag, slope)
    steps = np.where((diag > 0) & np.isfinite(diag), 0.5 / np.sqrt(np.abs(diag)), h0)
    H = finite_difference_hessian(neg, mode, f_mode, steps, rows)
    if np.any(np.abs(H) >= 1e200):  # a step left the support
        steps = 0.1 * steps
        H = finite_difference_hessian(neg, mode, f_mode, steps, rows)
    eigen = _scaled_eigen(H)  # one decomposition for the inverse and the test
    cov, saddle = _covariance(eigen), _saddle(eigen)
    if cov is None:
        return None, steps, "", rise, saddle
    sd = np.sqrt(np.diag(cov))
    spike = np.flatnonzero(~(sd >= _SPIKE * (1.0 + np.abs(mode))))
    if spike.size:
        i = int(spike[0])
        return (cov, steps, f"marginal sd {sd[i]:.3g} at {mode[i]:.6g} in coordinate {i}",
                rise, saddle)
    return cov, steps, "", rise, saddle
