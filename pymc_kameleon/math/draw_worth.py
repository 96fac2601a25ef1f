"""What a weighted sample, and equally weighted draws resampled from it, are worth per
coordinate; and resampling that keeps the draws' worth close to their number.

ArviZ counts ``N`` shuffled draws as about ``N`` independent ones on every coordinate.
Draws resampled systematically along the sample's Hilbert curve are worth more than that
on the coordinates the sample knows well (up to twice as much), so ArviZ undercounts them
there; :func:`resample_draws` resamples a share of them along the weakest coordinate
instead, just enough that no coordinate's draws are worth more than :data:`WORTH_CAP`
each, as far as none falls below the weakest's worth along the curve
(``docs/benchmarks/emulator.md``, "emulator-capped-draws").
"""

from __future__ import annotations

import numpy as np

from .importance import kish_ess, resample_indices, stratified, systematic
from .space_filling import hilbert_order

__all__ = ["WORTH_CAP", "capped_plan", "coordinate_worth", "curve_noise", "draws_worth",
           "resample_draws"]

#: The most a returned draw may be worth on any coordinate, in independent draws.
WORTH_CAP = 1.1

#: Where even the weakest coordinate's draws are worth more than this each along the curve,
#: every coordinate gives up worth alike (a multinomial share); otherwise the weakest keeps
#: its own, whose estimate from the sample is the most optimistic of all (by up to 30 %).
RICH = 1.5

#: Offsets over which the curve's systematic resampling is averaged (a midpoint grid).
OFFSETS = (np.arange(128) + 0.5) / 128

#: The share off the curve is a multiple of the draws over this.
SHARE_STEPS = 40


def _weights(log_w: np.ndarray) -> np.ndarray:
    log_w = np.asarray(log_w, dtype=float)
    finite = np.isfinite(log_w)
    w = np.zeros(len(log_w))
    w[finite] = np.exp(log_w[finite] - np.max(log_w[finite]))
    return w / w.sum()


