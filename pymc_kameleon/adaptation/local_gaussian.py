"""The kameleons' kernel: a position-dependent Gaussian proposal and its adaptation.

KAMH and F-KAMH propose ``x* ~ N(y, gamma^2 I + scale * G(y))``, where ``G(y)`` is a
positive semi-definite "adaptive part" learned from the chain history and ``scale`` is
``nu^2`` (KAMH) or ``eta^2`` (F-KAMH).  :class:`LocalGaussianAdaptation` holds what they
share, as a configuration whose functions act on one chain's state (the interface of
:mod:`.warmup_kernel` and :mod:`.kernel_hmc`; it knows nothing of PyMC: the random
generator, whether PyMC tunes and the acceptance target are arguments):

* :meth:`~LocalGaussianAdaptation.propose`: the draw and the full Metropolis-Hastings
  correction ``log q(y | x*) - log q(x* | y)``, the reverse density built at ``x*`` with
  the same history and scale; ``G`` and its factor are cached at the current point (after
  an accepted move the reverse proposal of the last iteration is the forward proposal of
  the next one), and the cache is emptied by adaptation;
* :meth:`~LocalGaussianAdaptation.update` every tuning iteration: the gamma trials' score
  and :meth:`~LocalGaussianAdaptation.record` of the new position in the history;
* :meth:`~LocalGaussianAdaptation.update_draw` at each tuning draw boundary: Robbins-Monro
  adaptation of ``scale`` toward the target acceptance (mean acceptance of the draw's
  iterations), the next gamma trial, and :meth:`~LocalGaussianAdaptation.refresh` after
  each event of the :class:`~pymc_kameleon.adaptation.GeometricSchedule` (never after
  tuning: the last tuned proposal is the one that samples).  When a refresh changes the
  natural scale of ``G`` (:func:`pymc_kameleon.math.kamh.natural_nu2_scale`), an adapted
  scale moves with it, keeping the tuned acceptance rate; a scale the user fixed
  (``adapt_scale=False``) never changes;
* the choice of ``gamma`` among a few candidates by trials while tuning
  (:class:`~pymc_kameleon.adaptation.TrialSelection`: round-robin blocks of draws, expected
  squared jump distance per iteration), each candidate with its own adapted scale; after
  the trials, a scale at its lower bound moves ``gamma`` to the next smaller candidate;
* :meth:`~LocalGaussianAdaptation.final` when tuning ends.

:class:`KameleonAdaptation` (KAMH: a reservoir subsample and its Gram) and
:class:`FastKameleonAdaptation` (F-KAMH: random Fourier features, their whole-history
moments and a low-rank factor of their covariance) supply ``G``.  Everything runs in the
whitened coordinates of the warm-up, so ``gamma`` is relative to the posterior scale.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..math.compiled import (
    gaussian_factor,
    gaussian_logpdf,
    kamh_gram_t,
    rff_full_gram,
    rff_lowrank_gram_t,
)
from ..math.kamh import natural_nu2_scale
from ..math.kernels import check_bandwidth, distinct_rows, median_heuristic
from ..math.linalg import MultivariateNormal, lowrank_root, refine_lowrank_root, safe_cholesky
from ..math.online import OnlineMeanCov, Reservoir, WeightedReservoir
from ..math.rff import RandomFourierFeatures
from ..validation import check_integral
from .kernel import (
    ChainState,
    DrawContext,
    DrawInfo,
    Iteration,
    Metropolis,
    Proposal,
    default_n_steps,
)
from .robbins_monro import RobbinsMonro, check_robbins_monro
from .schedule import GeometricSchedule
from .selection import TrialSelection

__all__ = ["GAMMA_GRID", "FastKameleonAdaptState", "FastKameleonAdaptation",
           "KameleonAdaptState", "KameleonAdaptation", "LocalGaussianAdaptState",
           "LocalGaussianAdaptation", "default_n_features"]

#: Default ``gamma`` candidates, in units of the random-walk scale ``2.38 / sqrt(d)``.
GAMMA_GRID = (0.1, 0.3, 1.0)
GAMMA_ROUNDS = 3  # trial rounds (the first is not scored)
_GAMMA_SHARE = 0.25  # of the kernel's tuning draws spent on the gamma trials
_KERNEL_DRAWS = 500  # the kernel's tuning draws when the step is not told (pm.sample defaults)

# distinct subsample points the median heuristic of KAMH uses: its pairwise distances cost
# O(n^2) at every refresh (every 100 tuning iterations); timing in docs/changelog.md
_BANDWIDTH_POINTS = 500
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
class LocalGaussianAdaptState:
    """One chain's adaptive state common to the local-Gaussian kernels."""

    gammas: TrialSelection  # gamma candidates and their trials
    zero_gram: np.ndarray  # (d, d) zeros: the adaptive part while inactive
    scalers: list[RobbinsMonro] | None = None  # absolute scale per gamma candidate,
    # created when G is first built
    last_jump: np.ndarray | float = 0.0  # squared components of the last proposed move
    t: int = 0  # tuning iterations seen
    next_refresh: int = 1
    bandwidth: float = float("nan")
    active: bool = False  # is the adaptive part G(y) in use?
    natural: float = float("nan")  # natural scale of G at the last refresh
    cache: dict = field(default_factory=dict)  # position bytes -> (G, scale, chol, half_logdet)

    @property
    def dim(self) -> int:
        """Dimension of the chain."""
        return self.zero_gram.shape[0]


