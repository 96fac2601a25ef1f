"""FastKameleonStep: F-KAMH, MCMC Kameleon with random Fourier features."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..adaptation import GeometricSchedule
from ..math.compiled import rff_full_gram, rff_lowrank_gram_t
from ..math.kernels import distinct_rows, median_heuristic
from ..math.linalg import lowrank_root, refine_lowrank_root
from ..math.online import OnlineMeanCov, Reservoir
from ..math.rff import RandomFourierFeatures
from ..validation import check_integral
from .local_gaussian import LocalGaussianAdaptState, LocalGaussianStep

__all__ = ["FastKameleonStep", "default_n_features"]

# tuning iterations between snapshots of the feature covariance used by the proposals: a
# fixed gap (one growing with the tuning length cost ESS, docs/benchmarks/fkamh_rank.md)
_SNAPSHOT_GAP = 100
#: default share of the trace of the feature covariance its discarded eigenpairs may hold
TRACE_TOLERANCE = 0.03
# a refresh restarts the feature moments only if the median heuristic moved by more than this
BANDWIDTH_TOLERANCE = 0.2
# default number of features: FEATURES_PER_DIM * d, clipped to [MIN_FEATURES, MAX_FEATURES]
FEATURES_PER_DIM = 50
MIN_FEATURES = 200
MAX_FEATURES = 500


def default_n_features(dim: int) -> int:
    """Default number of random Fourier features ``D`` for dimension ``d``.

    The error of the random-feature kernel *gradients*, of which the F-KAMH proposal
    covariance ``J^T C J`` is made, grows like ``sqrt(d / D)``; a fixed ``D`` therefore
    distorts the proposal more as ``d`` grows (measured on the 8-d bananas:
    ``docs/benchmarks/fkamh_features.md``).  ``D = 50 d`` keeps ``d / D`` fixed; it is
    clipped to ``[200, 500]`` because the cost per iteration grows with ``D`` (``O(r D d)``
    with the rank ``r`` of the truncated feature covariance, see :class:`FastKameleonStep`).

    Parameters
    ----------
    dim : int
        Dimension ``d`` of the sampled block.

    Returns
    -------
    int
        An even number of features.

    References
    ----------
    .. [1] Sutherland, D. J., Schneider, J. (2015). On the error of random Fourier features.
       UAI (uniform error bounds for the kernel and its derivatives, growing with ``d / D``).
    .. [2] Kotlicki, A. (2015). Fast Kernel Adaptive Metropolis-Hastings Algorithm. MSc
       dissertation, University of Oxford, Section 5.1 (``D < 50`` poor on 8-d bananas).

    Examples
    --------
    >>> default_n_features(2), default_n_features(8), default_n_features(50)
    (200, 400, 500)
    """
    n = FEATURES_PER_DIM * int(dim)
    n = min(max(n, MIN_FEATURES), MAX_FEATURES)
    return n + n % 2


@dataclass
class FastKameleonAdaptState(LocalGaussianAdaptState):
    reservoir: Reservoir | None = None  # bounded uniform subsample, for the bandwidth
    features: RandomFourierFeatures | None = None
    moments: OnlineMeanCov | None = None  # feature mean/covariance over the history
    cov: np.ndarray | None = None  # snapshot of the feature covariance used by proposals
    # distinct points recorded since the last snapshot (at most _SNAPSHOT_GAP), not yet in
    # the moments, and their multiplicities
    pending: np.ndarray | None = None  # (_SNAPSHOT_GAP, d)
    pending_weight: np.ndarray | None = None  # (_SNAPSHOT_GAP,)
    n_pending: int = 0
    last_recorded: np.ndarray | None = None  # the position recorded last (identity check)
    since_snapshot: int = 0  # tuning iterations recorded since the last snapshot: the
    # summed multiplicities of the pending points
    root: np.ndarray | None = None  # (D, D); rows [:rank]: R with R^T R ~ cov (truncated)
    rank: int = 0  # 0: not factorised since the last snapshot
    factor_rank: int = 0  # rank of the last factor made (kept across snapshots: the stat)
    omega: np.ndarray | None = None  # frequencies omega0 / s of the snapshot
    omega_t: np.ndarray | None = None  # the same, transposed (d, n_freq), C-contiguous
    basis: np.ndarray | None = None  # (D, k) leading eigenspace of C, followed while tuning
    folded: np.ndarray | None = None  # R^T R when the folded product is the cheaper one


class FastKameleonStep(LocalGaussianStep):
    r"""F-KAMH: MCMC Kameleon with random Fourier features and whole-history covariance.

    The kernel embedding of KAMH is replaced by ``D`` random Fourier features
    ``phi: R^d -> R^D`` of the Gaussian kernel, whose mean and covariance ``C`` over the
    *whole* chain history are kept by Welford updates.  The proposal is

    .. math:: q(\cdot \mid y) = N\big(y,\ \gamma^2 I + \eta^2 J(y)^\top C\, J(y)\big),
       \qquad J(y) = \partial \phi / \partial x \,\big|_{x=y}\ (D \times d),

    and the Metropolis-Hastings ratio uses the reverse density with ``J(x*)``.

    ``C`` enters the proposal through a low-rank factor ``R^T R`` that the draw and both
    densities of the ratio share, so the chain stays exact.  While PyMC tunes, the feature
    moments, the bandwidth, ``eta^2`` and ``gamma`` adapt; ``stop_tuning()`` freezes them, so
    the draws come from one fixed Metropolis-Hastings kernel.  The factorisation, the
    schedule and the costs are on the algorithm's page, ``docs/algorithms/fkamh.md``.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    n_features : int, optional
        Number of random Fourier features ``D``; default :func:`default_n_features`:
        ``50 d`` clipped to ``[200, 500]``.  Too few features give too wide proposals.
    trace_tolerance : float, default 0.03
        Share of the trace of ``C`` its factor may discard; ``0`` keeps the numerical rank.
    embedding : {"sincos", "phase"}, default "sincos"
        ``sqrt(2/D) [sin(w.x), cos(w.x)]`` pairs, or ``sqrt(2/D) cos(w.x + b)``.
    frequencies : {"halton", "orthogonal", "gaussian"}, default "halton"
        How the frequencies are drawn: scrambled Halton [4]_, orthogonal [5]_ or independent
        [3]_ (:func:`~pymc_kameleon.math.rff.standard_frequencies`).
    gamma : float or sequence of float, optional
        Standard deviation of the isotropic exploration term, in whitened units; default:
        chosen by trials while tuning, as for :class:`~pymc_kameleon.KameleonStep`.
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
    n_steps, warmup_draws, laplace, on_error
        See :class:`~pymc_kameleon.steps.base.BaseKernelStep`: MH iterations per draw
        (default ``max(5, d)``), warm-up length, Laplace start, what an exception raised by the
        log density does (``"raise"``, the default, or ``"reject"``: a counted rejection).
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
    .. [4] Avron, H., Sindhwani, V., Yang, J., Mahoney, M. W. (2016). Quasi-Monte Carlo
       feature maps for shift-invariant kernels. JMLR 17(120).
    .. [5] Yu, F. X., Suresh, A. T., Choromanski, K., Holtmann-Rice, D., Kumar, S. (2016).
       Orthogonal random features. NIPS.
    """

    name = "fast_kameleon"
    #: relative change of the median heuristic above which a refresh restarts the moments
    bandwidth_tolerance: float = BANDWIDTH_TOLERANCE
    stats_dtypes_shapes = {
        **LocalGaussianStep.stats_dtypes_shapes,
        "n_features": (np.int64, []),
        "n_history": (np.int64, []),
        "feature_rank": (np.int64, []),
    }

    def __init__(
        self,
        vars=None,
        *,
        n_features: int | None = None,
        embedding: Literal["sincos", "phase"] = "sincos",
        frequencies: Literal["gaussian", "orthogonal", "halton"] = "halton",
        eta2: float | None = None,
        n_bandwidth: int = 1000,
        schedule: GeometricSchedule | None = None,
        trace_tolerance: float = TRACE_TOLERANCE,
        **kwargs,
    ):
        # gamma, bandwidth, target_accept, adapt_scale, adapt_exponent: LocalGaussianStep
        if not 0.0 <= trace_tolerance < 1.0:
            raise ValueError(f"trace_tolerance must lie in [0, 1), got {trace_tolerance!r}")
        if n_features is not None:
            n_features = check_integral("n_features", n_features, minimum=2)
        if embedding not in ("sincos", "phase"):
            raise ValueError(f"unknown embedding {embedding!r}; use 'sincos' or 'phase'")
        if frequencies not in ("gaussian", "orthogonal", "halton"):
            raise ValueError(f"unknown frequencies {frequencies!r}; use 'gaussian', "
                             "'orthogonal' or 'halton'")
        if embedding == "sincos" and n_features is not None and n_features % 2:
            raise ValueError("the 'sincos' embedding needs an even n_features")
        n_bandwidth = check_integral("n_bandwidth", n_bandwidth, minimum=2)
        self.n_features = None if n_features is None else int(n_features)
        self.embedding = embedding
        self.frequencies = frequencies
        self.n_bandwidth = int(n_bandwidth)
        self.trace_tolerance = float(trace_tolerance)
        super().__init__(
            vars,
            scale=eta2,
            schedule=schedule or GeometricSchedule(first=50, ratio=2.0, max_gap=1000),
            **kwargs,
        )
        if self.n_features is None:  # needs the block's dimension, known after super()
            self.n_features = default_n_features(self.dim)

    def _new_adapt_state(self) -> FastKameleonAdaptState:
        return FastKameleonAdaptState(
            next_refresh=self.schedule.first,
            reservoir=Reservoir(self.n_bandwidth, self.dim),
        )

    def _extra_stats(self) -> dict:
        moments = self._adapt.moments
        return {
            "n_features": self.n_features,
            "n_history": 0 if moments is None else round(moments.count)
            + self._adapt.since_snapshot,
            "feature_rank": self._feature_rank(),
        }

    def _feature_rank(self) -> int:
        """Eigenpairs of ``C`` in the proposals of the draw: ``D`` while tuning uses ``C``
        itself, 0 before there is a kernel part.  A snapshot at a draw's last iteration
        leaves no factor until the next proposal; the draw's proposals used the last one."""
        a = self._adapt
        if not a.active:
            return 0
        if self.trace_tolerance == 0.0 and self.tune:
            return self.n_features
        return a.factor_rank

    # ------------------------------------------------------------------ history
    def _record(self, x: np.ndarray, logp: float) -> None:
        a = self._adapt
        a.reservoir.add(x, self.rng)
        if a.moments is None:
            return
        if a.n_pending and x is a.last_recorded:
            # a rejection repeats the position: one more copy of the same point (positions
            # are never changed in place, so identity is equality; equal values recorded as
            # separate rows would give the same moments anyway)
            a.pending_weight[a.n_pending - 1] += 1.0
        else:  # room for it: a snapshot (which empties the buffer) every _SNAPSHOT_GAP
            a.pending[a.n_pending] = x
            a.pending_weight[a.n_pending] = 1.0
            a.n_pending += 1
            a.last_recorded = x
        a.since_snapshot += 1
        if a.since_snapshot >= _SNAPSHOT_GAP:
            self._snapshot()

    def _flush(self) -> None:
        """Add the features of the pending points to the moments (one weighted batch update,
        with the features in use when the points were recorded: every bandwidth change
        flushes first)."""
        a = self._adapt
        if a.n_pending:
            k = a.n_pending
            a.moments.update_batch(a.features.features(a.pending[:k]), a.pending_weight[:k])
            a.n_pending = 0

    def _refresh(self) -> None:
        a = self._adapt
        points = a.reservoir.points
        s = self.fixed_bandwidth or median_heuristic(points)
        if s <= 0:
            return  # degenerate history: stay a random walk until it spreads out
        if a.features is None:  # drawn from the chain's rng, so seeds reproduce runs
            a.features = RandomFourierFeatures.draw(
                self.dim, self.n_features, s, self.rng, self.embedding, self.frequencies
            )
            a.pending = np.empty((_SNAPSHOT_GAP, self.dim))
            a.pending_weight = np.zeros(_SNAPSHOT_GAP)
            a.root = np.empty((self.n_features, self.n_features))
        self._flush()
        if a.moments is None or abs(s / a.bandwidth - 1.0) > self.bandwidth_tolerance:
            # the features change with the bandwidth: the moments restart from the reservoir
            a.features = a.features.with_bandwidth(s)
            a.moments = OnlineMeanCov(self.n_features)
            # the reservoir's distinct points with their multiplicities (about a third of
            # them are distinct at the acceptance target: the same moments, a third the work)
            distinct, counts = distinct_rows(points, return_counts=True)
            a.moments.update_batch(a.features.features(distinct), counts)
            a.bandwidth = s
            # a new C, of the same frequencies rescaled: its factor is followed from the
            # previous basis, not recomputed by an exact eigendecomposition at every
            # restart (timings: docs/benchmarks/fkamh_rank.md)
        # else: keep bandwidth, features and the moments accumulated over the whole history
        self._snapshot()
        self._activate()

    def _snapshot(self) -> None:
        """Let the proposals use the current whole-history feature covariance."""
        a = self._adapt
        self._flush()
        a.since_snapshot = 0
        a.cov = a.moments.cov
        if a.omega is not a.features.omega:  # a new bandwidth
            a.omega = a.features.omega
            a.omega_t = np.ascontiguousarray(a.omega.T)
        a.rank = 0  # factorised when a proposal first needs it
        a.cache.clear()  # C changed: cached proposals are stale

    def _factorise(self, exact: bool = False) -> None:
        """Truncated eigendecomposition of the snapshot: ``R`` into ``root[:rank]``.

        While tuning with ``trace_tolerance > 0`` (and not ``exact``) it is one warm-started
        subspace iteration (:func:`~pymc_kameleon.math.linalg.refine_lowrank_root`,
        ``O(D^2 k)``) instead of a full eigendecomposition (``O(D^3)``, which at every
        snapshot would cost more than the proposals: ``docs/benchmarks/fkamh_rank.md``,
        "Cost"); only the first factor is exact, later ones follow the basis, also across
        restarts.
        When the rank exceeds the number of frequencies, the folded product of ``R^T R``
        (``C`` itself when nothing is truncated) is the cheaper one and is kept in ``folded``.
        """
        a = self._adapt
        if self.tune and self.trace_tolerance > 0.0 and not exact:
            R, a.basis = refine_lowrank_root(a.cov, a.basis, self.trace_tolerance, self.rng)
        else:
            R = lowrank_root(a.cov, self.trace_tolerance)
        a.rank = a.factor_rank = R.shape[0]
        a.root[: a.rank] = R
        if a.rank <= a.omega.shape[0]:
            a.folded = None
        else:
            a.folded = a.cov if self.trace_tolerance == 0.0 else R.T @ R

    def _on_stop_tuning(self) -> None:
        super()._on_stop_tuning()
        a = self._adapt
        if a.active:  # C is frozen from now on: factor it once, exactly
            self._factorise(exact=True)
            a.cache.clear()  # the tuning-time factor must not serve a frozen iteration

    # ------------------------------------------------------------------ proposal
    def _natural_scale(self) -> float:
        return 4.0 * self._adapt.bandwidth**4

    def _gram(self, y: np.ndarray) -> np.ndarray:
        a = self._adapt
        sincos = a.features.embedding == "sincos"
        if self.trace_tolerance == 0.0 and self.tune:
            # nothing to truncate: a factorisation per snapshot would cost more than it saves
            return rff_full_gram(y, a.omega, a.features.phase, a.cov, sincos)
        if a.rank == 0:
            self._factorise()
        if a.folded is not None:  # rank above the number of frequencies: fold, it is cheaper
            return rff_full_gram(y, a.omega, a.features.phase, a.folded, sincos)
        return rff_lowrank_gram_t(y, a.omega_t, a.features.phase, a.root[: a.rank], sincos)
