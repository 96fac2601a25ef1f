"""The banana and flower targets: log densities, exact samplers and quantile-coverage checks.

Pure NumPy / SciPy (no PyMC).  :func:`banana_coverage_error` checks a sampler's draws against
the exact answer, as in the experiments of Sejdinovic et al. (2014, Section 5.2); the PyMC model
of the target is :func:`pymc_kameleon.models.banana_model`.  The flower target (used by the
benchmarks and tests; its PyMC model is :func:`pymc_kameleon.models.synthetic.flower_model`)
has no closed-form regions: :func:`quantile_coverage_error` compares draws with a large
exact sample of :func:`flower_sample` instead.

Banana ``B(b, v)`` (Haario et al., 1999), ``d >= 2``::

    B(y; b, v) = N(y1; 0, v) N(y2; b (y1^2 - v), 1) prod_{j>=3} N(yj; 0, 1).

The map ``z = (y1 / sqrt(v), y2 - b (y1^2 - v), y3, ..., yd)`` sends ``B(b, v)`` to
``N(0, I_d)``, so ``|z|^2 ~ chi2_d`` and the probability of the region ``|z|^2 <= chi2_d.ppf(q)``
is exactly ``q``.  :func:`banana_coverage_error` compares the fraction of draws in these regions
with ``q`` for ``q = 0.1, ..., 0.9``.

Flower ``F(r0, A, w, s)``, ``d >= 2``, unnormalised::

    F(x) = exp(-(r - r0 - A cos(w atan2(x2, x1)))^2 / (2 s^2)) prod_{j>=3} N(xj; 0, 1),

with ``r = sqrt(x1^2 + x2^2)`` (the paper prints the exponent without the square; the square is
meant).  ``A = 0`` is a ring of radius ``r0``.  Its mean is zero by symmetry when ``A = 0`` or
``w`` is an integer with ``|w| >= 2`` (rotations by ``2 pi / w``); the normalising constant has
no closed form (:func:`flower_log_normaliser` computes it by one-dimensional quadrature).
:func:`flower_sample` draws exact i.i.d. samples, so the generic
:func:`quantile_coverage_error` against a large exact sample plays the role of the banana's
closed-form metric (:func:`pymc_kameleon.models.targets.banana_coverage_error`).

All functions take the draws as an array of shape ``(..., d)`` (e.g. ``(n, d)``, or
``(chains, draws, d)`` as stored by ArviZ); log densities are vectorised over the leading axes.

References
----------
- Haario, Saksman, Tamminen (1999). Adaptive proposal distribution for random walk
  Metropolis algorithm. Computational Statistics 14(3), 375-395.
- Sejdinovic, Strathmann, Lomeli, Andrieu, Gretton (2014). Kernel adaptive
  Metropolis-Hastings. ICML 2014, Section 5.2.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate, special, stats

from ..validation import check_integral, check_positive

__all__ = [
    "QUANTILE_LEVELS",
    "banana_coverage",
    "banana_coverage_error",
    "banana_logp",
    "banana_sample",
    "banana_to_standard",
    "flower_log_normaliser",
    "flower_logp",
    "flower_sample",
    "quantile_coverage",
    "quantile_coverage_error",
    "squared_norm",
]

#: The quantile levels of the paper's coverage metric: 0.1, 0.2, ..., 0.9.
QUANTILE_LEVELS: tuple[float, ...] = tuple(np.arange(1, 10) / 10)

#: ``log(2 pi)``, the constant of Gaussian log densities (shared with the model factories).
LOG_2PI = float(np.log(2.0 * np.pi))

RNGLike = np.random.Generator | int | None


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------


def _points(X: ArrayLike, min_dim: int = 2) -> np.ndarray:
    """``X`` as a float array of shape ``(..., d)`` with ``d >= min_dim``."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 0 or X.shape[-1] < min_dim:
        raise ValueError(f"expected points of dimension >= {min_dim} on the last axis: {X.shape}")
    return X