def _moments(X: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = w @ X
    return mean, w @ (X - mean) ** 2


def coordinate_worth(X: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """The worth of a weighted sample's self-normalised mean in independent draws, per
    coordinate, by the delta method: ``var_w / sum_i w_i^2 (x_i - mean)^2`` (normalised
    weights, at least one finite; infinite where the coordinate does not vary).

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    >>> coordinate_worth(X, np.zeros(4)).tolist()
    [4.0, inf]
    """
    w = _weights(log_w)
    mean, var = _moments(X, w)
    with np.errstate(divide="ignore", invalid="ignore"):
        worth = var / (w**2 @ (X - mean) ** 2)
    return np.where(np.isnan(worth), np.inf, worth)


def curve_noise(X: np.ndarray, log_w: np.ndarray, size: int,
                order: np.ndarray | None = None) -> np.ndarray:
    """The variance that systematic resampling of ``size`` draws along ``order`` (default
    the sample's Hilbert curve) adds to the weighted mean, per coordinate, in units of
    the sample's variance over ``size`` (multinomial resampling: 1), averaged over
    :data:`OFFSETS` (no randomness).

    Examples
    --------
    >>> X = np.arange(8.0)[:, None]
    >>> float(curve_noise(X, np.zeros(8), 8)[0])
    0.0
    """
    if size == 0:
        return np.zeros(X.shape[1])
    w = _weights(log_w)
    mean, var = _moments(X, w)
    order = hilbert_order(X, log_w) if order is None else order
    chunk = max(1, int(4e6 // (size * X.shape[1])))  # offsets at a time: bounded memory
    dev2 = sum(((X[systematic(w, order, size, OFFSETS[k:k + chunk])].mean(axis=1) - mean) ** 2)
               .sum(axis=0) for k in range(0, len(OFFSETS), chunk))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(dev2 / len(OFFSETS) / var * size)


def draws_worth(X: np.ndarray, log_w: np.ndarray, size: int,
                plan: tuple[str, int] = ("random", 0),
                order: np.ndarray | None = None) -> np.ndarray:
    """What each of ``size`` draws resampled from the weighted sample is worth per
    coordinate, in independent draws, where ``plan = (how, share)``: ``share`` of them
    are resampled along the sort of the weakest coordinate (``how="sorted"``, stratified:
    one independent draw per stratum) or multinomially (``"random"``), the rest
    systematically along the Hilbert curve (``order`` if given).

    ``1 / (size / K + ((size - share) r + share s) / size)``, with ``K``
    :func:`coordinate_worth`, ``r`` :func:`curve_noise` and ``s`` the share's noise: 1
    for multinomial draws; along the sort none on the sorted coordinate and ``1 - rho^2``
    on another (``rho`` their weighted correlation: what the sorted coordinate does not
    explain of it, a bound from above).
    """
    how, share = plan
    base, curve = _along_curve(X, log_w, size, order)
    return 1.0 / (base + share / size * (_share_noise(X, log_w, base, how) - curve))


def _along_curve(X, log_w, size, order=None):
    """``1 / worth`` per draw of ``size`` draws along the curve, and the curve's noise."""
    curve = curve_noise(X, log_w, size, order)
    return size / coordinate_worth(X, log_w) + curve, curve


def _share_noise(X, log_w, base, how):
    if how == "random":
        return np.ones(X.shape[1])
    w = _weights(log_w)
    mean, var = _moments(X, w)
    weak = int(np.argmax(base))
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (w @ ((X - mean) * (X[:, weak] - mean[weak])[:, None])) / np.sqrt(var * var[weak])
    return np.nan_to_num(1.0 - rho**2)


def capped_plan(X: np.ndarray, log_w: np.ndarray, size: int, cap: float = WORTH_CAP,
                order: np.ndarray | None = None) -> tuple[str, int, int]:
    """How many of ``size`` draws (a multiple of ``size / 40``) to resample other than
    along the curve, so that no coordinate's :func:`draws_worth` is above ``cap``, along
    the sort of the weakest coordinate, or multinomially where even that one's draws are
    worth more than :data:`RICH` each: the smallest such share, but none that leaves a
    coordinate worth less than the weakest along the curve (or than 1 where that is
    more).  The draws' worth on their weakest coordinate, what a run's ESS is, then stays
    what the curve gives it.

    Returns ``(how, share, weakest)``: ``"sorted"`` or ``"random"``, the share, and the
    coordinate the draws are worth least on.  ``order``: the sample's Hilbert curve where
    the caller has it already.
    """
    base, curve = _along_curve(X, log_w, size, order)
    weak = int(np.argmax(base))
    if base.min() >= 1.0 / cap:
        return "random", 0, weak
    how = "random" if base[weak] < 1.0 / RICH else "sorted"
    gain = _share_noise(X, log_w, base, how) - curve  # per draw moved into the share
    floor = max(base[weak], 1.0)  # in 1 / worth: the least a coordinate may keep
    with np.errstate(divide="ignore", invalid="ignore"):  # (none where the share cannot help)
        need = np.where((base < 1.0 / cap) & (gain > 0), (1.0 / cap - base) / gain, 0.0)
        allow = np.where(gain > 0, (floor - base) / gain, np.inf)
    step = max(1, size // SHARE_STEPS)
    share = min(np.ceil(need.max() * size / step), np.floor(max(allow.min(), 0.0) * size / step))
    return how, int(min(size, step * share)), weak


def resample_draws(X: np.ndarray, log_w: np.ndarray, size: int, rng: np.random.Generator,
                   cap: float = WORTH_CAP) -> np.ndarray:
    """Indices of ``size`` equally weighted draws of the weighted sample ``(X, log_w)``.

    Where the sample is worth fewer draws than ``size`` (Kish's ESS): systematic along its
    Hilbert curve, a point's copies next to each other so that ArviZ counts them about
    once (:func:`~.importance.resample_indices`).  Otherwise systematic along the curve
    but for :func:`capped_plan`'s share, in random order: no coordinate's draws are then
    worth much more than ``cap`` each where that costs the weakest coordinate nothing.

    Parameters
    ----------
    X : ndarray, shape (n, d)
    log_w : ndarray, shape (n,)
        Log weights (non-finite: weight 0; at least one finite).
    size : int
    rng : numpy.random.Generator
    cap : float
        The most a draw may be worth on any coordinate (default :data:`WORTH_CAP`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 2))
    >>> log_w = -0.5 * X[:, 0] ** 2
    >>> how, share, weak = capped_plan(X, log_w, 500)
    >>> bool(draws_worth(X, log_w, 500).max() > WORTH_CAP >= draws_worth(X, log_w, 500,
    ...                                                                   (how, share)).max())
    True
    >>> len(resample_draws(X, log_w, 500, rng))
    500
    """
    if kish_ess(log_w) < size:
        return resample_indices(log_w, size, rng, adjacent=True, points=X)
    order = hilbert_order(X, log_w)
    how, share, weak = capped_plan(X, log_w, size, cap, order)
    w = _weights(log_w)
    curve = systematic(w, order, size - share, rng.random())
    if how == "random":
        rest = rng.choice(len(w), share, p=w)
    else:
        rest = stratified(w, np.argsort(X[:, weak], kind="stable"), share, rng)
    return rng.permutation(np.r_[curve, rest])
