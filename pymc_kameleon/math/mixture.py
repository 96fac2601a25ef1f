"""A Gaussian mixture fitted to a particle system, as an independent MH proposal.

Used by the SMC kernel (:class:`pymc_kameleon.KameleonSMC`) in the whitened particle
coordinates: one Gaussian with the particles' mean and covariance (PyMC's IMH proposal)
plus one Gaussian per k-means cluster of the particles, so the proposal follows separated
modes and curved ridges that a single Gaussian covers only with low acceptance.

References
----------
- Arthur, D., Vassilvitskii, S. (2007). k-means++: the advantages of careful seeding.
  SODA.
- Andrieu, C., Thoms, J. (2008). A tutorial on adaptive MCMC. Statistics and Computing 18,
  Section 5 (mixture proposals fitted to samples for independence samplers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.linalg import LinAlgError
from scipy.linalg.lapack import dtrtrs

from .importance import logsumexp
from .linalg import safe_cholesky

__all__ = ["GaussianMixture", "em_refine", "kmeans", "min_component_size"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def kmeans(X: np.ndarray, k: int, rng: np.random.Generator, iters: int = 20) -> np.ndarray:
    """Cluster labels of the rows of ``X`` by Lloyd's iterations from a k-means++ start.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Points.
    k : int
        Number of clusters (at most ``n``).
    rng : numpy.random.Generator
        For the k-means++ seeding.
    iters : int, default 20
        At most this many Lloyd iterations (fewer if the labels stop changing).

    Returns
    -------
    ndarray of int, shape (n,)
        Labels in ``0 .. k - 1``; a cluster may end up empty.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.r_[np.zeros((5, 1)), np.ones((5, 1)) * 10]
    >>> labels = kmeans(X, 2, np.random.default_rng(0))
    >>> bool(len(set(labels[:5])) == len(set(labels[5:])) == 1 and labels[0] != labels[-1])
    True
    """
    X = np.asarray(X, dtype=float)
    n = len(X)
    k = min(int(k), n)
    centres = [X[rng.integers(n)]]
    d2 = np.sum((X - centres[0]) ** 2, axis=1)
    for _ in range(1, k):
        total = d2.sum()
        i = rng.choice(n, p=d2 / total) if total > 0 else rng.integers(n)
        centres.append(X[i])
        d2 = np.minimum(d2, np.sum((X - X[i]) ** 2, axis=1))
    C = np.array(centres)
    labels = np.full(n, -1)
    for _ in range(iters):
        new = np.argmin(((X[:, None, :] - C[None]) ** 2).sum(-1), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            if np.any(labels == j):
                C[j] = X[labels == j].mean(axis=0)
    return labels


def min_component_size(d: int) -> int:
    """Fewest points a fitted component needs: its number of parameters, ``d (d + 3) / 2``
    (mean and covariance).  With fewer, the fit follows the particles' noise: with 150
    particles in 9 dimensions four k-means clusters of about 37 each made a proposal
    narrower than the particles' Gaussian (docs/benchmarks/smc.md, GP-Glass), and on
    the 8-d hare-lynx fit four EM components of about 75 particles each, above this
    size, still did (R-hat 1.42 across two SMC chains against 1.04 without them), hence
    :meth:`GaussianMixture.fit_clusters` asks for twice as many per cluster on average.

    >>> min_component_size(1), min_component_size(4), min_component_size(9)
    (2, 14, 54)
    """
    return d * (d + 3) // 2


def _component_logpdfs(X: np.ndarray, means: np.ndarray, chols: np.ndarray,
                       log_w: np.ndarray | None = None) -> np.ndarray:
    """``log_w[j] + log N(x_i; means[j], chols[j] chols[j]^T)`` as an array of shape
    ``(len(means), len(X))`` (``log_w`` default 0)."""
    d = X.shape[1]
    out = np.empty((len(means), len(X)))
    log_w = np.zeros(len(means)) if log_w is None else log_w
    for j, (lw, m, L) in enumerate(zip(log_w, means, chols, strict=True)):
        # LAPACK's triangular solve as SciPy's solve_triangular calls it, without its checks
        z, info = dtrtrs(L, (X - m).T, lower=1)
        if info:
            raise LinAlgError(f"singular Cholesky factor of component {j}")
        const = lw - np.sum(np.log(L.diagonal())) - 0.5 * d * _LOG_2PI
        out[j] = const - 0.5 * np.einsum("ij,ij->j", z, z)
    return out


def em_refine(X: np.ndarray, weights: np.ndarray, means: np.ndarray, covs: np.ndarray,
              iters: int, tol: float = 1e-6, ridge: float = 1e-6
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """EM iterations for a Gaussian mixture fitted to the rows of ``X`` (maximum likelihood).

    E-step: responsibilities ``r_ij ∝ w_j N(x_i; m_j, C_j)``; M-step: ``w_j = mean_i r_ij``,
    ``m_j`` and ``C_j`` the ``r_.j``-weighted mean and covariance (plus ``ridge`` times
    their mean variance on the diagonal).  Stops after ``iters`` iterations or when the mean
    log likelihood gains less than ``tol``; a component whose responsibilities sum to fewer
    than :func:`min_component_size` points is dropped (its covariance would be poorly
    determined).

    Parameters
    ----------
    X : ndarray, shape (n, d)
    weights, means, covs : ndarray, shapes (k,), (k, d), (k, d, d)
        The start (e.g. k-means clusters).
    iters : int
        At most this many iterations.
    tol, ridge : float
        Stopping tolerance and covariance regularisation.

    Returns
    -------
    weights, means, covs : ndarray
        The fitted mixture (at most ``k`` components, weights summing to 1).

    References
    ----------
    .. [1] Dempster, A. P., Laird, N. M., Rubin, D. B. (1977). Maximum likelihood from
       incomplete data via the EM algorithm. JRSS B 39(1), 1-38.
    .. [2] Bishop, C. M. (2006). Pattern Recognition and Machine Learning, Section 9.2.2.

    Examples
    --------
    Two components started on one cloud stay a valid mixture and fit it as well as one:

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> w, m, C = em_refine(X, np.array([0.5, 0.5]), np.array([[-1.0, 0.0], [1.0, 0.0]]),
    ...                     np.array([np.eye(2), np.eye(2)]), 50)
    >>> bool(np.isclose(w.sum(), 1.0)), bool(np.allclose(w @ m, X.mean(0)))
    (True, True)
    """
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    w, m = np.array(weights, dtype=float), np.array(means, dtype=float).reshape(-1, d)
    C = np.array(covs, dtype=float).reshape(len(w), d, d)  # also for d = 1 (scalar "covs")
    old = -np.inf
    for _ in range(int(iters)):
        log_p = np.log(w)[:, None] + _component_logpdfs(X, m, _cholesky_factors(C))
        log_norm = logsumexp(log_p, axis=0)
        mean_ll = float(np.mean(log_norm))
        if mean_ll - old < tol:
            break
        old = mean_ll
        R = np.exp(log_p - log_norm)  # (k, n) responsibilities
        keep = R.sum(axis=1) >= min_component_size(d)
        if not keep.any():
            break
        R = R[keep] / R[keep].sum(axis=0, keepdims=True).clip(min=1e-300)
        Nk = R.sum(axis=1)
        w = Nk / n
        m = (R @ X) / Nk[:, None]
        C = np.empty((len(w), d, d))
        for j in range(len(w)):
            D = X - m[j]
            C[j] = (R[j][:, None] * D).T @ D / Nk[j]
        C += (ridge * np.mean(np.diagonal(C, axis1=1, axis2=2), axis=1))[:, None, None] * np.eye(d)
    return w / w.sum(), m, C


def _cholesky_factors(C: np.ndarray) -> np.ndarray:
    """:func:`~pymc_kameleon.math.linalg.safe_cholesky` of each matrix of the stack ``C``:
    one batched factorisation when every matrix is positive definite (the usual case, the
    same factors), else one by one with its jitter."""
    sym = 0.5 * (C + np.swapaxes(C, -1, -2))
    if np.all(np.isfinite(sym)):
        try:
            return np.linalg.cholesky(sym)
        except LinAlgError:
            pass
    return np.array([safe_cholesky(c)[0] for c in C])


@dataclass(frozen=True)
class GaussianMixture:
    """``sum_k weights[k] N(means[k], chols[k] chols[k]^T)``.

    Examples
    --------
    >>> import numpy as np
    >>> q = GaussianMixture(np.array([0.5, 0.5]), np.array([[-1.0], [1.0]]),
    ...                     np.ones((2, 1, 1)))
    >>> bool(np.isclose(q.logpdf(np.zeros((1, 1)))[0], -0.5 - 0.5 * np.log(2 * np.pi)))
    True
    """

    weights: np.ndarray
    means: np.ndarray
    chols: np.ndarray

    @classmethod
    def fit_clusters(cls, X: np.ndarray, n_clusters: int, rng: np.random.Generator,
                     global_weight: float = 0.5, em_iters: int = 0) -> GaussianMixture:
        """One Gaussian with the mean and covariance of all ``X`` (weight ``global_weight``)
        and one per k-means cluster with its own mean and covariance (the rest of the
        weight, in proportion to the cluster sizes).  Clusters of fewer than
        :func:`min_component_size` points are left out (their covariance would be poorly
        determined), and so is everything but the global Gaussian when none is left or
        when ``X`` has fewer than twice that many points per cluster on average.

        With ``em_iters > 0`` the cluster Gaussians are then refined by at most that many
        EM iterations (:func:`em_refine`: the maximum-likelihood mixture of that many
        Gaussians, from the k-means start), so that overlapping components can fit a
        unimodal or curved cloud that hard clusters cut into pieces; the global Gaussian
        keeps its weight and is not refitted.

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(1)
        >>> X = np.r_[rng.normal(-5, 1, (200, 2)), rng.normal(5, 1, (200, 2))]
        >>> q = GaussianMixture.fit_clusters(X, 2, rng)
        >>> len(q.weights), bool(q.logpdf(np.full((1, 2), 5.0))[0] > q.logpdf(np.zeros((1, 2)))[0])
        (3, True)
        """
        X = np.asarray(X, dtype=float)
        n, d = X.shape
        means, covs, weights = [X.mean(axis=0)], [np.cov(X, rowvar=False, ddof=0)], [1.0]
        # clusters only with twice a component's parameters per cluster on average
        if n_clusters > 1 and n >= 2 * n_clusters * min_component_size(d):
            labels = kmeans(X, n_clusters, rng)
            sizes = np.bincount(labels, minlength=n_clusters)
            kept = [j for j in range(n_clusters) if sizes[j] >= min_component_size(d)]
            if kept:
                weights = [global_weight]
                total = sum(sizes[j] for j in kept)
                for j in kept:
                    Xj = X[labels == j]
                    means.append(Xj.mean(axis=0))
                    covs.append(np.cov(Xj, rowvar=False, ddof=0))
                    weights.append((1.0 - global_weight) * sizes[j] / total)
                if em_iters > 0:
                    w_c, means[1:], covs[1:] = em_refine(
                        X, np.array(weights[1:]) / (1.0 - global_weight),
                        np.array(means[1:]), np.array(covs[1:]), em_iters)
                    weights[1:] = list((1.0 - global_weight) * w_c)
        covs = np.array([np.atleast_2d(c) for c in covs])
        chols = np.array([safe_cholesky(c + 1e-6 * np.mean(np.diag(c)) * np.eye(d))[0]
                          for c in covs])
        return cls(np.array(weights), np.array(means), chols)

    def logpdf(self, X: np.ndarray) -> np.ndarray:
        """Log density of each row of ``X``, shape ``(len(X),)``."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        with np.errstate(divide="ignore"):  # a zero weight is a component that is left out
            log_w = np.log(self.weights)
        return logsumexp(_component_logpdfs(X, self.means, self.chols, log_w), axis=0)

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` draws, shape ``(size, d)``: a component by weight, then its Gaussian."""
        idx = rng.choice(len(self.weights), size=size, p=self.weights)
        eps = rng.standard_normal((size, self.means.shape[1]))
        return self.means[idx] + np.einsum("nij,nj->ni", self.chols[idx], eps)