def _draws(X: ArrayLike, min_dim: int = 1) -> np.ndarray:
    """Draws as a 2-d array ``(n, d)``; leading axes (chains, draws) are flattened."""
    X = np.asarray(X, dtype=float)
    if X.ndim < 2:
        raise ValueError(f"expected draws of shape (n, d) or (..., n, d), got {X.shape}")
    if X.shape[-1] < min_dim:
        raise ValueError(f"expected dimension >= {min_dim} on the last axis, got {X.shape}")
    return X.reshape(-1, X.shape[-1])


def _levels(quantiles: ArrayLike) -> np.ndarray:
    q = np.atleast_1d(np.asarray(quantiles, dtype=float))
    if q.ndim != 1 or np.any((q <= 0) | (q >= 1)):
        raise ValueError("quantile levels must be a 1-d sequence of numbers in (0, 1)")
    return q


def _check_dim(dim: int) -> int:
    return check_integral("dim", dim, minimum=2)


def _scalar_or_array(out: np.ndarray) -> float | np.ndarray:
    return float(out) if out.ndim == 0 else out


def squared_norm(X: ArrayLike) -> np.ndarray:
    """Squared Euclidean norm of each row, the statistic of the quantile-coverage metrics.

    Parameters
    ----------
    X : array_like, shape (..., d)
        Points.

    Returns
    -------
    ndarray, shape ``X.shape[:-1]``

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 (quantile regions
       of the radius).

    Examples
    --------
    >>> squared_norm([[3.0, 4.0], [1.0, 0.0]])
    array([25.,  1.])
    """
    X = np.asarray(X, dtype=float)
    return np.sum(X * X, axis=-1)


# ----------------------------------------------------------------------------------------
# banana
# ----------------------------------------------------------------------------------------


def banana_logp(X: ArrayLike, b: float = 0.1, v: float = 100.0) -> float | np.ndarray:
    """Normalised log density of the banana target ``B(b, v)`` (Haario et al., 1999).

    Parameters
    ----------
    X : array_like, shape (..., d)
        Points, ``d >= 2``.  Vectorised over the leading axes.
    b : float
        Twist (``0.03`` moderate, ``0.1`` strong in Sejdinovic et al., 2014).
    v : float
        Variance of the first coordinate (``100`` in the paper).

    Returns
    -------
    float or ndarray of shape ``X.shape[:-1]``
        ``log N(y1; 0, v) + log N(y2; b (y1^2 - v), 1) + sum_{j>=3} log N(yj; 0, 1)``.

    References
    ----------
    .. [1] Haario, H., Saksman, E., Tamminen, J. (1999). Adaptive proposal distribution for
       random walk Metropolis algorithm. Computational Statistics 14(3), 375-395.
    .. [2] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2.

    Examples
    --------
    At ``y1 = 0`` the conditional mean of ``y2`` is ``b (0 - v) = -10``:

    >>> bool(np.isclose(banana_logp([0.0, -10.0]), -np.log(2 * np.pi * 10.0)))
    True
    >>> banana_logp(np.zeros((3, 8))).shape
    (3,)
    """
    v = check_positive("v", v)
    X = _points(X)
    d = X.shape[-1]
    y1, y2 = X[..., 0], X[..., 1]
    twist = y2 - b * (y1 * y1 - v)
    rest = np.sum(X[..., 2:] ** 2, axis=-1)
    out = -0.5 * (y1 * y1 / v + twist * twist + rest) - 0.5 * d * LOG_2PI - 0.5 * np.log(v)
    return _scalar_or_array(np.asarray(out))