class LocalGaussianAdaptation(ABC):
    """The ``N(y, gamma^2 I + scale * G(y))`` kernel and its adaptation (configuration).

    Subclasses implement :meth:`new_state`, :meth:`gram`, :meth:`natural_scale`,
    :meth:`record` and :meth:`refresh` (which calls :meth:`activate`).  The parameters are
    those of the steps (validated here), documented with :class:`~pymc_kameleon.KameleonStep`;
    a subclass passed as ``adaptation_class=`` to a step changes a rule.

    Parameters
    ----------
    scale : float, optional
        Initial value of the adapted scale (default: its natural value, see
        :meth:`default_ratio`).
    schedule : GeometricSchedule
        Tuning iterations at which the history is refreshed.
    gamma : float or sequence of float, optional
        Fixed ``gamma`` or its candidates (default :data:`GAMMA_GRID` in random-walk units).
    bandwidth : float, optional
        Fixed kernel bandwidth (default: median heuristic at each refresh).
    target_accept : float, default 0.234
    adapt_scale : bool, default True
    adapt_exponent : float, default 0.6
    """

    def __init__(
        self,
        *,
        scale: float | None,
        schedule: GeometricSchedule,
        gamma: float | Sequence[float] | None = None,
        bandwidth: float | None = None,
        target_accept: float = 0.234,
        adapt_scale: bool = True,
        adapt_exponent: float = 0.6,
    ):
        if gamma is None:
            given = None
        else:
            given = tuple(np.atleast_1d(np.asarray(gamma, dtype=float)).tolist())
            if not given or not all(np.isfinite(g) and g > 0 for g in given):
                raise ValueError(f"gamma must be a positive number (or a sequence of them), "
                                 f"got {gamma!r}")
        if scale is not None:
            check_robbins_monro(initial=scale)
        check_robbins_monro(target=target_accept, exponent=adapt_exponent)
        self.gamma_given = given
        self.fixed_bandwidth = check_bandwidth(bandwidth)
        self.initial_scale = None if scale is None else float(scale)
        self.target_accept = float(target_accept)
        self.adapt_scale = bool(adapt_scale)
        self.adapt_exponent = float(adapt_exponent)
        self.schedule = schedule

    def gamma_candidates(self, walk_scale: float) -> tuple[float, ...]:
        """The values of ``gamma`` tried while tuning (one: a fixed ``gamma``), given the
        random-walk scale ``2.38 / sqrt(d)`` of the whitened posterior."""
        if self.gamma_given is not None:
            return self.gamma_given
        return tuple(c * walk_scale for c in GAMMA_GRID)

    def init(self, dim: int, walk_scale: float,
             kernel_draws: int | None = None) -> LocalGaussianAdaptState:
        """A fresh state; the gamma trials take a quarter of the kernel's ``kernel_draws``
        tuning draws (500 when not known)."""
        candidates = self.gamma_candidates(walk_scale)
        kernel = _KERNEL_DRAWS if kernel_draws is None else kernel_draws
        block = max(1, int(_GAMMA_SHARE * kernel / (len(candidates) * GAMMA_ROUNDS)))
        gammas = TrialSelection(candidates, block=block, rounds=GAMMA_ROUNDS)
        return self.new_state(dim, gammas)

    # ------------------------------------------------------------------ subclass parts
    @abstractmethod
    def new_state(self, dim: int, gammas: TrialSelection) -> LocalGaussianAdaptState:
        """A fresh state of the kernel."""

    @abstractmethod
    def gram(self, state: LocalGaussianAdaptState, y: np.ndarray, rng: np.random.Generator,
             tune: bool) -> np.ndarray:
        """The adaptive part ``G(y)`` (only called while ``state.active``)."""

    @abstractmethod
    def natural_scale(self, state: LocalGaussianAdaptState) -> float:
        """Scale of ``G`` on which the dimensionless ratio is measured."""

    @abstractmethod
    def record(self, state: LocalGaussianAdaptState, x: np.ndarray, logp: float,
               rng: np.random.Generator) -> None:
        """Add a chain position and its stored log density to the history (tuning only)."""

    @abstractmethod
    def refresh(self, state: LocalGaussianAdaptState, rng: np.random.Generator) -> None:
        """Rebuild the adaptive part from the history; set ``active`` and ``bandwidth``."""

    def extra_stats(self, state: LocalGaussianAdaptState, tune: bool) -> dict[str, Any]:
        """Kernel-specific stats added to every iteration's stats."""
        return {}

    def default_ratio(self, dim: int) -> float:
        """Initial scale over the natural scale of ``G``."""
        # 2.38^2 / d is the optimal random-walk scaling on a Gaussian target; the adaptive
        # part at the natural scale is about twice the local covariance (see kamh.py).
        return 2.38**2 / (2.0 * dim)

    # ------------------------------------------------------------------ proposal
    def scale(self, state: LocalGaussianAdaptState) -> float:
        """``nu^2`` or ``eta^2``; before ``G`` exists the user's initial value (or NaN)."""
        if state.scalers is None:
            return float("nan") if self.initial_scale is None else self.initial_scale
        return state.scalers[state.gammas.index].value

    def activate(self, state: LocalGaussianAdaptState) -> None:
        """Mark the adaptive part as (re)built and keep the scale consistent with it."""
        a = state
        a.cache.clear()
        natural = self.natural_scale(a)
        if a.scalers is None:
            ratio = self.default_ratio(a.dim)
            initial = self.initial_scale if self.initial_scale is not None else ratio * natural
            a.scalers = [
                RobbinsMonro(initial, self.target_accept, self.adapt_exponent,
                             lower=1e-4 * ratio * natural, upper=1e4 * ratio * natural)
                for _ in a.gammas.values
            ]
        elif self.adapt_scale and natural != a.natural:
            for scaler in a.scalers:
                scaler.rescale(natural / a.natural)
        a.natural = natural
        a.active = True

    def proposal_at(self, state: LocalGaussianAdaptState, y: np.ndarray,
                    rng: np.random.Generator, tune: bool) -> MultivariateNormal:
        """The proposal distribution ``q(. | y)`` under the current adaptation."""
        y = np.asarray(y, dtype=float)
        _, (_, _, L, _) = self.cached_proposal(state, y, {}, rng, tune)
        return MultivariateNormal(y, L)

    @staticmethod
    def factor(state: LocalGaussianAdaptState, gram: np.ndarray | None, scale: float,
               gamma: float) -> tuple[np.ndarray, float]:
        """Cholesky factor and ``half_logdet`` of ``gamma^2 I + scale * gram``.

        Compiled when Numba is available; a matrix the plain factorisation rejects goes to
        :func:`~pymc_kameleon.math.linalg.safe_cholesky` (jitter), which raises ``ValueError``
        on non-finite entries.  Either way the factor is a deterministic function of the
        covariance, so forward and reverse densities use the same rule.
        """
        if gram is None:  # the random walk N(y, gamma^2 I); scale may still be NaN
            gram, scale = state.zero_gram, 0.0
        gamma2 = gamma**2
        L, half_logdet, ok = gaussian_factor(gram, gamma2, scale)
        if not ok:
            cov = gamma2 * np.eye(gram.shape[0]) + scale * gram
            L, _ = safe_cholesky(cov)
            half_logdet = float(np.sum(np.log(np.abs(L.diagonal()))))
        return L, half_logdet

    def cached_proposal(self, state: LocalGaussianAdaptState, y: np.ndarray, cache: dict,
                        rng: np.random.Generator, tune: bool,
                        params: tuple[float, float] | None = None) -> tuple[bytes, tuple]:
        """``(key, (gram, (scale, gamma), chol, half_logdet))`` at ``y``, reusing ``cache``.

        The proposal at a point depends on the point, the adaptive part (the cache is
        emptied whenever that changes), the scale and ``gamma`` (both checked here;
        ``params``: ``(scale, gamma)`` in use, looked up unless given).
        """
        key = y.tobytes()
        if params is None:
            params = (self.scale(state), state.gammas.value)
        entry = cache.get(key)
        if entry is None:
            gram = self.gram(state, y, rng, tune) if state.active else None
            entry = (gram, params, *self.factor(state, gram, *params))
        elif entry[1] != params and not (np.isnan(params[0]) and np.isnan(entry[1][0])
                                         and params[1] == entry[1][1]):
            entry = (entry[0], params, *self.factor(state, entry[0], *params))
        return key, entry

    def propose(self, state: LocalGaussianAdaptState, y: np.ndarray,
                rng: np.random.Generator, tune: bool) -> tuple[np.ndarray, float]:
        """Draw ``x* ~ q(. | y)``; return it and ``log q(y | x*) - log q(x* | y)`` (``y`` and
        ``-inf`` for an overflowing covariance: a rejection)."""
        a = state
        params = (self.scale(a), a.gammas.value)  # the same for both points
        try:
            key_y, entry_y = self.cached_proposal(a, y, a.cache, rng, tune, params)
            z = rng.standard_normal(y.shape[0])
            move = entry_y[2] @ z
            x_new = y + move
            key_x, entry_x = self.cached_proposal(a, x_new, a.cache, rng, tune, params)
        except (ValueError, np.linalg.LinAlgError):  # overflowing covariance: a rejection
            return y, -np.inf
        # the same solve for both densities keeps a symmetric proposal exactly symmetric
        forward = gaussian_logpdf(x_new, y, entry_y[2], entry_y[3])
        reverse = gaussian_logpdf(y, x_new, entry_x[2], entry_x[3])
        log_correction = reverse - forward
        if not math.isfinite(log_correction):
            return y, -np.inf
        # both points can be the next current point: keep exactly their two entries
        a.cache = {key_y: entry_y, key_x: entry_x}
        if tune and not a.gammas.done:  # scores the gamma trials
            a.last_jump = move * move
        return x_new, log_correction

    def step(self, state: LocalGaussianAdaptState, chain: ChainState, mh: Metropolis,
             tune: bool) -> Iteration:
        """One Metropolis-Hastings iteration with :meth:`propose`."""
        x, log_correction = self.propose(state, chain.position, mh.rng, tune)
        return mh.step(chain, Proposal(x, log_correction))

    @staticmethod
    def n_steps(state: LocalGaussianAdaptState, dim: int, tune: bool) -> int:
        """Iterations per draw: ``max(5, d)``."""
        return default_n_steps(dim)

    def stats(self, state: LocalGaussianAdaptState, tune: bool) -> dict[str, Any]:
        """The tuned values a draw reports."""
        return {
            "scaling": self.scale(state),
            "gamma": state.gammas.value,
            "bandwidth": state.bandwidth,
            **self.extra_stats(state, tune),
        }

    # ------------------------------------------------------------------ adaptation
    def update(self, state: LocalGaussianAdaptState, it: Iteration, x: np.ndarray,
               rng: np.random.Generator) -> None:
        """After a tuning iteration: its acceptance and jump for the gamma trials, the
        chain's whitened position and log density for the history."""
        a = state
        a.t += 1
        a.gammas.record(it.accept_prob, a.last_jump)
        a.last_jump = 0.0  # an outright rejection (no move proposed) jumps nowhere
        self.record(a, it.state.position, it.state.logp, rng)

    def update_draw(self, state: LocalGaussianAdaptState, ctx: DrawContext) -> DrawInfo:
        """At a tuning draw boundary: the scale toward the acceptance target (lowered under
        estimator noise), the gamma trials, and the history's refresh on its schedule."""
        a, rng = state, ctx.rng
        mean_accept = float(np.mean(ctx.accepts)) if ctx.accepts else float("nan")
        target = ctx.target(self.target_accept)
        if self.adapt_scale and a.active and np.isfinite(mean_accept):
            # the scale of the candidate that ran the last draw
            scaler = a.scalers[a.gammas.index]
            scaler.update(mean_accept, target=target)
            if scaler.at_floor:
                # the adaptive part is gone (its scale at the lower bound, 1e-4 of its start)
                # and the acceptance still below the target: gamma's walk alone is too wide
                a.gammas.step_down()
        a.gammas.next_draw()
        if a.t >= a.next_refresh:
            self.refresh(a, rng)
            a.next_refresh = self.schedule.next_after(a.t)
        return DrawInfo(False, False)

    def final(self, state: LocalGaussianAdaptState,
              rng: np.random.Generator | None = None) -> None:
        """Freeze the kernel when tuning ends."""
        # trials cut short by the end of tuning (PyMC 5 does not tell the step how long
        # tuning is): the candidate in use, the one the last tuning draw reported
        state.gammas.stop()


