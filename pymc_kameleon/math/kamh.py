"""The MCMC Kameleon (KAMH) proposal: the one module of its numerics.

``q_z(. | y) = N(y, gamma^2 I + nu^2 M_{z,y} H M_{z,y}^T)`` where, for the Gaussian kernel,
``M_{z,y} = (2 / s^2) [k(y, z_i) (z_i - y)]_{i=1..n}`` is ``d x n`` and ``H = I - 11^T / n``
is the centring matrix.  ``M H M^T`` is computed as ``Mc Mc^T`` with ``Mc = M - row means``
(``O(n d^2)``, no ``n x n`` matrix).

Two forms build the Gram ``G = M H M^T``: :func:`kamh_gram_t` (one point, the history
transposed: the step methods' per-iteration path) and :func:`kamh_grams` (batched over
points: KameleonSMC's particles, the same compiled loops at each point).  Both are compiled
with Numba; :func:`kamh_gram` and ``_kamh_grams_numpy`` are the NumPy references, which the
compiled forms replace without Numba.  ``tests/test_compiled.py`` checks that they agree
to ``1e-10``.

One scale convention: ``nu^2`` multiplies this ``G`` in :func:`proposal_covariance`.  The steps
start it at ``2.38^2 / (2 d)`` times :func:`natural_nu2_scale` and adapt it (Robbins-Monro);
KameleonSMC at ``2.38^2 / mean trace(G)`` over the particles, times ``exp(2 log_nu)`` adapted
between stages (:meth:`~pymc_kameleon.particles.proposal.StageProposal.fit`).

References
----------
- Sejdinovic, Strathmann, Lomeli Garcia, Andrieu, Gretton (2014). Kernel Adaptive
  Metropolis-Hastings. ICML. Proposition 2 and Eq. (3).
"""

from __future__ import annotations

import math

import numpy as np

from .jit import HAVE_NUMBA, jit_reduce, row_gram
from .kernels import gaussian_kernel_grads
from .linalg import BatchedMultivariateNormal, MultivariateNormal

__all__ = [
    "kamh_covariance",
    "kamh_covariances",
    "kamh_gram",
    "kamh_gram_t",
    "kamh_grams",
    "kamh_proposal",
    "kamh_proposals",
    "natural_nu2_scale",
    "proposal_covariance",
]

# M = 2 x (kernel gradients), so M H M^T = 4 x the centred gradients' Gram (both paths)
_GRAM_FACTOR = 4.0
# points per block of kamh_grams: the (block, n, d) gradient array stays below ~32 MB
_GRAM_BLOCK_FLOATS = 4_000_000


def kamh_gram(y: np.ndarray, Z: np.ndarray, bandwidth: float) -> np.ndarray:
    """``M H M^T`` at ``y`` for the Gaussian kernel (the adaptive part, without ``nu^2``).

    Parameters
    ----------
    y : ndarray, shape (d,)
        Current point.
    Z : ndarray, shape (n, d)
        History subsample.
    bandwidth : float
        Gaussian kernel bandwidth ``s``.

    Returns
    -------
    ndarray, shape (d, d)
        Symmetric positive semi-definite matrix.  It tends to zero when ``y`` is far from
        every ``z_i``, so the proposal falls back to ``N(y, gamma^2 I)`` there.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Proposition 2, Eq. (3) and Section 4.3.

    Examples
    --------
    >>> import numpy as np
    >>> G = kamh_gram(np.zeros(2), np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.1]]), 1.0)
    >>> bool(G[0, 0] > G[1, 1] > 0)  # the spread of the history is along the first axis
    True
    """
    return _kamh_grams_numpy(np.asarray(y, dtype=float)[None, :], Z, bandwidth)[0]