def banana_sample(
    n: int, dim: int = 2, b: float = 0.1, v: float = 100.0, rng: RNGLike = None
) -> np.ndarray:
    """Exact i.i.d. draws from the banana target ``B(b, v)``.

    Draws ``z ~ N(0, I)`` and applies the inverse of :func:`banana_to_standard`:
    ``y1 = sqrt(v) z1``, ``y2 = z2 + b (y1^2 - v)``, ``yj = zj`` for ``j >= 3``.

    Parameters
    ----------
    n : int
        Number of draws.
    dim : int
        Dimension ``d >= 2``.
    b, v : float
        Target parameters (see :func:`banana_logp`).
    rng : numpy.random.Generator, int or None
        Random generator or seed.

    Returns
    -------
    ndarray, shape (n, dim)

    References
    ----------
    .. [1] Haario, H., Saksman, E., Tamminen, J. (1999). Adaptive proposal distribution for
       random walk Metropolis algorithm. Computational Statistics 14(3), 375-395.

    Examples
    --------
    >>> Y = banana_sample(1000, dim=8, b=0.03, v=100.0, rng=0)
    >>> Y.shape
    (1000, 8)
    """
    dim = _check_dim(dim)
    v = check_positive("v", v)
    rng = np.random.default_rng(rng)
    Y = rng.standard_normal((int(n), dim))
    Y[:, 0] *= np.sqrt(v)
    Y[:, 1] += b * (Y[:, 0] ** 2 - v)
    return Y


def banana_to_standard(X: ArrayLike, b: float = 0.1, v: float = 100.0) -> np.ndarray:
    """Map banana points to standard normal ones: ``z = (y1/sqrt(v), y2 - b(y1^2 - v), y3, ...)``.

    If ``Y ~ B(b, v)`` then ``Z ~ N(0, I_d)``.

    Parameters
    ----------
    X : array_like, shape (..., d)
    b, v : float

    Returns
    -------
    ndarray, same shape as ``X``

    References
    ----------
    .. [1] Haario, H., Saksman, E., Tamminen, J. (1999). Adaptive proposal distribution for
       random walk Metropolis algorithm. Computational Statistics 14(3), 375-395.

    Examples
    --------
    >>> banana_to_standard([[10.0, 0.0, 1.0]], b=0.1, v=100.0)
    array([[1., 0., 1.]])
    """
    v = check_positive("v", v)
    Z = np.array(_points(X), dtype=float, copy=True)
    y1 = Z[..., 0].copy()
    Z[..., 0] = y1 / np.sqrt(v)
    Z[..., 1] = Z[..., 1] - b * (y1 * y1 - v)
    return Z


def banana_coverage(
    X: ArrayLike,
    b: float = 0.1,
    v: float = 100.0,
    quantiles: ArrayLike = QUANTILE_LEVELS,
) -> np.ndarray:
    """Empirical coverage of the exact banana quantile regions.

    For each level ``q`` the exact region ``{y : |z(y)|^2 <= chi2_d.ppf(q)}`` (with ``z`` from
    :func:`banana_to_standard`) has probability ``q`` under ``B(b, v)``; the function returns the
    fraction of the draws that fall in it.

    Parameters
    ----------
    X : array_like, shape (n, d) or (..., n, d)
        Draws (leading axes such as chains are pooled).
    b, v : float
        Target parameters.
    quantiles : sequence of float
        Levels in (0, 1); default ``0.1, ..., 0.9``.

    Returns
    -------
    ndarray, shape (len(quantiles),)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> Y = banana_sample(20000, dim=8, b=0.1, rng=1)
    >>> cov = banana_coverage(Y, b=0.1, quantiles=[0.5, 0.9])
    >>> bool(np.all(np.abs(cov - [0.5, 0.9]) < 0.02))
    True
    """
    q = _levels(quantiles)
    Z = banana_to_standard(_draws(X, min_dim=2), b=b, v=v)
    radius2 = squared_norm(Z)
    thresholds = stats.chi2.ppf(q, df=Z.shape[-1])
    return np.mean(radius2[:, None] <= thresholds[None, :], axis=0)


