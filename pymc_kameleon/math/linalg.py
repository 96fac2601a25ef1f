"""Robust Cholesky factorisation and a small Gaussian density/sampler built on it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import LinAlgError, solve_triangular
from scipy.linalg.lapack import dpotrs, dtrtrs

__all__ = [
    "BatchedMultivariateNormal",
    "MultivariateNormal",
    "cholesky_update",
    "gaussian_factor",
    "gaussian_logpdf",
    "lowrank_root",
    "orthonormalise",
    "refine_lowrank_root",
    "ridge_solves",
    "safe_cholesky",
]

_LOG_2PI = float(np.log(2.0 * np.pi))


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
    directly (timings: ``docs/changelog.md``, "cross-validation 18 % cheaper").  The
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


@dataclass(frozen=True)
class MultivariateNormal:
    """``N(mean, L L^T)`` given by its mean and lower Cholesky factor.

    The proposal distributions of the step methods: sampling costs ``O(d^2)``, the density
    ``O(d^2)`` (one triangular solve).

    Parameters
    ----------
    mean : ndarray, shape (d,)
        Mean.
    chol : ndarray, shape (d, d)
        Lower-triangular factor ``L`` of the covariance (use :meth:`from_cov` to build it
        from a covariance matrix).

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Appendix A.2 (Gaussian identities) and A.4.

    Examples
    --------
    >>> import numpy as np
    >>> q = MultivariateNormal.from_cov(np.zeros(2), np.eye(2))
    >>> bool(np.isclose(q.logpdf(np.zeros(2)), -np.log(2 * np.pi)))
    True
    """

    mean: np.ndarray
    chol: np.ndarray
    half_logdet: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "half_logdet", float(np.sum(np.log(np.abs(self.chol.diagonal()))))
        )

    @classmethod
    def from_cov(cls, mean: np.ndarray, cov: np.ndarray) -> MultivariateNormal:
        """Build from a covariance matrix (factorised with :func:`safe_cholesky`)."""
        L, _ = safe_cholesky(cov)
        return cls(np.asarray(mean, dtype=float), L)

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    def logpdf(self, x: np.ndarray) -> float:
        """Log density at ``x``."""
        z, info = dtrtrs(self.chol, np.asarray(x, dtype=float) - self.mean, lower=1)
        if info != 0:  # singular factor: cannot happen for a factor from safe_cholesky
            return -np.inf
        return float(-0.5 * (z @ z) - self.half_logdet - 0.5 * self.dim * _LOG_2PI)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One draw."""
        return self.mean + self.chol @ rng.standard_normal(self.dim)


@dataclass(frozen=True)
class BatchedMultivariateNormal:
    """``m`` Gaussians ``N(mean[j], L[j] L[j]^T)``, for vectorised MH over SMC particles.

    Parameters
    ----------
    mean : ndarray, shape (m, d)
        Means.
    chol : ndarray, shape (m, d, d)
        Lower-triangular factors (use :meth:`from_covs`).

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Appendix A.2.

    Examples
    --------
    >>> import numpy as np
    >>> q = BatchedMultivariateNormal.from_covs(np.zeros((2, 1)), np.ones((2, 1, 1)))
    >>> q.logpdf(np.zeros((2, 1))).round(6)
    array([-0.918939, -0.918939])
    """

    mean: np.ndarray
    chol: np.ndarray
    half_logdet: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        diag = np.abs(np.diagonal(self.chol, axis1=-2, axis2=-1))
        object.__setattr__(self, "half_logdet", np.sum(np.log(diag), axis=-1))

    @classmethod
    def from_covs(cls, mean: np.ndarray, covs: np.ndarray) -> BatchedMultivariateNormal:
        """Factorise each covariance; those NumPy cannot factorise go to :func:`safe_cholesky`
        (the same factor a single-point :class:`MultivariateNormal` would use)."""
        covs = 0.5 * (covs + np.swapaxes(covs, -1, -2))
        try:
            L = np.linalg.cholesky(covs)
        except LinAlgError:
            L = np.empty_like(covs)
            for j in range(covs.shape[0]):
                L[j] = safe_cholesky(covs[j])[0]
        return cls(np.asarray(mean, dtype=float), L)

    def replace(self, mask: np.ndarray, other: BatchedMultivariateNormal) -> None:
        """In place: the Gaussians at ``mask`` become those of ``other`` (an accepted move)."""
        self.mean[mask] = other.mean[mask]
        self.chol[mask] = other.chol[mask]
        self.half_logdet[mask] = other.half_logdet[mask]

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """Log density of ``x[j]`` under Gaussian ``j``, shape ``(m,)``."""
        diff = np.asarray(x, dtype=float) - self.mean
        z = np.linalg.solve(self.chol, diff[..., None])[..., 0]
        d = self.mean.shape[-1]
        return -0.5 * np.einsum("mi,mi->m", z, z) - self.half_logdet - 0.5 * d * _LOG_2PI

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One draw from each Gaussian, shape ``(m, d)``."""
        eps = rng.standard_normal(self.mean.shape)
        return self.mean + np.matmul(self.chol, eps[..., None])[..., 0]


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


def gaussian_logpdf(x: np.ndarray, mean: np.ndarray, L: np.ndarray, half_logdet: float) -> float:
    """``log N(x | mean, L L^T)`` given the factor and its ``half_logdet``.

    The reference of the compiled version; see :meth:`MultivariateNormal.logpdf`.

    Examples
    --------
    >>> import numpy as np
    >>> round(gaussian_logpdf(np.zeros(1), np.zeros(1), np.eye(1), 0.0), 6)
    -0.918939
    """
    return MultivariateNormal(np.asarray(mean, dtype=float), L).logpdf(x)


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