def kamh_grams(Y: np.ndarray, Z: np.ndarray, bandwidth: float) -> np.ndarray:
    """:func:`kamh_gram` at each row of ``Y`` (the batched form: the compiled loops of
    :func:`kamh_gram_t` at each point, or the NumPy reference without Numba).

    Parameters
    ----------
    Y : ndarray, shape (m, d)
        Points at which the matrices are built (e.g. all SMC particles).
    Z : ndarray, shape (n, d)
        History subsample (for SMC, the particle system of the stage).
    bandwidth : float
        Gaussian kernel bandwidth ``s``.

    Returns
    -------
    ndarray, shape (m, d, d)
        ``[j]`` is ``M H M^T`` at ``Y[j]``.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Proposition 2 and Eq. (3).

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.1]])
    >>> kamh_grams(np.zeros((3, 2)), Z, 1.0).shape
    (3, 2, 2)
    """
    Y = np.ascontiguousarray(np.atleast_2d(np.asarray(Y, dtype=float)))
    Z = np.atleast_2d(np.asarray(Z, dtype=float))
    if HAVE_NUMBA:
        return _kamh_grams_t(Y, np.ascontiguousarray(Z.T), float(bandwidth))
    return _kamh_grams_numpy(Y, Z, bandwidth)


def _kamh_grams_numpy(Y: np.ndarray, Z: np.ndarray, bandwidth: float) -> np.ndarray:
    """:func:`kamh_grams` in NumPy, in blocks of points (the reference)."""
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    Z = np.atleast_2d(np.asarray(Z, dtype=float))
    m, d = Y.shape
    out = np.empty((m, d, d))
    block = max(1, _GRAM_BLOCK_FLOATS // max(1, Z.shape[0] * d))
    for start in range(0, m, block):
        Mt = gaussian_kernel_grads(Y[start : start + block], Z, bandwidth)  # rows: M / 2
        Mt -= Mt.mean(axis=1, keepdims=True)
        np.matmul(Mt.transpose(0, 2, 1), Mt, out=out[start : start + block])
    out *= _GRAM_FACTOR
    return out


def _kamh_gram_t(y, Zt, bandwidth):
    """:func:`kamh_gram` as loops, the history stored as columns (compiled: :func:`kamh_gram_t`).

    Kernel gradients, centring and ``4 Mc^T Mc`` on ``Zt = Z.T`` (``(d, n)``,
    C-contiguous): every inner loop then runs along a contiguous row of length ``n`` and
    vectorises, and the ``d (d + 1) / 2`` entries of the symmetric result are contiguous dot
    products of the rows of ``Mc^T`` (:func:`~pymc_kameleon.math.jit.row_gram`).

    Parameters
    ----------
    y : ndarray, shape (d,)
        Current point.
    Zt : ndarray, shape (d, n)
        History subsample, transposed and C-contiguous.
    bandwidth : float
        Gaussian kernel bandwidth ``s``.

    Returns
    -------
    ndarray, shape (d, d)
        ``M H M^T`` at ``y``, as :func:`kamh_gram` (to ``1e-10``: the reductions are
        reassociated).
    """
    d, n = Zt.shape
    inv_s2 = 1.0 / bandwidth**2
    half = -0.5 * inv_s2
    Mt = np.empty((d, n))
    weight = np.zeros(n)  # squared distances, then kernel weights k(y, z_i) / s^2
    for j in range(d):
        yj = y[j]
        for i in range(n):
            diff = Zt[j, i] - yj
            Mt[j, i] = diff
            weight[i] += diff * diff
    for i in range(n):
        weight[i] = math.exp(weight[i] * half) * inv_s2
    for j in range(d):
        total = 0.0
        for i in range(n):
            v = Mt[j, i] * weight[i]
            Mt[j, i] = v
            total += v
        mean = total / n
        for i in range(n):
            Mt[j, i] -= mean
    return row_gram(Mt, _GRAM_FACTOR)


def _kamh_gram_t_ref(y: np.ndarray, Zt: np.ndarray, bandwidth: float) -> np.ndarray:
    """:func:`kamh_gram` (NumPy) with :func:`kamh_gram_t`'s argument layout."""
    return kamh_gram(y, Zt.T, bandwidth)


#: :func:`kamh_gram` at one point ``y`` from the transposed history ``Zt = Z.T``
#: (``(d, n)``, C-contiguous): the step methods' Gram, the loops of ``_kamh_gram_t``
#: compiled with Numba, else the NumPy reference (``tests/test_compiled.py``: equal to 1e-10).
kamh_gram_t = jit_reduce(_kamh_gram_t) if HAVE_NUMBA else _kamh_gram_t_ref


def _kamh_grams_loop(Y, Zt, bandwidth):
    """:func:`kamh_gram_t` at each row of ``Y`` (C-contiguous), into one ``(m, d, d)`` array."""
    m, d = Y.shape[0], Zt.shape[0]
    out = np.empty((m, d, d))
    for k in range(m):
        out[k] = kamh_gram_t(Y[k], Zt, bandwidth)
    return out


# the batched Gram compiled: 5-7 times the NumPy blocks' speed at SMC's 1 000 particles
# against 500 (docs/benchmarks/numerics.md)
_kamh_grams_t = jit_reduce(_kamh_grams_loop) if HAVE_NUMBA else _kamh_grams_loop


def kamh_covariance(
    y: np.ndarray, Z: np.ndarray, bandwidth: float, gamma: float, nu2: float
) -> np.ndarray:
    """Full proposal covariance ``gamma^2 I + nu^2 M H M^T`` at ``y``.

    Parameters
    ----------
    y : ndarray, shape (d,)
        Point at which the proposal is built.
    Z : ndarray, shape (n, d)
        History subsample.
    bandwidth : float
        Gaussian kernel bandwidth ``s``.
    gamma : float
        Standard deviation of the isotropic exploration term.
    nu2 : float
        Scale ``nu^2`` of the adaptive part.

    Returns
    -------
    ndarray, shape (d, d)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Proposition 2.

    Examples
    --------
    Far from the history only the exploration term is left:

    >>> import numpy as np
    >>> Z = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.5]])
    >>> kamh_covariance(np.array([50.0, 50.0]), Z, 1.0, gamma=0.2, nu2=1.0).round(6)
    array([[0.04, 0.  ],
           [0.  , 0.04]])
    """
    return kamh_covariances(np.asarray(y, dtype=float)[None, :], Z, bandwidth, gamma, nu2)[0]


def kamh_covariances(
    Y: np.ndarray, Z: np.ndarray, bandwidth: float, gamma: float, nu2: float
) -> np.ndarray:
    """:func:`kamh_covariance` at each row of ``Y``, shape ``(m, d, d)``.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Proposition 2.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> kamh_covariances(np.full((2, 2), 50.0), Z, 1.0, gamma=0.5, nu2=1.0)[1].round(6)
    array([[0.25, 0.  ],
           [0.  , 0.25]])
    """
    G = kamh_grams(Y, Z, bandwidth)
    return proposal_covariance(G, gamma, nu2, out=G)


def proposal_covariance(G: np.ndarray, gamma: float, nu2: float,
                        out: np.ndarray | None = None) -> np.ndarray:
    """``gamma^2 I + nu^2 G``: the proposal covariance of a Gram (or a stack of Grams).

    The parameterisation of KAMH (and of F-KAMH, whose ``G`` is its feature-space Gram and
    ``nu^2`` its ``eta^2``): KameleonSMC's batched proposals and the step methods'
    factorisation fallback build it here.  The steps' compiled
    :func:`~pymc_kameleon.math.compiled.gaussian_factor` forms the same entries inside its
    factorisation loop (``gamma2 + scale * G[i, j]``, the same rounding), which saves an
    array per iteration.

    Parameters
    ----------
    G : ndarray, shape (..., d, d)
        The adaptive part, e.g. from :func:`kamh_grams` or :func:`kamh_gram_t`.
    gamma : float
        Standard deviation of the isotropic exploration term.
    nu2 : float
        Scale ``nu^2`` of the adaptive part.
    out : ndarray, optional
        Where to write the result (may be ``G`` itself).

    Returns
    -------
    ndarray, shape (..., d, d)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Proposition 2.

    Examples
    --------
    >>> import numpy as np
    >>> proposal_covariance(np.ones((2, 2)), gamma=0.5, nu2=2.0)
    array([[2.25, 2.  ],
           [2.  , 2.25]])
    """
    C = np.multiply(G, nu2, out=out)
    C += gamma**2 * np.eye(C.shape[-1])
    return C


def kamh_proposal(
    y: np.ndarray, Z: np.ndarray, bandwidth: float, gamma: float, nu2: float
) -> MultivariateNormal:
    """The proposal ``q_z(. | y)`` as a :class:`~pymc_kameleon.math.linalg.MultivariateNormal`.

    Both directions of the Metropolis-Hastings ratio use this function: the forward
    density at the current point and the reverse density at the proposed point, with the
    same ``Z``, bandwidth, ``gamma`` and ``nu2``.

    Parameters
    ----------
    y, Z, bandwidth, gamma, nu2
        As for :func:`kamh_covariance`.

    Returns
    -------
    MultivariateNormal
        ``N(y, kamh_covariance(y, Z, bandwidth, gamma, nu2))``.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Proposition 2 and Eq. (4).

    Examples
    --------
    The log Metropolis-Hastings correction of a move from ``y`` to ``x``:

    >>> import numpy as np
    >>> Z = np.random.default_rng(0).normal(size=(50, 2))
    >>> y, x = np.zeros(2), np.array([0.5, -0.3])
    >>> forward = kamh_proposal(y, Z, 1.0, gamma=0.2, nu2=0.5)
    >>> reverse = kamh_proposal(x, Z, 1.0, gamma=0.2, nu2=0.5)
    >>> correction = reverse.logpdf(y) - forward.logpdf(x)
    >>> bool(correction != 0.0)  # the proposal is not symmetric
    True
    """
    return MultivariateNormal.from_cov(y, kamh_covariance(y, Z, bandwidth, gamma, nu2))


def kamh_proposals(
    Y: np.ndarray, Z: np.ndarray, bandwidth: float, gamma: float, nu2: float
) -> BatchedMultivariateNormal:
    """The proposals ``q_z(. | y)`` at every row of ``Y`` (one per SMC particle).

    As :func:`kamh_proposal`, whose covariance it builds with :func:`kamh_covariances`;
    the Cholesky factors are those of :func:`~pymc_kameleon.math.linalg.safe_cholesky`, so
    each density equals the single-point one.

    Parameters
    ----------
    Y : ndarray, shape (m, d)
        Points at which the proposals are built.
    Z, bandwidth, gamma, nu2
        As for :func:`kamh_covariance`.

    Returns
    -------
    BatchedMultivariateNormal
        ``N(Y[j], kamh_covariance(Y[j], Z, bandwidth, gamma, nu2))`` for each ``j``.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Proposition 2 and Eq. (4).
    .. [2] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 5.2.1 (KASMC).

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.random.default_rng(0).normal(size=(50, 2))
    >>> Y = np.zeros((3, 2))
    >>> kamh_proposals(Y, Z, 1.0, gamma=0.2, nu2=0.5).logpdf(Y).shape
    (3,)
    """
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    return BatchedMultivariateNormal.from_covs(Y, kamh_covariances(Y, Z, bandwidth, gamma, nu2))


def natural_nu2_scale(bandwidth: float, n: int) -> float:
    """The scale ``s^4 / n`` on which ``nu^2`` is naturally measured.

    ``M`` has units of 1/length and ``M H M^T`` sums ``n`` terms, so ``nu^2 M H M^T`` has the
    units of a covariance when ``nu^2`` is a multiple of ``s^4 / n``.  The step methods adapt
    the dimensionless ratio ``nu^2 / (s^4 / n)``, which keeps the tuned acceptance rate stable
    when the subsample size or the bandwidth change.

    Parameters
    ----------
    bandwidth : float
        Kernel bandwidth ``s``.
    n : int
        Number of history points in the subsample.

    Returns
    -------
    float
        ``s^4 / n``.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 4.3 (covariance
       structure for the Gaussian kernel).

    Examples
    --------
    >>> natural_nu2_scale(2.0, 1000)
    0.016
    """
    return bandwidth**4 / max(int(n), 1)
