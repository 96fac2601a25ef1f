"""The MCMC Kameleon (KAMH) proposal.

``q_z(. | y) = N(y, gamma^2 I + nu^2 M_{z,y} H M_{z,y}^T)`` where, for the Gaussian kernel,
``M_{z,y} = (2 / s^2) [k(y, z_i) (z_i - y)]_{i=1..n}`` is ``d x n`` and ``H = I - 11^T / n``
is the centring matrix.  ``M H M^T`` is computed as ``Mc Mc^T`` with ``Mc = M - row means``
(``O(n d^2)``, no ``n x n`` matrix).

References
----------
Sejdinovic, Strathmann, Lomeli Garcia, Andrieu, Gretton (2014). Kernel Adaptive
Metropolis-Hastings. ICML. Proposition 2 and Eq. (3).
"""

from __future__ import annotations

import numpy as np

from .kernels import gaussian_kernel_grad
from .linalg import MultivariateNormal

__all__ = ["kamh_gram", "kamh_covariance", "kamh_proposal", "natural_nu2_scale"]


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

    Examples
    --------
    >>> import numpy as np
    >>> G = kamh_gram(np.zeros(2), np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.1]]), 1.0)
    >>> bool(G[0, 0] > G[1, 1] > 0)  # the spread of the history is along the first axis
    True
    """
    Mt = gaussian_kernel_grad(y, Z, bandwidth)  # (n, d): rows are columns of M / 2
    Mc = Mt - Mt.mean(axis=0)
    return 4.0 * (Mc.T @ Mc)


def kamh_covariance(
    y: np.ndarray, Z: np.ndarray, bandwidth: float, gamma: float, nu2: float
) -> np.ndarray:
    """Full proposal covariance ``gamma^2 I + nu^2 M H M^T`` at ``y``."""
    d = np.asarray(y).shape[0]
    return gamma**2 * np.eye(d) + nu2 * kamh_gram(y, Z, bandwidth)


def kamh_proposal(
    y: np.ndarray, Z: np.ndarray, bandwidth: float, gamma: float, nu2: float
) -> MultivariateNormal:
    """The proposal distribution ``q_z(. | y)`` as a :class:`MultivariateNormal`.

    Both directions of the Metropolis-Hastings ratio use this function: the forward
    density at the current point and the reverse density at the proposed point, with the
    same ``Z``, bandwidth, ``gamma`` and ``nu2``.
    """
    return MultivariateNormal.from_cov(y, kamh_covariance(y, Z, bandwidth, gamma, nu2))


def natural_nu2_scale(bandwidth: float, n: int) -> float:
    """The scale ``s^4 / n`` on which ``nu^2`` is naturally measured.

    ``M`` has units of 1/length and ``M H M^T`` sums ``n`` terms, so ``nu^2 M H M^T`` has the
    units of a covariance when ``nu^2`` is a multiple of ``s^4 / n``.  The step methods adapt
    the dimensionless ratio ``nu^2 / (s^4 / n)``, which keeps the tuned acceptance rate stable
    when the subsample size or the bandwidth change.
    """
    return bandwidth**4 / max(int(n), 1)
