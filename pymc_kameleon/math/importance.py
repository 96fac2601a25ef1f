"""Importance sampling with several proposals: deterministic-mixture weights, Kish's ESS and
resampling to a fixed number of equally weighted draws."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .space_filling import hilbert_order

__all__ = ["kish_ess", "logsumexp", "mixture_log_weights", "resample_indices", "stratified",
           "systematic"]


def logsumexp(a, axis: int | None = None):
    """``log(sum(exp(a)))`` along ``axis`` (all of ``a`` if None), shifted by the maximum.

    :func:`scipy.special.logsumexp` without its array-API dispatch, which costs about
    0.1 ms per call: the tempering's bisection and the mixture's EM call this hundreds
    of times per run (``docs/benchmarks/numerics.md``).  All ``-inf`` (or none) gives ``-inf``; NaN
    and ``+inf`` propagate.

    Examples
    --------
    >>> float(logsumexp(np.log([1.0, 2.0, 3.0])))
    1.791759469228055
    >>> logsumexp(np.log([[1.0, 3.0], [1.0, 1.0]]), axis=0).round(4)
    array([0.6931, 1.3863])
    """
    a = np.asarray(a, dtype=float)
    shift = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    shift[~np.isfinite(shift)] = 0.0
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - shift), axis=axis, keepdims=True)) + shift
    return out.reshape(())[()] if axis is None else np.squeeze(out, axis=axis)


def mixture_log_weights(log_target: np.ndarray, log_proposals: Sequence[np.ndarray],
                        counts: Sequence[int]) -> np.ndarray:
    r"""Log deterministic-mixture importance weights of points drawn from several proposals.

    ``n_t`` points drawn from each proposal ``g_t`` (``n = sum n_t`` in all) weigh
    ``w(y) = p(y) / sum_t (n_t / n) g_t(y)``, every ``g_t`` evaluated at every point.  The
    self-normalised estimates are consistent, and ``mean(w)`` is an unbiased estimate of the
    target's normalising constant.

    Parameters
    ----------
    log_target : ndarray, shape (n,)
        Unnormalised log target at each point (NaN counts as ``-inf``).
    log_proposals : sequence of ndarray, each shape (n,)
        ``log g_t`` at every point, one array per proposal.
    counts : sequence of int
        ``n_t``, the number of the points drawn from each proposal.

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    .. [1] Owen, A., Zhou, Y. (2000). Safe and effective importance sampling. JASA 95(449).
    .. [2] Veach, E., Guibas, L. (1995). Optimally combining sampling techniques for Monte
       Carlo rendering. SIGGRAPH.

    Examples
    --------
    >>> import numpy as np
    >>> w = mixture_log_weights(np.zeros(3), [np.zeros(3), np.full(3, -np.inf)], [3, 0])
    >>> np.allclose(w, 0.0)
    True
    """
    n = int(np.sum(counts))
    terms = [np.log(c / n) + lg for lg, c in zip(log_proposals, counts, strict=True) if c > 0]
    with np.errstate(invalid="ignore"):
        log_w = np.asarray(log_target, dtype=float) - logsumexp(terms, axis=0)
    return np.where(np.isnan(log_w), -np.inf, log_w)


def kish_ess(log_w: np.ndarray) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of log weights (0 if none is finite).

    Examples
    --------
    >>> kish_ess(np.log([1.0, 1.0, 2.0]))
    2.6666666666666665
    """
    log_w = np.asarray(log_w, dtype=float)
    if not np.isfinite(log_w).any():
        return 0.0
    return float(np.exp(2 * logsumexp(log_w) - logsumexp(2 * log_w)))


def resample_indices(log_w: np.ndarray, size: int, rng: np.random.Generator, *,
                     adjacent: bool = False, points: np.ndarray | None = None) -> np.ndarray:
    """``size`` indices drawn by systematic resampling, in random order (so that the equally
    weighted draws do not come sorted by point).

    With ``adjacent=True`` the points are visited in a random order and the copies of a
    point stay next to each other: ArviZ's autocorrelation then sees that ``m`` copies are
    worth one draw, so its ESS of the resampled draws follows the weighted sample's worth
    instead of counting every copy (``docs/smc.md``, "What the returned draws are worth").

    With ``points`` (the weighted sample's points, one row each) the systematic resampling
    visits them along a Hilbert curve (:func:`~.space_filling.hilbert_order`): every
    stretch of nearby points gets as many copies as its weight asks for, so the draws'
    mean adds far less noise to the weighted mean than in a random order (the returned
    draws are worth up to the weighted sample's own worth, not ``1 / (1 / K + 1 / size)``;
    ``docs/benchmarks/emulator.md``).  The chosen points then come in random order, their
    copies next to each other with ``adjacent=True``.

    Examples
    --------
    >>> idx = resample_indices(np.log([0.5, 0.25, 0.25]), 4, np.random.default_rng(0))
    >>> sorted(idx.tolist())
    [0, 0, 1, 2]
    >>> idx = resample_indices(np.log([0.5, 0.25, 0.25]), 4, np.random.default_rng(0),
    ...                        adjacent=True)
    >>> int(np.flatnonzero(idx == 0)[1] - np.flatnonzero(idx == 0)[0])
    1
    """
    log_w = np.asarray(log_w, dtype=float)
    w = np.exp(log_w - np.max(log_w))
    if points is not None:
        order = hilbert_order(points, log_w)
    else:
        order = rng.permutation(len(w)) if adjacent else np.arange(len(w))
    idx = systematic(w, order, size, rng.random())
    if points is not None and adjacent:  # the chosen points in random order, copies together
        chosen, copies = np.unique(idx, return_counts=True)
        shuffle = rng.permutation(len(chosen))
        return np.repeat(chosen[shuffle], copies[shuffle])
    return idx if adjacent and points is None else rng.permutation(idx)


def systematic(w: np.ndarray, order: np.ndarray, size: int, offset) -> np.ndarray:
    """Systematic resampling: ``size`` indices of the (unnormalised) weights ``w``, taken
    at the positions ``(offset + k) / size`` of their cumulative sum along ``order``.

    ``offset`` is uniform on ``[0, 1)`` for a resampling, or an array of offsets (one
    row of indices each) to see how the draws depend on it.

    Examples
    --------
    >>> systematic(np.array([1.0, 2.0, 1.0]), np.arange(3), 4, 0.5).tolist()
    [0, 1, 1, 2]
    """
    offset = np.asarray(offset, dtype=float)[..., None]
    return _at_positions(w, order, (offset + np.arange(size)) / size)


def stratified(w: np.ndarray, order: np.ndarray, size: int,
               rng: np.random.Generator) -> np.ndarray:
    """Stratified resampling: as :func:`systematic`, but an offset of its own for each
    of the ``size`` positions, so that the draws within a stratum are independent.

    Examples
    --------
    >>> idx = stratified(np.ones(4), np.arange(4), 4, np.random.default_rng(0))
    >>> idx.tolist()
    [0, 1, 2, 3]
    """
    return _at_positions(w, order, (np.arange(size) + rng.random(size)) / size)


def _at_positions(w, order, positions):
    cum = np.cumsum(w[order]) / np.sum(w)
    return order[np.minimum(np.searchsorted(cum, positions), len(w) - 1)]
