"""Low-rank factors of a covariance: truncated eigendecomposition and subspace iteration."""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

__all__ = ["lowrank_root", "orthonormalise", "refine_lowrank_root"]


def lowrank_root(cov: np.ndarray, trace_tolerance: float) -> np.ndarray:
    """A factor ``R`` (shape ``(r, D)``) with ``R^T R`` the leading eigenpairs of ``cov``.

    The eigenpairs are kept in decreasing order until the discarded ones hold at most
    ``trace_tolerance`` of the trace; eigenvalues below ``1e-12`` times the largest (the
    numerical null space) are always discarded.  ``trace_tolerance = 0`` keeps the numerical
    rank, i.e. ``R^T R = cov`` up to rounding.

    Parameters
    ----------
    cov : ndarray, shape (D, D)
        Symmetric positive semi-definite matrix.
    trace_tolerance : float
        Fraction of the trace the discarded eigenpairs may hold, in ``[0, 1)``.

    Returns
    -------
    ndarray, shape (r, D)
        ``sqrt(lambda_k) v_k^T`` for the kept eigenpairs, largest first (``r >= 1``).

    References
    ----------
    .. [1] Eckart, C., Young, G. (1936). The approximation of one matrix by another of lower
       rank. Psychometrika 1(3), 211-218 (the truncated eigendecomposition is the best
       rank-``r`` approximation).

    Examples
    --------
    >>> import numpy as np
    >>> lowrank_root(np.diag([1.0, 1e-5, 0.0]), 1e-3).round(6)
    array([[1., 0., 0.]])
    """
    return _truncated_eigh(cov, trace_tolerance)[0]


