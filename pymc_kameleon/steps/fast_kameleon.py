"""FastKameleonStep: F-KAMH, MCMC Kameleon with random Fourier features."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..adaptation import GeometricSchedule
from ..math.kernels import median_heuristic
from ..math.online import OnlineMeanCov, Reservoir
from ..math.rff import RandomFourierFeatures
from .local_gaussian import LocalGaussianAdaptState, LocalGaussianStep

__all__ = ["FastKameleonStep"]

# tuning iterations between snapshots of the feature covariance used by the proposals
_SNAPSHOT_GAP = 100


@dataclass
class FastKameleonAdaptState(LocalGaussianAdaptState):
    reservoir: Reservoir | None = None  # bounded uniform subsample, for the bandwidth
    features: RandomFourierFeatures | None = None
    moments: OnlineMeanCov | None = None  # feature mean/covariance over the history
    cov: np.ndarray | None = None  # snapshot of the feature covariance used by proposals
    cov_root: np.ndarray | None = None  # (r, D) with root^T root = frozen covariance


class FastKameleonStep(LocalGaussianStep):
    r"""F-KAMH: MCMC Kameleon with random Fourier features and whole-history covariance.

    The kernel embedding of KAMH is replaced by ``D`` random Fourier features
    ``phi: R^d -> R^D`` of the Gaussian kernel, whose mean and covariance ``C`` over the
    *whole* chain history are kept by Welford updates.  The proposal is

    .. math:: q(\cdot \mid y) = N\big(y,\ \gamma^2 I + \eta^2 J(y)^\top C\, J(y)\big),
       \qquad J(y) = \partial \phi / \partial x \,\big|_{x=y}\ (D \times d),

    and the Metropolis-Hastings ratio uses the reverse density with ``J(x*)`` at the
    proposed point and the same ``C`` and ``eta`` (the dissertation's R code reused the
    forward covariance there, which is wrong).  Cost per iteration ``O(D^2 d + D d^2 + d^3)``
    and memory ``O(D^2)``, independent of the chain length: no history array grows.

    Adaptation, only while PyMC tunes:

    * every tuning iteration updates the feature mean/covariance (Welford, ``O(D^2)``) and
      offers the point to a uniform reservoir subsample of fixed size ``n_bandwidth``;
    * the proposals use a snapshot of ``C`` taken every 100 tuning iterations and at every
      refresh, so that between snapshots the proposal at the current point is reused and
      an iteration costs one Jacobian product ``J^T C J`` (at the proposed point) instead
      of two;
    * at the iterations of ``schedule`` (default 50, 100, 200, ..., 1600, then every 1000)
      the bandwidth is re-estimated by the median heuristic on the reservoir, the *same*
      random basis is rescaled to it (``omega = omega0 / s``), and the feature moments
      restart from the reservoir's points (the only history kept) and then continue with
      every new point;
    * ``eta^2`` follows a Robbins-Monro recursion toward ``target_accept``, on the
      dimensionless ratio ``eta^2 / (4 s^4)`` (the F-KAMH equivalent of KAMH's
      ``nu^2 / (s^4 / n)``: both give the same proposal when ``D -> infinity``).

    ``stop_tuning()`` freezes features, bandwidth, ``C`` and ``eta``.  Continuing the Welford
    updates after tuning would be a diminishing adaptation whose validity has to be argued
    case by case (the dissertation only argues consistency of ``C``); freezing makes the draws
    come from a fixed Metropolis-Hastings kernel, exactly.  Before the first refresh (and with
    ``tune=0``) the step is the random walk ``N(y, gamma^2 I)``.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    n_features : int, default 200
        Number of random Fourier features ``D``.  The dissertation found ``D < 50`` poor and
        little gain beyond ``D ~ 350`` on 8-d bananas.  Our benchmark
        (``python -m benchmarks.n_features``, 8-d banana B(0.03, 100)) agrees that ``D <= 100``
        mixes worse; ``D = 400`` gave about 2.5x the ESS per iteration of ``D = 200`` at twice
        the cost per step (similar ESS per second).  200 is the default for its cost;
        when a log-density evaluation costs much more than the step (likelihood estimators),
        prefer ``n_features=400``.
    embedding : {"sincos", "phase"}, default "sincos"
        ``sqrt(2/D) [sin(w.x), cos(w.x)]`` pairs, or ``sqrt(2/D) cos(w.x + b)``.  The pairs
        have the smaller kernel approximation variance (Sutherland and Schneider, 2015).
    gamma : float, default 0.1
        Standard deviation of the isotropic exploration term, in the whitened coordinates
        of the warm-up (units of the posterior's learned scale; the paper used 0.2 on
        unit-scale targets).  0.1 because whitening by the *global* covariance makes the
        narrow direction of a curved target thin: on the 2-d banana B(0.1, 100) (4 chains,
        tune 2000, 8000 draws, seeds 4 and 5) gamma 0.2 gave R-hat 1.15 / 1.02, gamma 0.1
        1.07 / 1.01, gamma 0.05 1.06 / 1.02.
    eta2 : float, optional
        Initial ``eta^2``; default ``(2.38^2 / (2 d)) * 4 s^4``.
    bandwidth : float, optional
        Fixed kernel bandwidth; default: median heuristic, refreshed during tuning.
    n_bandwidth : int, default 1000
        Size of the reservoir subsample used for the median heuristic.
    target_accept, adapt_scale, adapt_exponent
        As for :class:`~pymc_kameleon.KameleonStep`.
    schedule : GeometricSchedule, optional
        Tuning iterations at which the bandwidth is refreshed.
    n_steps, warmup_draws, laplace
        See :class:`~pymc_kameleon.steps.base.BaseKernelStep`: MH iterations per draw
        (default ``d``), warm-up length, Laplace start.
    model, rng, initial_point, compile_kwargs, blocked
        As for every PyMC step method.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A. (2014).
       Kernel Adaptive Metropolis-Hastings. ICML.
    .. [2] Kotlicki, A. (2015). Fast Kernel Adaptive Metropolis-Hastings Algorithm. MSc
       dissertation, University of Oxford, Chapter 4 (proposal, Eq. 4.5; running covariance
       estimators, Section 4.1).
    .. [3] Rahimi, A., Recht, B. (2007). Random features for large-scale kernel machines.
       NIPS.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_kameleon import FastKameleonStep
    >>> with pm.Model():
    ...     x = pm.Normal("x", 0.0, 1.0, shape=2)
    ...     idata = pm.sample(draws=200, tune=200, chains=1, step=FastKameleonStep(n_features=50),
    ...                       random_seed=1, progressbar=False, compute_convergence_checks=False)
    >>> int(idata.sample_stats["n_features"][0, 0])
    50
    """

    name = "fast_kameleon"
    stats_dtypes_shapes = {
        **LocalGaussianStep.stats_dtypes_shapes,
        "n_features": (np.int64, []),
        "n_history": (np.int64, []),
    }

    def __init__(
        self,
        vars=None,
        *,
        n_features: int = 200,
        embedding: Literal["sincos", "phase"] = "sincos",
        gamma: float = 0.1,
        eta2: float | None = None,
        bandwidth: float | None = None,
        n_bandwidth: int = 1000,
        target_accept: float = 0.234,
        adapt_scale: bool = True,
        adapt_exponent: float = 0.6,
        schedule: GeometricSchedule | None = None,
        **kwargs,
    ):
        if int(n_features) != n_features or n_features < 2:
            raise ValueError(f"n_features must be an integer >= 2, got {n_features!r}")
        if embedding not in ("sincos", "phase"):
            raise ValueError(f"unknown embedding {embedding!r}; use 'sincos' or 'phase'")
        if embedding == "sincos" and n_features % 2:
            raise ValueError("the 'sincos' embedding needs an even n_features")
        if int(n_bandwidth) != n_bandwidth or n_bandwidth < 2:
            raise ValueError(f"n_bandwidth must be an integer >= 2, got {n_bandwidth!r}")
        if bandwidth is not None and not (np.isfinite(bandwidth) and bandwidth > 0):
            raise ValueError(f"bandwidth must be a positive number, got {bandwidth!r}")
        self.n_features = int(n_features)
        self.embedding = embedding
        self.n_bandwidth = int(n_bandwidth)
        self.fixed_bandwidth = None if bandwidth is None else float(bandwidth)
        super().__init__(
            vars,
            gamma=gamma,
            scale=eta2,
            target_accept=target_accept,
            adapt_scale=adapt_scale,
            adapt_exponent=adapt_exponent,
            schedule=schedule or GeometricSchedule(first=50, ratio=2.0, max_gap=1000),
            **kwargs,
        )

    def _initial_adapt_state(self) -> FastKameleonAdaptState:
        return FastKameleonAdaptState(
            next_refresh=self.schedule.first,
            reservoir=Reservoir(self.n_bandwidth, self.dim),
        )

    def _extra_stats(self) -> dict:
        moments = self._adapt.moments
        return {
            "n_features": self.n_features,
            "n_history": 0 if moments is None else moments.count,
        }

    # ------------------------------------------------------------------ history
    def _record(self, x: np.ndarray) -> None:
        a = self._adapt
        a.reservoir.add(x, self.rng)
        if a.moments is not None:
            a.moments.update(a.features.features(x))
            if a.t % _SNAPSHOT_GAP == 0:
                self._snapshot()

    def _refresh(self) -> None:
        a = self._adapt
        points = a.reservoir.points
        s = self.fixed_bandwidth or median_heuristic(points)
        if s <= 0:
            return  # degenerate history: stay a random walk until it spreads out
        if a.features is None:  # drawn from the chain's rng, so seeds reproduce runs
            a.features = RandomFourierFeatures.draw(
                self.dim, self.n_features, s, self.rng, self.embedding
            )
        if a.moments is None or s != a.bandwidth:
            a.features = a.features.with_bandwidth(s)
            a.moments = OnlineMeanCov(self.n_features)
            a.moments.update_batch(a.features.features(points))
        a.bandwidth = s
        self._snapshot()
        self._activate()

    def _snapshot(self) -> None:
        """Let the proposals use the current whole-history feature covariance."""
        a = self._adapt
        a.cov = a.moments.cov
        a.cache.clear()  # C changed: cached proposals are stale

    def _on_stop_tuning(self) -> None:
        a = self._adapt
        if a.active:  # C is frozen from now on: factor it once, keeping its numerical rank
            w, U = np.linalg.eigh(a.cov)
            keep = w > 1e-12 * max(float(w.max()), 0.0)
            a.cov_root = (U[:, keep] * np.sqrt(w[keep])).T

    # ------------------------------------------------------------------ proposal
    def _natural_scale(self) -> float:
        return 4.0 * self._adapt.bandwidth**4

    def _gram(self, y: np.ndarray) -> np.ndarray:
        a = self._adapt
        J = a.features.jacobian(y)  # (D, d)
        if a.cov_root is not None:
            RJ = a.cov_root @ J
            return RJ.T @ RJ
        return J.T @ (a.cov @ J)
