"""Random Fourier features for the Gaussian kernel, with their derivatives.

For ``k(x, y) = exp(-||x - y||^2 / (2 s^2))`` Bochner's theorem gives frequencies
``omega ~ N(0, I / s^2)``.  Two embeddings are provided:

* ``"sincos"`` (embedding A): ``D`` even, ``D/2`` frequencies,
  ``phi(x) = sqrt(2/D) [sin(omega_j . x), cos(omega_j . x)]_j`` (sines first, then cosines);
* ``"phase"`` (embedding B): ``D`` frequencies and phases ``b_j ~ U[0, 2 pi]``,
  ``phi(x) = sqrt(2/D) [cos(omega_j . x + b_j)]_j``.

Both satisfy ``E[phi(x) . phi(y)] = k(x, y)``.  The frequencies are stored as standard normal
draws ``omega0`` and divided by the bandwidth, so changing the bandwidth rescales the same
random basis instead of drawing a new one.  Optional relative *lengths* ``l`` (one per
coordinate) give the anisotropic (automatic relevance determination) kernel
``exp(-sum_i (x_i - y_i)^2 / (2 s^2 l_i^2))``: column ``i`` of ``omega0`` is divided by
``s l_i``.

The standard normal draws ``omega0`` can be

* ``"gaussian"``: independent (Rahimi and Recht);
* ``"orthogonal"``: orthogonal random features (Yu et al., 2016): blocks of ``d`` exactly
  orthogonal directions (a uniformly random rotation) with independent chi(d) norms.  Every
  row is still ``N(0, I)``, so the kernel estimate stays unbiased, and its variance is smaller
  than with independent rows;
* ``"halton"``: quasi-Monte Carlo features (Avron et al., 2016): a scrambled Halton sequence
  mapped through the normal quantile function.

For a finite ``D`` the error of the approximate kernel *gradients* (which F-KAMH's proposal
covariance is made of) grows like ``sqrt(d / D)``; the structured draws reduce it at no cost.

References
----------
- Rahimi, Recht (2007). Random features for large-scale kernel machines. NIPS.
- Sutherland, Schneider (2015). On the error of random Fourier features. UAI.
- Yu, Suresh, Choromanski, Holtmann-Rice, Kumar (2016). Orthogonal random features. NIPS.
- Avron, Sindhwani, Yang, Mahoney (2016). Quasi-Monte Carlo feature maps for shift-invariant
  kernels. JMLR 17(120).
- Strathmann (2018). Kernel methods for Monte Carlo. PhD thesis, Section 4.6.2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

import numpy as np

__all__ = ["RandomFourierFeatures", "lowrank_gram", "standard_frequencies"]

Embedding = Literal["sincos", "phase"]
Frequencies = Literal["gaussian", "orthogonal", "halton"]


def standard_frequencies(
    n_freq: int, dim: int, rng: np.random.Generator, kind: Frequencies = "gaussian"
) -> np.ndarray:
    """``n_freq`` frequency vectors whose rows are marginally ``N(0, I_dim)``.

    Parameters
    ----------
    n_freq : int
        Number of frequency vectors.
    dim : int
        Input dimension ``d``.
    rng : numpy.random.Generator
    kind : {"gaussian", "orthogonal", "halton"}
        Independent rows; orthogonal random features (blocks of ``d`` orthogonal rows with
        chi(d) norms); or a scrambled Halton sequence mapped by the normal quantile function.

    Returns
    -------
    ndarray, shape (n_freq, dim)

    References
    ----------
    .. [1] Yu, F. X., Suresh, A. T., Choromanski, K., Holtmann-Rice, D., Kumar, S. (2016).
       Orthogonal random features. NIPS, Section 3 (ORF).
    .. [2] Avron, H., Sindhwani, V., Yang, J., Mahoney, M. W. (2016). Quasi-Monte Carlo
       feature maps for shift-invariant kernels. JMLR 17(120), Section 3.

    Examples
    --------
    >>> import numpy as np
    >>> W = standard_frequencies(6, 3, np.random.default_rng(0), "orthogonal")
    >>> G = W[:3] @ W[:3].T  # one block: orthogonal rows
    >>> bool(np.allclose(G - np.diag(np.diag(G)), 0.0))
    True
    """
    if kind == "gaussian":
        return rng.standard_normal((n_freq, dim))
    if kind == "orthogonal":
        blocks = []
        for _ in range(-(-n_freq // dim)):
            Q, R = np.linalg.qr(rng.standard_normal((dim, dim)))
            Q = Q * np.where(np.diag(R) < 0, -1.0, 1.0)  # Haar-distributed rotation
            norms = np.sqrt(rng.chisquare(dim, size=dim))
            blocks.append(Q.T * norms[:, None])
        return np.vstack(blocks)[:n_freq]
    if kind == "halton":
        from scipy.special import ndtri
        from scipy.stats import qmc

        u = qmc.Halton(dim, scramble=True, seed=rng).random(n_freq)
        return ndtri(np.clip(u, 1e-12, 1.0 - 1e-12))
    raise ValueError(f"unknown frequencies {kind!r}; use 'gaussian', 'orthogonal' or 'halton'")


@dataclass(frozen=True)
class RandomFourierFeatures:
    """A fixed random Fourier basis of ``n_features`` features.

    Create with :meth:`draw`.  All methods are pure functions of the stored draws.

    Parameters
    ----------
    omega0 : ndarray, shape (n_freq, d)
        Standard normal draws; the frequencies are ``omega0 / bandwidth``.
    phase : ndarray, shape (n_freq,)
        Phases ``b_j`` (zeros for ``"sincos"``).
    bandwidth : float
        Kernel bandwidth ``s``.
    embedding : {"sincos", "phase"}
        ``n_features = 2 n_freq`` sine/cosine pairs, or ``n_features = n_freq`` phased
        cosines.
    lengths : ndarray, shape (d,), optional
        Relative per-coordinate lengths ``l`` (the bandwidth of coordinate ``i`` is
        ``s l_i``); ``None`` is the isotropic kernel (all ones).

    References
    ----------
    .. [1] Rahimi, A., Recht, B. (2007). Random features for large-scale kernel machines.
       NIPS.
    .. [2] Sutherland, D. J., Schneider, J. (2015). On the error of random Fourier features.
       UAI.
    .. [3] Kotlicki, A. (2015). Fast Kernel Adaptive Metropolis-Hastings Algorithm. MSc
       dissertation, University of Oxford, Section 2.3 (embeddings (2.4) and (2.5)).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> rff = RandomFourierFeatures.draw(dim=2, n_features=2000, bandwidth=1.0, rng=rng)
    >>> x, y = np.zeros(2), np.array([1.0, 0.0])
    >>> approx = float(rff.features(x) @ rff.features(y))
    >>> bool(abs(approx - np.exp(-0.5)) < 0.05)
    True
    """

    omega0: np.ndarray  # (n_freq, d), standard normal
    phase: np.ndarray  # (n_freq,), zeros for "sincos"
    bandwidth: float
    embedding: Embedding
    lengths: np.ndarray | None = None  # (d,), relative per-coordinate lengths

    @classmethod
    def draw(
        cls,
        dim: int,
        n_features: int,
        bandwidth: float,
        rng: np.random.Generator,
        embedding: Embedding = "phase",
        frequencies: Frequencies = "gaussian",
    ) -> RandomFourierFeatures:
        """Draw a random basis.

        Parameters
        ----------
        dim : int
            Input dimension ``d``.
        n_features : int
            Number of features ``D`` (even for ``"sincos"``).
        bandwidth : float
            Kernel bandwidth ``s > 0``.
        rng : numpy.random.Generator
        embedding : {"phase", "sincos"}
        frequencies : {"gaussian", "orthogonal", "halton"}
            How the standard normal frequencies are drawn (see
            :func:`standard_frequencies`).
        """
        if embedding == "sincos":
            if n_features % 2:
                raise ValueError("the 'sincos' embedding needs an even number of features")
            n_freq = n_features // 2
            phase = np.zeros(n_freq)
            omega0 = standard_frequencies(n_freq, dim, rng, frequencies)
        elif embedding == "phase":
            n_freq = n_features
            omega0 = standard_frequencies(n_freq, dim, rng, frequencies)
            phase = rng.uniform(0.0, 2.0 * np.pi, size=n_freq)
        else:
            raise ValueError(f"unknown embedding {embedding!r}; use 'phase' or 'sincos'")
        return cls(omega0, phase, float(bandwidth), embedding)

    def with_bandwidth(self, bandwidth: float) -> RandomFourierFeatures:
        """The same random basis for another bandwidth (the lengths are kept)."""
        return replace(self, bandwidth=float(bandwidth))

    def with_lengths(self, lengths: np.ndarray | None) -> RandomFourierFeatures:
        """The same random basis with other relative per-coordinate lengths."""
        if lengths is not None:
            lengths = np.array(lengths, dtype=float)
            if lengths.shape != (self.dim,) or not np.all(np.isfinite(lengths) & (lengths > 0)):
                raise ValueError(f"lengths must be {self.dim} positive numbers, got {lengths!r}")
        return replace(self, lengths=lengths)

    @cached_property
    def omega(self) -> np.ndarray:
        """Frequencies ``omega_j = omega0_j / (s l)``, shape ``(n_freq, d)`` (computed
        once)."""
        if self.lengths is None:
            return self.omega0 / self.bandwidth
        return self.omega0 / (self.bandwidth * self.lengths)

    @property
    def n_features(self) -> int:
        n_freq = self.omega0.shape[0]
        return 2 * n_freq if self.embedding == "sincos" else n_freq

    @property
    def dim(self) -> int:
        return self.omega0.shape[1]

    def _angles(self, X: np.ndarray) -> np.ndarray:
        return X @ self.omega.T + self.phase

    def features(self, X: np.ndarray) -> np.ndarray:
        """Feature vectors ``phi(x)``: shape ``(D,)`` for one point, ``(n, D)`` for rows."""
        X = np.asarray(X, dtype=float)
        a = self._angles(X)
        c = np.sqrt(2.0 / self.n_features)
        if self.embedding == "sincos":
            return c * np.concatenate([np.sin(a), np.cos(a)], axis=-1)
        return c * np.cos(a)

    def _jacobian_factors(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(s, W)`` with ``d phi_j / d x_l = s_j W_jl``: the derivative of each feature's
        scalar function at its angle and the frequency of each feature."""
        a = self._angles(X)
        c = np.sqrt(2.0 / self.n_features)
        if self.embedding == "sincos":
            return (c * np.concatenate([np.cos(a), -np.sin(a)], axis=-1),
                    np.concatenate([self.omega, self.omega], axis=0))
        return -c * np.sin(a), self.omega

    def jacobian(self, X: np.ndarray) -> np.ndarray:
        """``d phi / d x``: shape ``(D, d)`` for one point, ``(n, D, d)`` for rows."""
        dscalar, omega = self._jacobian_factors(np.asarray(X, dtype=float))
        return dscalar[..., :, None] * omega

    def jacobian_columns(self, X: np.ndarray) -> np.ndarray:
        """All ``d phi / d x_l (x_i)`` of the rows ``x_i`` of ``X`` as the columns of a
        ``(D, n d)`` array (column ``i d + l``): :meth:`jacobian` transposed to
        ``(D, n, d)``, computed in that layout (no transposed copy; the same products)."""
        X = np.array(X, dtype=float, ndmin=2)
        dscalar, omega = self._jacobian_factors(X)
        cols = np.empty((omega.shape[0], X.shape[0], X.shape[1]))  # C order: no copy below
        np.multiply(dscalar.T[:, :, None], omega[:, None, :], out=cols)
        return cols.reshape(cols.shape[0], -1)

    def lowrank_gram(self, y: np.ndarray, root: np.ndarray) -> np.ndarray:
        """``J(y)^T R^T R J(y)``: the F-KAMH adaptive part with the feature covariance given
        by a factor ``R`` (shape ``(r, D)``, ``R^T R = C``), in ``O(r D d)``.

        The reference of the compiled
        :func:`pymc_kameleon.math.compiled.rff_lowrank_gram`.
        """
        RJ = root @ self.jacobian(y)
        return RJ.T @ RJ

    def full_gram(self, y: np.ndarray, cov: np.ndarray) -> np.ndarray:
        """``J(y)^T C J(y)``: the F-KAMH adaptive part with the full feature covariance ``C``
        (shape ``(D, D)``), in ``O(D^2 d)``.

        The reference of the compiled :func:`pymc_kameleon.math.compiled.rff_full_gram`.
        """
        J = self.jacobian(y)
        return J.T @ (cov @ J)

    def omega_sq_norms(self) -> np.ndarray:
        """``||omega_{j(i)}||^2`` for every feature ``i`` (shape ``(D,)``).

        Every feature satisfies ``sum_l d^2 phi_i / d x_l^2 = -||omega_{j(i)}||^2 phi_i``,
        which the score-matching estimators use.
        """
        sq = np.sum(self.omega**2, axis=1)
        return np.concatenate([sq, sq]) if self.embedding == "sincos" else sq