def _truncated_eigh(cov: np.ndarray, trace_tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`lowrank_root`'s factor and all eigenvectors of ``cov``, largest first."""
    w, U = np.linalg.eigh(cov)
    w, U = w[::-1], U[:, ::-1]
    keep = _kept_rank(w, float(np.trace(cov)), trace_tolerance)
    return (U[:, :keep] * np.sqrt(np.maximum(w[:keep], 0.0))).T, U


def _kept_rank(w: np.ndarray, total: float, trace_tolerance: float) -> int:
    """How many of the decreasing eigenvalue estimates ``w`` to keep so that at most
    ``trace_tolerance * total`` of the trace ``total`` is left out (``0``: the numerical
    rank, every eigenvalue above ``1e-12`` times the largest); at least one.  When ``w``
    holds fewer than all eigenvalues, ``total - sum(w[:r])`` bounds the discarded share from
    above, so the rank is never smaller than the exact rule's."""
    w_max = max(float(w[0]), 0.0) if w.size else 0.0
    positive = w > 1e-12 * w_max
    keep = int(np.sum(positive))
    if total > 0 and trace_tolerance > 0:
        captured = np.cumsum(np.where(positive, w, 0.0))
        enough = np.nonzero(total - captured <= trace_tolerance * total)[0]
        if enough.size:
            keep = min(keep, int(enough[0]) + 1)
    return max(keep, 1)


def refine_lowrank_root(
    cov: np.ndarray,
    basis: np.ndarray | None,
    trace_tolerance: float,
    rng: np.random.Generator,
    oversample: int = 8,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`lowrank_root` by one warm-started subspace iteration, for a slowly changing ``cov``.

    The Rayleigh-Ritz pairs of ``cov`` on the orthonormal ``basis`` (shape ``(D, k)``) give
    the factor; the basis is then advanced by one power step, ``orth(cov @ basis)``, reordered
    by the Ritz values, and resized to the kept rank plus ``max(oversample, rank / 4)``
    columns.  When even all ``k`` Ritz values leave more than ``trace_tolerance`` of the
    trace out (the covariance moved, e.g. when its history restarted), the basis is grown by
    half with random columns and advanced by a power step, within the same call, until they
    do not: the factor returned always holds at least ``1 - trace_tolerance`` of the trace.
    (Growing one step per call instead leaves the proposals of several calls on an
    unconverged factor of the whole basis, at several times the cost per iteration:
    ``docs/benchmarks/fkamh_rank.md``, "The tuning phase made cheaper".)  Called at every
    change of a covariance that accumulates a chain's history, the basis follows its
    leading eigenspace for ``O(D^2 k)`` per call instead of the ``O(D^3)`` of a full
    eigendecomposition.  Ritz values never exceed the eigenvalues they estimate (Cauchy
    interlacing), so the rank is at least the exact rule's.  Any ``R`` gives a valid proposal
    ``N(y, gamma^2 I + eta^2 (R J)^T (R J))``; this one is close to the truncated
    eigendecomposition once the basis has converged.

    Parameters
    ----------
    cov : ndarray, shape (D, D)
        Symmetric positive semi-definite matrix.
    basis : ndarray, shape (D, k), or None
        Orthonormal columns from the previous call; ``None`` starts afresh from a full
        eigendecomposition (the result is then exactly :func:`lowrank_root`'s).
    trace_tolerance : float
        Share of the trace the discarded eigenpairs may hold, in ``(0, 1)``.
    rng : numpy.random.Generator
        Source of the random columns added when the basis grows.
    oversample : int, default 8
        Columns kept beyond the rank (at least; a quarter of the rank when that is more).

    Returns
    -------
    R : ndarray, shape (r, D)
        ``sqrt(theta_k) v_k^T`` for the kept Ritz pairs, largest first.
    basis : ndarray, shape (D, k')
        The basis for the next call.

    References
    ----------
    .. [1] Halko, N., Martinsson, P.-G., Tropp, J. A. (2011). Finding structure with
       randomness: probabilistic algorithms for constructing approximate matrix
       decompositions. SIAM Review 53(2), 217-288 (subspace iteration, Algorithm 4.4).
    .. [2] Golub, G. H., Van Loan, C. F. (2013). Matrix Computations, 4th ed., Section 8.3
       (orthogonal iteration) and 8.1 (Rayleigh-Ritz, interlacing).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> C = np.diag([4.0, 1.0, 1e-3, 1e-4, 0.0])
    >>> R, basis = refine_lowrank_root(C, None, 1e-2, rng, oversample=1)  # exact start
    >>> R.shape, basis.shape
    ((2, 5), (5, 3))
    >>> C[0, 0] = 5.0  # the covariance changes a little: one warm-started step follows it
    >>> R, basis = refine_lowrank_root(C, basis, 1e-2, rng, oversample=1)
    >>> bool(np.abs(R.T @ R - np.diag([5.0, 1.0, 0.0, 0.0, 0.0])).max() < 1e-8)
    True
    """
    D = cov.shape[0]
    if basis is None:  # no subspace to follow yet: start from the exact eigenvectors
        R, U = _truncated_eigh(cov, trace_tolerance)
        return R, U[:, : min(D, R.shape[0] + oversample)].copy()
    total = float(np.trace(cov))
    while True:
        k = basis.shape[1]
        power = cov @ basis  # (D, k)
        theta, V = np.linalg.eigh(basis.T @ power)  # Rayleigh-Ritz on the current basis
        theta, V = theta[::-1], V[:, ::-1]
        keep = _kept_rank(theta, total, trace_tolerance)
        if keep < k or k == D:
            break
        # even the whole basis leaves more than the tolerance out (the covariance moved,
        # e.g. at a restart): one power step on a basis grown by half, within this call
        extra = rng.standard_normal((D, min(D, k + max(oversample, k // 2)) - k))
        basis = orthonormalise(np.hstack([power @ V, extra]))
    R = ((basis @ V[:, :keep]) * np.sqrt(np.maximum(theta[:keep], 0.0))).T
    # next basis: one power step, Ritz order, resized to the rank plus the oversampling
    k_next = min(k, keep + max(oversample, keep // 4))
    return R, orthonormalise((power @ V)[:, :k_next])


def orthonormalise(A: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the columns of ``A`` (full column rank): Cholesky QR on the
    columns scaled to unit norm, Householder QR when that is not accurate enough.

    The columns :func:`refine_lowrank_root` passes are nearly orthogonal (a power step of an
    orthonormal basis in the Ritz order) but of very different norms; scaled to unit norm
    their Gram matrix is well conditioned and one Cholesky factorisation (BLAS-3, a few
    times cheaper than Householder QR) orthonormalises them to rounding.
    """
    norms = np.linalg.norm(A, axis=0)
    if np.all(norms > 0) and np.all(np.isfinite(norms)):
        Q = A / norms
        try:
            L = np.linalg.cholesky(Q.T @ Q)
        except np.linalg.LinAlgError:
            L = None
        if L is not None:
            Q = solve_triangular(L, Q.T, lower=True).T
            k = Q.shape[1]
            if np.abs(Q.T @ Q - np.eye(k)).max() < 1e-10:
                return Q
    return np.linalg.qr(A)[0]