def banana_coverage_error(
    X: ArrayLike,
    b: float = 0.1,
    v: float = 100.0,
    quantiles: ArrayLike = QUANTILE_LEVELS,
) -> float:
    """Mean absolute deviation of :func:`banana_coverage` from the levels.

    This is the quantile metric of Sejdinovic et al. (2014, Figure 5), averaged over the
    levels.  For ``n`` exact i.i.d. draws it is of order ``0.3 / sqrt(n)`` (it is not zero:
    Monte Carlo error); for MCMC output it grows with the autocorrelation of the chain.

    Parameters
    ----------
    X : array_like, shape (n, d) or (..., n, d)
    b, v : float
    quantiles : sequence of float

    Returns
    -------
    float

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> Y = banana_sample(20000, dim=8, b=0.1, rng=2)
    >>> banana_coverage_error(Y, b=0.1) < 0.01
    True
    >>> banana_coverage_error(1.5 * Y, b=0.1) > 0.1   # wrong scale
    True
    """
    q = _levels(quantiles)
    return float(np.mean(np.abs(banana_coverage(X, b=b, v=v, quantiles=q) - q)))


_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


# ----------------------------------------------------------------------------------------
# flower
# ----------------------------------------------------------------------------------------


def flower_logp(
    X: ArrayLike, r0: float = 10.0, A: float = 6.0, w: float = 6.0, s: float = 1.0
) -> float | np.ndarray:
    """Unnormalised log density of the flower target ``F(r0, A, w, s)``.

    ``-(r - r0 - A cos(w phi))^2 / (2 s^2) + sum_{j>=3} log N(xj; 0, 1)`` with
    ``r = sqrt(x1^2 + x2^2)`` and ``phi = atan2(x2, x1)``.  The Gaussian factors of the
    coordinates ``j >= 3`` are normalised, the two-dimensional factor is not: subtract
    :func:`flower_log_normaliser` for the normalised density.

    Parameters
    ----------
    X : array_like, shape (..., d)
        Points, ``d >= 2``.  Vectorised over the leading axes.
    r0 : float
        Radius of the ring.
    A : float
        Amplitude of the periodic perturbation of the radius (``0``: ring).
    w : float
        Frequency of the perturbation (number of petals for integer ``w``).
    s : float
        Width of the ring.

    Returns
    -------
    float or ndarray of shape ``X.shape[:-1]``

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2.

    Examples
    --------
    >>> flower_logp([16.0, 0.0]) == 0.0  # on the tip of a petal: r = r0 + A
    True
    >>> flower_logp(np.zeros((5, 8))).shape
    (5,)
    """
    s = check_positive("s", s)
    X = _points(X)
    x1, x2 = X[..., 0], X[..., 1]
    r = np.hypot(x1, x2)
    dev = r - r0 - A * np.cos(w * np.arctan2(x2, x1))
    out = -0.5 * dev * dev / (s * s)
    if X.shape[-1] > 2:
        rest = X[..., 2:]
        out = out - 0.5 * np.sum(rest * rest, axis=-1) - 0.5 * rest.shape[-1] * LOG_2PI
    return _scalar_or_array(np.asarray(out))


def _angle_marginal(m: np.ndarray, s: float) -> np.ndarray:
    """Unnormalised density of the angle: ``g(phi) = int_0^inf r exp(-(r - m)^2 / (2 s^2)) dr``.

    With ``a = m / s``: ``g = s m sqrt(2 pi) Phi(a) + s^2 exp(-a^2 / 2)``; it increases in ``m``
    (``dg/dm = s sqrt(2 pi) Phi(a) > 0``).  Clipped at zero against round-off for ``m << -s``.
    """
    a = m / s
    g = s * m * _SQRT_2PI * special.ndtr(a) + s * s * np.exp(-0.5 * a * a)
    return np.maximum(g, 0.0)


