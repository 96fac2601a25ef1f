"""Robust Cholesky factorisation: jitter when needed, ridge paths, rank-``r`` updates."""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError
from scipy.linalg.lapack import dpotrs

__all__ = ["cholesky_update", "gaussian_factor", "ridge_solves", "safe_cholesky"]


def safe_cholesky(A: np.ndarray, max_tries: int = 10) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of a symmetric matrix, adding jitter if needed.

    Tries ``A``, then ``A + j I`` with ``j = 1e-10 * mean(|diag A|) * 10^k`` for
    ``k = 0 .. max_tries - 1``.  If all fail (a badly indefinite matrix), the eigenvalues are
    clipped from below at ``1e-8 * max(|eigenvalue|)`` (or ``1e-8`` if that is zero).  The
    result is a deterministic function of ``A``, so a proposal built on it is still a
    well-defined density and Metropolis-Hastings stays exact.

    Parameters
    ----------
    A : ndarray, shape (d, d)
        Symmetric matrix with finite entries.
    max_tries : int
        Number of jitter levels tried before the eigenvalue fallback.

    Returns
    -------
    L : ndarray, shape (d, d)
        Lower-triangular factor with ``L @ L.T`` approximately ``A + jitter I``.
    jitter : float
        The jitter that was added (``0.0`` if none; ``nan`` if the eigenvalue fallback ran).

    Raises
    ------
    ValueError
        If ``A`` has non-finite entries.

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Appendix A.4 (Cholesky decomposition with added jitter).

    Examples
    --------
    >>> import numpy as np
    >>> L, jitter = safe_cholesky(np.ones((2, 2)))  # singular: jitter is added
    >>> jitter > 0
    True
    """
    A = np.asarray(A, dtype=float)
    if not np.all(np.isfinite(A)):
        raise ValueError("safe_cholesky: matrix has non-finite entries")
    A = 0.5 * (A + A.T)
    try:
        return np.linalg.cholesky(A), 0.0
    except LinAlgError:
        pass
    scale = float(np.mean(np.abs(A.diagonal()))) or 1.0
    eye = np.eye(A.shape[0])
    for k in range(max_tries):
        jitter = 1e-10 * scale * 10.0**k
        try:
            return np.linalg.cholesky(A + jitter * eye), jitter
        except LinAlgError:
            continue
    w, V = np.linalg.eigh(A)
    floor = 1e-8 * (float(np.max(np.abs(w))) or 1.0)
    A_pd = (V * np.maximum(w, floor)) @ V.T
    return np.linalg.cholesky(0.5 * (A_pd + A_pd.T) + floor * eye), np.nan


def ridge_solves(A: np.ndarray, b: np.ndarray,
                 ridges: np.ndarray) -> list[np.ndarray | None]:
    """Solutions of ``(A + r I) x = b`` for several ridges ``r``: the same floats as
    ``cho_solve((safe_cholesky(A + r I)[0], True), b)``, with less overhead.

    The matrix is checked and symmetrised once (``0.5 (A + A^T)``, as
    :func:`safe_cholesky` does; ``0.5 (x + x) = x``, so adding the ridge afterwards gives
    the same matrix) instead of once per ridge, and the triangular solves call LAPACK
    directly (timings: ``docs/benchmarks/numerics.md``, "A path of ridges").  The
    factorisation stays NumPy's: SciPy's LAPACK build would be faster but rounds
    differently, and two candidates of a cross-validated search whose held-out losses tie
    within rounding (the same kernel reached two ways) then swap ranks and change the
    chain.  A matrix NumPy does not factor goes through :func:`safe_cholesky` itself
    (jitter).

    Parameters
    ----------
    A : ndarray, shape (m, m)
        Symmetric matrix.
    b : ndarray, shape (m,)
        Right-hand side.
    ridges : sequence of float
        Values added to the diagonal.

    Returns
    -------
    list
        One solution per ridge; ``None`` where the matrix has non-finite entries or the
        solve fails.

    Examples
    --------
    >>> import numpy as np
    >>> xs = ridge_solves(4.0 * np.eye(2), np.ones(2), [0.0, 12.0])  # (4 + r) x = 1
    >>> [x.tolist() for x in xs]
    [[0.25, 0.25], [0.0625, 0.0625]]
    """
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    out: list[np.ndarray | None] = []
    sym = 0.5 * (A + A.T)
    finite = bool(np.all(np.isfinite(sym)))
    step = A.shape[0] + 1  # stride of the diagonal in the flattened matrix
    for r in ridges:
        M = sym.copy()
        M.flat[::step] += float(r)
        if not (finite and np.all(np.isfinite(M.flat[::step]))):
            out.append(None)
            continue
        try:
            L = np.linalg.cholesky(M)
        except LinAlgError:  # not positive definite: the jitter route of safe_cholesky
            try:
                M = A.copy()
                M.flat[::step] += float(r)
                L = safe_cholesky(M)[0]
            except (LinAlgError, ValueError):
                out.append(None)
                continue
        x, info = dpotrs(L, b, lower=1)
        out.append(x if info == 0 else None)
    return out


def cholesky_update(L: np.ndarray, V: np.ndarray) -> None:
    """In place: lower ``L`` becomes the Cholesky factor of ``L L^T + V V^T``.

    ``V`` has shape ``(m, r)`` and is overwritten.  Column ``k`` of ``L`` and the ``r`` columns
    of ``V`` are rotated by one Householder reflection (an orthogonal map on the columns of
    ``[L, V]``, so ``[L, V][L, V]^T`` is unchanged) that zeroes row ``k`` of ``V``.  Cost
    ``O(r m^2)``; ``L`` must have a positive diagonal.  The reference of the compiled
    :func:`pymc_kameleon.math.compiled.cholesky_update`.

    References
    ----------
    .. [1] Golub, G. H., Van Loan, C. F. (2013). Matrix Computations, 4th ed., Sections 5.1
       (Householder reflections) and 6.5.4 (updating a Cholesky factorisation).

    Examples
    --------
    >>> import numpy as np
    >>> L, V = np.eye(2), np.array([[1.0], [1.0]])
    >>> cholesky_update(L, V)
    >>> bool(np.allclose(L @ L.T, np.eye(2) + np.ones((2, 2))))
    True
    """
    m = L.shape[0]
    for k in range(m):
        v = V[k].copy()
        nv2 = float(v @ v)
        if nv2 == 0.0:
            continue
        a = L[k, k]
        r = np.sqrt(a * a + nv2)
        h0 = -nv2 / (a + r)  # = a - r without cancellation (a > 0)
        beta = 2.0 / (h0 * h0 + nv2)
        col = L[k:, k]
        blk = V[k:]
        w = (col * h0 + blk @ v) * beta
        col -= w * h0
        blk -= w[:, None] * v


def gaussian_factor(G: np.ndarray, gamma2: float, scale: float) -> tuple[np.ndarray, float, bool]:
    """Cholesky factor of a local-Gaussian proposal covariance ``gamma2 I + scale G``.

    The reference of the compiled :func:`pymc_kameleon.math.compiled.gaussian_factor`: the
    covariance is symmetrised as in :func:`safe_cholesky`, but no jitter is tried; the caller
    falls back to :func:`safe_cholesky` when ``ok`` is False.

    Parameters
    ----------
    G : ndarray, shape (d, d)
        Adaptive part of the covariance (symmetric up to rounding).
    gamma2, scale : float
        Variance of the isotropic term and scale of ``G``.

    Returns
    -------
    L : ndarray, shape (d, d)
        Lower factor (meaningless when ``ok`` is False).
    half_logdet : float
        ``sum(log(diag(L)))``, half the log determinant of the covariance.
    ok : bool
        Whether the matrix was finite and numerically positive definite.

    References
    ----------
    .. [1] Golub, G. H., Van Loan, C. F. (2013). Matrix Computations, 4th ed., Section 4.2.

    Examples
    --------
    >>> import numpy as np
    >>> L, half_logdet, ok = gaussian_factor(np.eye(2), 1.0, 3.0)
    >>> ok, bool(np.allclose(L, 2.0 * np.eye(2))), round(half_logdet, 6)
    (True, True, 1.386294)
    """
    d = G.shape[0]
    A = gamma2 * np.eye(d) + scale * G
    A = 0.5 * (A + A.T)
    if not np.all(np.isfinite(A)):
        return np.zeros((d, d)), 0.0, False
    try:
        L = np.linalg.cholesky(A)
    except LinAlgError:
        return np.zeros((d, d)), 0.0, False
    return L, float(np.sum(np.log(L.diagonal()))), True