def lowrank_gram(
    y: np.ndarray, omega: np.ndarray, phase: np.ndarray, root: np.ndarray, sincos: bool
) -> np.ndarray:
    """:meth:`RandomFourierFeatures.lowrank_gram` with the basis given by its arrays.

    ``omega`` are the frequencies ``omega0 / s`` (the signature of the compiled version).

    Examples
    --------
    >>> import numpy as np
    >>> rff = RandomFourierFeatures.draw(2, 20, 1.0, np.random.default_rng(0), "sincos")
    >>> root = np.eye(20)[:3]
    >>> G = lowrank_gram(np.zeros(2), rff.omega, rff.phase, root, True)
    >>> bool(np.allclose(G, rff.lowrank_gram(np.zeros(2), root)))
    True
    """
    embedding = "sincos" if sincos else "phase"
    return RandomFourierFeatures(omega, phase, 1.0, embedding).lowrank_gram(y, root)


def full_gram(
    y: np.ndarray, omega: np.ndarray, phase: np.ndarray, cov: np.ndarray, sincos: bool
) -> np.ndarray:
    """:meth:`RandomFourierFeatures.full_gram` with the basis given by its arrays.

    Examples
    --------
    >>> import numpy as np
    >>> rff = RandomFourierFeatures.draw(2, 20, 1.0, np.random.default_rng(0), "sincos")
    >>> G = full_gram(np.zeros(2), rff.omega, rff.phase, np.eye(20), True)
    >>> J = rff.jacobian(np.zeros(2))
    >>> bool(np.allclose(G, J.T @ J))
    True
    """
    embedding = "sincos" if sincos else "phase"
    return RandomFourierFeatures(omega, phase, 1.0, embedding).full_gram(y, cov)
