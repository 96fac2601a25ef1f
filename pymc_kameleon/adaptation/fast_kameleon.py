"""F-KAMH's kernel: ``G(y) = J(y)^T C J(y)`` with random Fourier features.

:class:`FastKameleonAdaptation` is a :class:`~.local_gaussian_base.LocalGaussianAdaptation`
whose adaptive part comes from the features' whole-history moments and a low-rank factor of
their covariance ``C``; :class:`FastKameleonAdaptState` is one chain's state of it and
:func:`default_n_features` the number of features by dimension.  The rules are described in
:mod:`.local_gaussian`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..math.compiled import rff_full_gram, rff_lowrank_gram_t
from ..math.kernels import distinct_rows, median_heuristic
from ..math.linalg import lowrank_root, refine_lowrank_root
from ..math.online import OnlineMeanCov, Reservoir
from ..math.rff import RandomFourierFeatures
from ..validation import check_integral
from .local_gaussian_base import LocalGaussianAdaptation, LocalGaussianAdaptState
from .schedule import GeometricSchedule
from .selection import TrialSelection

__all__ = ["FastKameleonAdaptState", "FastKameleonAdaptation", "default_n_features"]

# tuning iterations between snapshots of the feature covariance used by F-KAMH's proposals:
# a fixed gap (one growing with the tuning length cost ESS, docs/benchmarks/fkamh_rank.md)
SNAPSHOT_GAP = 100
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
    with the rank ``r`` of the truncated feature covariance, see
    :class:`~pymc_kameleon.FastKameleonStep`).

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
    """F-KAMH's state: features, their moments, the snapshot in use and its factor."""

    n_features: int = 0
    reservoir: Reservoir | None = None  # bounded uniform subsample, for the bandwidth
    features: RandomFourierFeatures | None = None
    moments: OnlineMeanCov | None = None  # feature mean/covariance over the history
    cov: np.ndarray | None = None  # snapshot of the feature covariance used by proposals
    # distinct points recorded since the last snapshot (at most SNAPSHOT_GAP), not yet in
    # the moments, and their multiplicities
    pending: np.ndarray | None = None  # (SNAPSHOT_GAP, d)
    pending_weight: np.ndarray | None = None  # (SNAPSHOT_GAP,)
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