def flower_log_normaliser(
    r0: float = 10.0, A: float = 6.0, w: float = 6.0, s: float = 1.0
) -> float:
    """Log normalising constant of the two-dimensional factor of the flower target.

    ``log int_{R^2} exp(-(r - r0 - A cos(w phi))^2 / (2 s^2)) dx1 dx2``, computed as
    ``log int_{-pi}^{pi} g(phi) dphi`` with the closed-form radial integral ``g`` (normal CDF and
    PDF) and adaptive quadrature over the angle.  ``flower_logp(x) - flower_log_normaliser()``
    is the normalised log density.

    Parameters
    ----------
    r0, A, w, s : float
        Target parameters (see :func:`flower_logp`).

    Returns
    -------
    float

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2.

    Examples
    --------
    For the ring of radius 10 (``A = 0``) it is ``log(2 pi * 10 sqrt(2 pi))`` up to ``e^{-50}``:

    >>> ring = flower_log_normaliser(r0=10.0, A=0.0, s=1.0)
    >>> bool(np.isclose(ring, np.log(2 * np.pi * 10 * np.sqrt(2 * np.pi))))
    True
    """
    s = check_positive("s", s)

    def g(phi: float) -> float:
        return float(_angle_marginal(np.asarray(r0 + A * np.cos(w * phi)), s))

    # split into pieces of at most a quarter period so quad sees smooth unimodal pieces
    pieces = max(8, int(np.ceil(4 * abs(w))) * 2)
    edges = np.linspace(-np.pi, np.pi, pieces + 1)
    total = sum(
        integrate.quad(g, lo, hi, epsabs=0.0, epsrel=1e-12, limit=200)[0]
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    )
    return float(np.log(total))


def _sample_angle(n: int, r0: float, A: float, w: float, s: float, rng) -> np.ndarray:
    """Exact draws of ``phi`` by rejection from ``U(-pi, pi)`` with the bound ``g(r0 + |A|)``."""
    g_max = float(_angle_marginal(np.asarray(r0 + abs(A)), s))
    if g_max <= 0:
        raise ValueError("the flower parameters give a density that underflows everywhere")
    # expected acceptance is mean(g) / g_max, roughly g(r0) / g_max: size batches accordingly
    g_mid = float(_angle_marginal(np.asarray(float(r0)), s))
    inv_rate = min(g_max / max(g_mid, 1e-12 * g_max), 1e4)
    out = np.empty(n)
    filled = 0
    while filled < n:
        batch = min(int(1.2 * (n - filled) * inv_rate) + 64, 4_000_000)  # bounded memory
        phi = rng.uniform(-np.pi, np.pi, size=batch)
        g = _angle_marginal(r0 + A * np.cos(w * phi), s)
        keep = phi[rng.uniform(size=batch) * g_max < g]
        take = min(keep.size, n - filled)
        out[filled : filled + take] = keep[:take]
        filled += take
    return out


