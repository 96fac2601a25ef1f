"""Numerics of the scale-aware warm-up shared by every step (pure NumPy/SciPy, no PyMC).

During the first part of tuning every step runs a preconditioned random walk and learns the
location ``m`` and scale ``L`` of the posterior in growing windows, as PyMC and Stan do for
NUTS's mass matrix (the kernel itself: :mod:`.warmup_kernel`).  The kernel samplers then work
in whitened coordinates ``u = L^{-1} (x - m)``.  This module holds the pieces:

* :class:`~pymc_kameleon.math.whitening.AffineMap`: ``x = m + L u`` and back;
* :func:`window_ends`: the window boundaries (in PyMC draws), and
  :func:`tuning_window_ends` for a warm-up that runs for the whole tuning phase;
* :func:`climb_end`: where the first window's climb from the initial point ends;
* :class:`WindowMoments`: running mean/covariance of one window and its accepted moves;
* :func:`regularised_covariance`: a window estimate shrunk toward a prior covariance in
  the prior's whitened coordinates (never toward the raw axes);
* :class:`NoiseCeiling`: the acceptance rate a noisy likelihood estimator allows, measured
  by proposals that stay where they are, so adaptation targets stay reachable.

A map built in ``u`` is a fixed linear map of ``x`` for the forward and the reverse
proposal of one iteration, so Metropolis-Hastings ratios are unchanged; the map changes only
between iterations while tuning and is frozen afterwards.

References
----------
- Stan Development Team. Stan Reference Manual, "HMC algorithm parameters: automatic
  parameter tuning" (adaptation windows).
- Haario, H., Saksman, E., Tamminen, J. (2001). An adaptive Metropolis algorithm.
  Bernoulli 7(2), 223-242.
- Ledoit, O., Wolf, M. (2004). A well-conditioned estimator for large-dimensional
  covariance matrices. Journal of Multivariate Analysis 88(2), 365-411 (shrinkage).
- Sherlock, C., Thiery, A. H., Roberts, G. O., Rosenthal, J. S. (2015). On the
  efficiency of pseudo-marginal random walk Metropolis algorithms. Annals of Statistics
  43(1), 238-275 (acceptance rates under estimator noise).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import solve_triangular

from ..math.linalg import safe_cholesky
from ..math.whitening import AffineMap

__all__ = [
    "AffineMap",
    "NoiseCeiling",
    "WindowMoments",
    "climb_end",
    "final_window_end",
    "regularised_covariance",
    "tuning_window_ends",
    "window_ends",
]


def window_ends(warmup_draws: int) -> tuple[int, ...]:
    """Draw indices at which the warm-up windows end (the last one is ``warmup_draws``).

    An initial window of 15% (the transient: only the scale adapts from its estimate),
    then windows that double, like Stan's slow adaptation windows.

    Examples
    --------
    >>> window_ends(500)
    (75, 125, 225, 500)
    """
    if warmup_draws < 4:
        return (max(int(warmup_draws), 1),)
    fractions = (0.15, 0.25, 0.45, 1.0)
    ends = sorted({max(1, int(round(f * warmup_draws))) for f in fractions})
    return tuple(ends)


def final_window_end(tune: int) -> int:
    """Where the last window of a warm-up run for the whole tuning phase ends: a tenth of
    tuning (at least 50 draws) before its end, left to re-adapt the scale.

    Examples
    --------
    >>> final_window_end(1000), final_window_end(300)
    (900, 250)
    """
    return int(tune) - max(50, int(tune) // 10)


def tuning_window_ends(warmup_draws: int, tune: int | None, upto: int = 0) -> tuple[int, ...]:
    """Window ends of a warm-up that adapts for the whole tuning phase (the random walk).

    The warm-up's windows (:func:`window_ends`), then doubling ones while they end before
    :func:`final_window_end`, then one ending there; that last window continues the moments
    of the one before it (merged, not replacing them), so every draw after the first window
    feeds the map and none is collected without being used (docs/tuning.md, "Windows").
    With ``tune`` unknown (a step driven by hand), windows keep doubling up to ``upto``.

    Examples
    --------
    >>> tuning_window_ends(500, 1000)
    (75, 125, 225, 500, 900)
    >>> tuning_window_ends(100, 1000)
    (15, 25, 45, 100, 200, 400, 800, 900)
    >>> tuning_window_ends(500, None, upto=1500)
    (75, 125, 225, 500, 1000, 2000)
    """
    ends = list(window_ends(warmup_draws))
    if tune is None:
        while ends[-1] < upto:
            ends.append(2 * ends[-1])
        return tuple(ends)
    last = final_window_end(tune)
    while 2 * ends[-1] < last:
        ends.append(2 * ends[-1])
    if last > ends[-1]:
        ends.append(last)
    return tuple(ends)


#: The first window keeps its draws from one of these fractions of it on (eighths, at most
#: half of it dropped): where the log density stopped rising (:func:`climb_end`).
CLIMB_STARTS = (0.0, 0.125, 0.25, 0.375, 0.5)


def climb_end(logps) -> int:
    """Draws of a first window that are still the climb from the initial point.

    ``logps[j]`` is the log density after the window's draw ``j + 1``; the climb ends at the
    first draw that reaches the median of the window's second half (so a chain started in
    the posterior's bulk, e.g. at a Laplace mode, drops nothing, and a transient is cut
    where the log density stops rising; docs/tuning.md, "Windows").  Returns the number of
    draws before it.

    Examples
    --------
    >>> climb_end([-90.0, -40.0, -12.0, -5.0, -4.0, -6.0, -5.5, -4.5])
    3
    >>> climb_end([-1.0, -2.0, -1.5, -3.0])
    0
    """
    values = np.asarray(logps, dtype=float)
    if values.size == 0:
        return 0
    level = np.median(values[values.size // 2:])
    return int(np.argmax(values >= level))


@dataclass
class WindowMoments:
    """Welford mean and covariance of the chain positions in one window."""

    dim: int
    count: int = 0
    n_moves: int = 0  # accepted moves: a proxy of the information in the window
    mean: np.ndarray = field(default=None)  # type: ignore[assignment]
    m2: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.mean is None:
            self.mean = np.zeros(self.dim)
        if self.m2 is None:
            self.m2 = np.zeros((self.dim, self.dim))

    def add(self, x: np.ndarray, moved: bool) -> None:
        self.count += 1
        self.n_moves += int(moved)
        delta = x - self.mean
        self.mean = self.mean + delta / self.count
        self.m2 += np.outer(delta, x - self.mean)

    @property
    def cov(self) -> np.ndarray:
        return self.m2 / max(self.count - 1, 1)


def regularised_covariance(
    sample_cov: np.ndarray, n_eff: float, prior_cov: np.ndarray, n_prior: float
) -> np.ndarray:
    """A window covariance made safe to precondition with, regularised in whitened space.

    The sample covariance ``S`` is whitened by the prior, ``W = L^{-1} S L^{-T}`` with
    ``L L^T = prior_cov``; ``W`` is shrunk toward its diagonal by ``min(1, d / n_eff)`` (all
    of it when the window holds fewer than ``d`` moves) and combined with the identity as
    ``n_prior`` pseudo-samples; the result is mapped back, ``L W' L^T``.  Shrinking in the
    model's raw coordinates instead puts back, in the thin direction of a posterior with
    correlation -0.9999, a thousand times its variance (docs/tuning.md, "Windows").
    The result is symmetric positive definite whenever ``prior_cov`` is.

    Examples
    --------
    >>> import numpy as np
    >>> S = np.array([[4.0, 1.0], [1.0, 1.0]])
    >>> regularised_covariance(S, n_eff=1e9, prior_cov=np.eye(2), n_prior=0.0).round(6)
    array([[4., 1.],
           [1., 1.]])

    A near-singular prior keeps its thin direction when the window agrees with it:

    >>> P = np.array([[1.0, -0.9999], [-0.9999, 1.0]])
    >>> bool(np.allclose(regularised_covariance(P, n_eff=10.0, prior_cov=P, n_prior=4.0), P))
    True
    """
    n_eff = max(float(n_eff), 0.0)
    total = n_eff + n_prior
    if total <= 0:
        return np.array(prior_cov, dtype=float)
    chol = safe_cholesky(np.asarray(prior_cov, dtype=float))[0]
    half = solve_triangular(chol, np.asarray(sample_cov, dtype=float), lower=True)
    white = solve_triangular(chol, half.T, lower=True)  # L^{-1} S L^{-T} (S symmetric)
    d = white.shape[0]
    lam = 1.0 if n_eff < d else min(1.0, d / n_eff)
    est = (1.0 - lam) * white + lam * np.diag(np.diag(white))
    cov_w = (n_eff * est + n_prior * np.eye(d)) / total
    cov = chol @ cov_w @ chol.T
    return 0.5 * (cov + cov.T)


@dataclass
class NoiseCeiling:
    """Acceptance rate allowed by a noisy log density, from proposals that stay in place.

    Proposing the current point again re-estimates the log density there; its acceptance
    probability ``min(1, exp(noise' - noise))`` is what the estimator's noise alone allows.
    :attr:`ceiling` is its running mean with one pseudo-observation of 1.
    """

    total: float = 0.0
    count: int = 0

    def add(self, accept_prob: float) -> None:
        self.total += float(np.nan_to_num(accept_prob))
        self.count += 1

    @property
    def ceiling(self) -> float:
        return (self.total + 1.0) / (self.count + 1.0)

    def target(self, target: float) -> float:
        """A random walk's acceptance target: ``target``, capped at half the ceiling.

        A random walk's scale controls its whole acceptance, noise included, so a target
        above what the noise allows would shrink the scale without end: it is capped.
        """
        return float(min(target, 0.5 * self.ceiling))

    def scaled(self, target: float) -> float:
        """A surrogate trajectory's acceptance target: ``target * ceiling``.

        A kernel-HMC trajectory's acceptance factorises into the surrogate's own and the
        estimator noise's, and its step size controls only the first: the target is scaled.
        """
        return float(target * self.ceiling)
