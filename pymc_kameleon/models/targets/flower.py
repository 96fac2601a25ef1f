"""The flower target ``F(r0, A, w, s)``: log density, normalising constant, exact sampler.

References
----------
- Sejdinovic, Strathmann, Lomeli, Andrieu, Gretton (2014). Kernel adaptive
  Metropolis-Hastings. ICML 2014, Section 5.2.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate, special

from ...validation import check_positive
from .coverage import LOG_2PI, RNGLike, _check_dim, _points, _scalar_or_array

__all__ = ["flower_log_normaliser", "flower_logp", "flower_sample"]

_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


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