def _sample_radius(m: np.ndarray, s: float, rng) -> np.ndarray:
    """Exact draws of ``r >= 0`` with density ``∝ r exp(-(r - m)^2 / (2 s^2))``, one per ``m``.

    Write ``r = m + s u`` and ``a = m / s``; the target in ``u`` is ``∝ (a + u) exp(-u^2/2)`` on
    ``u >= -a``.

    * ``a >= -1``: since ``a + u <= a+ + |u|``, rejection from the envelope
      ``(a+ + |u|) exp(-u^2/2)`` on ``u >= -a``, a mixture of a truncated normal (weight
      ``a+ sqrt(2 pi) Phi(a)``) and two-sided truncated Rayleigh pieces (weights ``1`` for
      ``u > 0`` and ``1 - exp(-a^2/2)`` for ``-a <= u < 0``, or ``exp(-a^2/2)`` for
      ``u >= |a|`` when ``a < 0``), each sampled exactly; accept with ``(a + u) / (a+ + |u|)``.
    * ``a < -1`` (a petal reaching past the origin): ``r exp(-(r - m)^2/(2 s^2)) ∝
      r exp(-r |m| / s^2) exp(-r^2 / (2 s^2))``; propose ``r ~ Gamma(2, rate=|m|/s^2)`` and
      accept with ``exp(-r^2 / (2 s^2))``.
    """
    shape = np.shape(m)
    m = np.asarray(m, dtype=float).ravel()
    out = np.empty(m.size)
    todo = np.arange(m.size)
    while todo.size:
        mt = m[todo]
        a = mt / s
        r = np.empty(todo.size)
        accept = np.empty(todo.size, dtype=bool)

        gam = a < -1.0
        if np.any(gam):
            rate = -mt[gam] / (s * s)
            rg = rng.gamma(2.0, 1.0, size=rate.size) / rate
            r[gam] = rg
            accept[gam] = rng.uniform(size=rate.size) < np.exp(-0.5 * (rg / s) ** 2)

        env = ~gam
        if np.any(env):
            ae = a[env]
            k = ae.size
            apos = np.maximum(ae, 0.0)
            w_norm = apos * _SQRT_2PI * special.ndtr(ae)
            w_pos = np.where(ae >= 0, 1.0, np.exp(-0.5 * ae * ae))  # Rayleigh part u >= max(0,-a)
            w_neg = np.where(ae > 0, -np.expm1(-0.5 * ae * ae), 0.0)  # Rayleigh part -a <= u < 0
            total = w_norm + w_pos + w_neg
            pick = rng.uniform(size=k) * total
            u = np.empty(k)
            # truncated normal on u >= -a (only picked when a > 0: Phi(a) > 1/2, simple rejection)
            c_norm = pick < w_norm
            idx = np.flatnonzero(c_norm)
            while idx.size:
                z = rng.standard_normal(idx.size)
                ok = z >= -ae[idx]
                u[idx[ok]] = z[ok]
                idx = idx[~ok]
            # Rayleigh piece on u >= max(0, -a): u^2 = max(0, -a)^2 + 2 E
            c_pos = (~c_norm) & (pick < w_norm + w_pos)
            lower = np.maximum(-ae[c_pos], 0.0)
            u[c_pos] = np.sqrt(lower * lower + 2.0 * rng.exponential(size=lower.size))
            # Rayleigh piece on -a <= u < 0 (a > 0): inverse CDF of |u| on [0, a]
            c_neg = ~(c_norm | c_pos)
            frac = rng.uniform(size=int(c_neg.sum())) * w_neg[c_neg]
            u[c_neg] = -np.sqrt(-2.0 * np.log1p(-frac))
            ratio = (ae + u) / (apos + np.abs(u))
            r[env] = mt[env] + s * u
            accept[env] = rng.uniform(size=k) < ratio

        done = todo[accept]
        out[done] = np.maximum(r[accept], 0.0)
        todo = todo[~accept]
    return out.reshape(shape)


def flower_sample(
    n: int,
    dim: int = 8,
    r0: float = 10.0,
    A: float = 6.0,
    w: float = 6.0,
    s: float = 1.0,
    rng: RNGLike = None,
) -> np.ndarray:
    """Exact i.i.d. draws from the flower target ``F(r0, A, w, s)``.

    In polar coordinates ``x1 = r cos(phi)``, ``x2 = r sin(phi)`` the first two coordinates
    have density ``∝ r exp(-(r - m(phi))^2 / (2 s^2))`` on ``r >= 0, phi in (-pi, pi]``, with
    ``m(phi) = r0 + A cos(w phi)`` (the factor ``r`` is the Jacobian).  The sampler

    1. draws ``phi`` from its marginal ``g(phi) = s m sqrt(2 pi) Phi(m/s) + s^2 exp(-m^2/(2s^2))``
       by rejection from the uniform distribution (``g`` increases in ``m``, so
       ``g(r0 + |A|)`` bounds it; acceptance about ``r0 / (r0 + |A|)``);
    2. draws ``r | phi`` by rejection from an exactly sampled envelope (a truncated normal /
       two-sided Rayleigh mixture, or a Gamma(2) proposal when ``m(phi) < -s``);
    3. draws the coordinates ``j >= 3`` from ``N(0, 1)``.

    Every step is exact, so the draws are exact (no grid or discretisation).

    Parameters
    ----------
    n : int
        Number of draws.
    dim : int
        Dimension ``d >= 2`` (8 in Sejdinovic et al., 2014).
    r0, A, w, s : float
        Target parameters (see :func:`flower_logp`).
    rng : numpy.random.Generator, int or None

    Returns
    -------
    ndarray, shape (n, dim)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2.

    Examples
    --------
    >>> X = flower_sample(5000, dim=8, rng=0)
    >>> X.shape
    (5000, 8)
    >>> r = np.hypot(X[:, 0], X[:, 1])
    >>> bool(0.0 < r.min() and r.max() < 22.0)  # r0 - A - 4 s < r < r0 + A + 4 s, mostly
    True
    """
    dim = _check_dim(dim)
    s = check_positive("s", s)
    n = int(n)
    rng = np.random.default_rng(rng)
    phi = _sample_angle(n, float(r0), float(A), float(w), s, rng)
    r = _sample_radius(r0 + A * np.cos(w * phi), s, rng)
    X = np.empty((n, dim))
    X[:, 0] = r * np.cos(phi)
    X[:, 1] = r * np.sin(phi)
    X[:, 2:] = rng.standard_normal((n, dim - 2))
    return X