@dataclass
class KameleonAdaptState(LocalGaussianAdaptState):
    """KAMH's state: the history reservoir and the subsample in use."""

    reservoir: Reservoir | WeightedReservoir | None = None
    Zt: np.ndarray | None = None  # the subsample in use, transposed (d, n), C-contiguous:
    # the layout of the compiled Gram


class KameleonAdaptation(LocalGaussianAdaptation):
    """KAMH's kernel: ``G(y) = M_{z,y} H M_{z,y}^T`` on a reservoir subsample ``z``.

    Parameters
    ----------
    n_history : int
        Size of the history subsample.
    tail_weight : float
        ``beta >= 0`` of the weighted reservoir (0: uniform).
    **kwargs
        Those of :class:`LocalGaussianAdaptation` (``nu2`` is its ``scale``).
    """

    def __init__(self, *, n_history: int = 1000, nu2: float | None = None,
                 subsample_schedule: GeometricSchedule | None = None,
                 tail_weight: float = 0.0, **kwargs):
        self.n_history = check_integral("n_history", n_history, minimum=2)
        self.tail_weight = float(tail_weight)
        if isinstance(tail_weight, bool) or not (np.isfinite(self.tail_weight)
                                                 and self.tail_weight >= 0.0):
            raise ValueError(f"tail_weight must be a finite number >= 0, got {tail_weight!r}")
        super().__init__(
            scale=nu2,
            schedule=subsample_schedule or GeometricSchedule(first=50, ratio=1.5, max_gap=100),
            **kwargs,
        )

    def new_state(self, dim: int, gammas: TrialSelection) -> KameleonAdaptState:
        kind = WeightedReservoir if self.tail_weight else Reservoir
        return KameleonAdaptState(gammas=gammas, zero_gram=np.zeros((dim, dim)),
                                  next_refresh=self.schedule.first,
                                  reservoir=kind(self.n_history, dim))

    def extra_stats(self, state: KameleonAdaptState, tune: bool) -> dict[str, Any]:
        return {"n_history": 0 if state.Zt is None else state.Zt.shape[1]}

    def record(self, state: KameleonAdaptState, x: np.ndarray, logp: float,
               rng: np.random.Generator) -> None:
        if self.tail_weight:
            state.reservoir.add(x, -self.tail_weight * logp, rng)
        else:
            state.reservoir.add(x, rng)

    def refresh(self, state: KameleonAdaptState, rng: np.random.Generator) -> None:
        a = state
        Z = a.reservoir.points
        s = self.fixed_bandwidth or median_heuristic(Z, max_points=_BANDWIDTH_POINTS)
        # a positive median heuristic has seen two distinct points; a fixed bandwidth has not
        if s <= 0 or (self.fixed_bandwidth and len(distinct_rows(Z)) < 2):
            return  # degenerate history: stay a random walk until it spreads out
        a.Zt = np.ascontiguousarray(Z.T)
        a.bandwidth = s
        self.activate(a)

    def natural_scale(self, state: KameleonAdaptState) -> float:
        return natural_nu2_scale(state.bandwidth, state.Zt.shape[1])

    def gram(self, state: KameleonAdaptState, y: np.ndarray, rng: np.random.Generator,
             tune: bool) -> np.ndarray:
        return kamh_gram_t(y, state.Zt, state.bandwidth)


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