class FastKameleonAdaptation(LocalGaussianAdaptation):
    """F-KAMH's kernel: ``G(y) = J(y)^T C J(y)`` with random Fourier features.

    Parameters
    ----------
    n_features : int, optional
        Number of features (None: :func:`default_n_features` of the dimension).
    embedding, frequencies, n_bandwidth, trace_tolerance
        As for :class:`~pymc_kameleon.FastKameleonStep`.
    **kwargs
        Those of :class:`LocalGaussianAdaptation` (``eta2`` is its ``scale``).
    """

    #: relative change of the median heuristic above which a refresh restarts the moments
    bandwidth_tolerance: float = BANDWIDTH_TOLERANCE

    def __init__(
        self,
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
            scale=eta2,
            schedule=schedule or GeometricSchedule(first=50, ratio=2.0, max_gap=1000),
            **kwargs,
        )

    def features_for(self, dim: int) -> int:
        """The number of features ``D`` in dimension ``dim``."""
        return default_n_features(dim) if self.n_features is None else self.n_features

    def new_state(self, dim: int, gammas: TrialSelection) -> FastKameleonAdaptState:
        return FastKameleonAdaptState(
            gammas=gammas, zero_gram=np.zeros((dim, dim)), n_features=self.features_for(dim),
            next_refresh=self.schedule.first, reservoir=Reservoir(self.n_bandwidth, dim),
        )

    def extra_stats(self, state: FastKameleonAdaptState, tune: bool) -> dict[str, Any]:
        moments = state.moments
        return {
            "n_features": state.n_features,
            "n_history": 0 if moments is None else round(moments.count)
            + state.since_snapshot,
            "feature_rank": self.feature_rank(state, tune),
        }

    def feature_rank(self, state: FastKameleonAdaptState, tune: bool) -> int:
        """Eigenpairs of ``C`` in the proposals of the draw: ``D`` while tuning uses ``C``
        itself, 0 before there is a kernel part.  A snapshot at a draw's last iteration
        leaves no factor until the next proposal; the draw's proposals used the last one."""
        if not state.active:
            return 0
        if self.trace_tolerance == 0.0 and tune:
            return state.n_features
        return state.factor_rank

    # ------------------------------------------------------------------ history
    def record(self, state: FastKameleonAdaptState, x: np.ndarray, logp: float,
               rng: np.random.Generator) -> None:
        a = state
        a.reservoir.add(x, rng)
        if a.moments is None:
            return
        if a.n_pending and x is a.last_recorded:
            # a rejection repeats the position: one more copy of the same point (positions
            # are never changed in place, so identity is equality; equal values recorded as
            # separate rows would give the same moments anyway)
            a.pending_weight[a.n_pending - 1] += 1.0
        else:  # room for it: a snapshot (which empties the buffer) every SNAPSHOT_GAP
            a.pending[a.n_pending] = x
            a.pending_weight[a.n_pending] = 1.0
            a.n_pending += 1
            a.last_recorded = x
        a.since_snapshot += 1
        if a.since_snapshot >= SNAPSHOT_GAP:
            self.snapshot(a)

    @staticmethod
    def flush(state: FastKameleonAdaptState) -> None:
        """Add the features of the pending points to the moments (one weighted batch update,
        with the features in use when the points were recorded: every bandwidth change
        flushes first)."""
        a = state
        if a.n_pending:
            k = a.n_pending
            a.moments.update_batch(a.features.features(a.pending[:k]), a.pending_weight[:k])
            a.n_pending = 0

    def refresh(self, state: FastKameleonAdaptState, rng: np.random.Generator) -> None:
        a = state
        points = a.reservoir.points
        s = self.fixed_bandwidth or median_heuristic(points)
        if s <= 0:
            return  # degenerate history: stay a random walk until it spreads out
        if a.features is None:  # drawn from the chain's rng, so seeds reproduce runs
            a.features = RandomFourierFeatures.draw(
                a.dim, a.n_features, s, rng, self.embedding, self.frequencies
            )
            a.pending = np.empty((SNAPSHOT_GAP, a.dim))
            a.pending_weight = np.zeros(SNAPSHOT_GAP)
            a.root = np.empty((a.n_features, a.n_features))
        self.flush(a)
        if a.moments is None or abs(s / a.bandwidth - 1.0) > self.bandwidth_tolerance:
            # the features change with the bandwidth: the moments restart from the reservoir
            a.features = a.features.with_bandwidth(s)
            a.moments = OnlineMeanCov(a.n_features)
            # the reservoir's distinct points with their multiplicities (about a third of
            # them are distinct at the acceptance target: the same moments, a third the work)
            distinct, counts = distinct_rows(points, return_counts=True)
            a.moments.update_batch(a.features.features(distinct), counts)
            a.bandwidth = s
            # a new C, of the same frequencies rescaled: its factor is followed from the
            # previous basis, not recomputed by an exact eigendecomposition at every
            # restart (timings: docs/benchmarks/fkamh_rank.md)
        # else: keep bandwidth, features and the moments accumulated over the whole history
        self.snapshot(a)
        self.activate(a)

    def snapshot(self, state: FastKameleonAdaptState) -> None:
        """Let the proposals use the current whole-history feature covariance."""
        a = state
        self.flush(a)
        a.since_snapshot = 0
        a.cov = a.moments.cov
        if a.omega is not a.features.omega:  # a new bandwidth
            a.omega = a.features.omega
            a.omega_t = np.ascontiguousarray(a.omega.T)
        a.rank = 0  # factorised when a proposal first needs it
        a.cache.clear()  # C changed: cached proposals are stale

    def factorise(self, state: FastKameleonAdaptState, rng: np.random.Generator, tune: bool,
                  exact: bool = False) -> None:
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
        a = state
        if tune and self.trace_tolerance > 0.0 and not exact:
            R, a.basis = refine_lowrank_root(a.cov, a.basis, self.trace_tolerance, rng)
        else:
            R = lowrank_root(a.cov, self.trace_tolerance)
        a.rank = a.factor_rank = R.shape[0]
        a.root[: a.rank] = R
        if a.rank <= a.omega.shape[0]:
            a.folded = None
        else:
            a.folded = a.cov if self.trace_tolerance == 0.0 else R.T @ R

    def final(self, state: FastKameleonAdaptState, rng: np.random.Generator) -> None:
        super().final(state, rng)
        if state.active:  # C is frozen from now on: factor it once, exactly
            self.factorise(state, rng, tune=False, exact=True)
            state.cache.clear()  # the tuning-time factor must not serve a frozen iteration

    # ------------------------------------------------------------------ proposal
    def natural_scale(self, state: FastKameleonAdaptState) -> float:
        return 4.0 * state.bandwidth**4

    def gram(self, state: FastKameleonAdaptState, y: np.ndarray, rng: np.random.Generator,
             tune: bool) -> np.ndarray:
        a = state
        sincos = a.features.embedding == "sincos"
        if self.trace_tolerance == 0.0 and tune:
            # nothing to truncate: a factorisation per snapshot would cost more than it saves
            return rff_full_gram(y, a.omega, a.features.phase, a.cov, sincos)
        if a.rank == 0:
            self.factorise(a, rng, tune)
        if a.folded is not None:  # rank above the number of frequencies: fold, it is cheaper
            return rff_full_gram(y, a.omega, a.features.phase, a.folded, sincos)
        return rff_lowrank_gram_t(y, a.omega_t, a.features.phase, a.root[: a.rank], sincos)