# ----------------------------------------------------------------------------------------
# generic coverage metric
# ----------------------------------------------------------------------------------------


def quantile_coverage(
    X: ArrayLike,
    reference: ArrayLike,
    quantiles: ArrayLike = QUANTILE_LEVELS,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Coverage of a reference sample's quantiles of a scalar statistic by the draws ``X``.

    For each level ``q``: ``t_q`` is the empirical ``q``-quantile of ``statistic(reference)``
    and the result is the fraction of ``statistic(X) <= t_q``.  With an exact reference sample
    (e.g. from :func:`flower_sample`) this is a sample-based version of
    :func:`~pymc_kameleon.models.targets.banana_coverage`.

    Parameters
    ----------
    X : array_like, shape (n, d) or (..., n, d)
        Draws to assess (leading axes pooled).  A 1-d array is taken as ``n`` scalar draws.
    reference : array_like, shape (m, d) or (..., m, d)
        Draws from the target (exact i.i.d. preferably, and large: its own Monte Carlo error,
        about ``sqrt(q (1 - q) / m)`` per level, adds to that of ``X``).
    quantiles : sequence of float
        Levels in (0, 1); default ``0.1, ..., 0.9``.
    statistic : callable, optional
        Maps an ``(n, d)`` array to ``n`` scalars; default
        :func:`~pymc_kameleon.models.targets.squared_norm` (a radius, which is sensitive to
        both scale and shape errors of radially structured targets).

    Returns
    -------
    ndarray, shape (len(quantiles),)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> ref = flower_sample(20000, dim=2, rng=0)
    >>> X = flower_sample(20000, dim=2, rng=1)
    >>> cov = quantile_coverage(X, ref, quantiles=[0.25, 0.75])
    >>> bool(np.all(np.abs(cov - [0.25, 0.75]) < 0.02))
    True
    """
    q = _levels(quantiles)
    stat = squared_norm if statistic is None else statistic

    def values(Y: ArrayLike) -> np.ndarray:
        Y = np.asarray(Y, dtype=float)
        Y = Y.reshape(-1, 1) if Y.ndim == 1 else _draws(Y)
        out = np.asarray(stat(Y), dtype=float).reshape(-1)
        if out.size != Y.shape[0]:
            raise ValueError("statistic must return one scalar per row")
        return out

    thresholds = np.quantile(values(reference), q)
    return np.mean(values(X)[:, None] <= thresholds[None, :], axis=0)


def quantile_coverage_error(
    X: ArrayLike,
    reference: ArrayLike,
    quantiles: ArrayLike = QUANTILE_LEVELS,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
) -> float:
    """Mean absolute deviation of :func:`quantile_coverage` from the levels.

    The sample-based analogue of :func:`~pymc_kameleon.models.targets.banana_coverage_error`,
    for targets without closed-form quantile regions (the flower).

    Parameters
    ----------
    X, reference, quantiles, statistic
        As for :func:`quantile_coverage`.

    Returns
    -------
    float

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> ref = flower_sample(20000, dim=8, rng=0)
    >>> quantile_coverage_error(flower_sample(20000, dim=8, rng=1), ref) < 0.01
    True
    >>> quantile_coverage_error(1.1 * flower_sample(20000, dim=8, rng=1), ref) > 0.1
    True
    """
    q = _levels(quantiles)
    return float(np.mean(np.abs(quantile_coverage(X, reference, q, statistic) - q)))
