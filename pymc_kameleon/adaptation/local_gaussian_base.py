"""The part the kameleons' kernels share: ``N(y, gamma^2 I + scale * G(y))`` and its adaptation.

:class:`LocalGaussianAdaptation` proposes with the full Metropolis-Hastings correction, adapts
the scale, runs the gamma trials and refreshes the adaptive part ``G`` on its schedule;
:class:`LocalGaussianAdaptState` is one chain's state of it.  The subclasses of
:mod:`.kameleon` (KAMH) and :mod:`.fast_kameleon` (F-KAMH) supply ``G``.  The rules are
described in :mod:`.local_gaussian`, the one import path of the three modules.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..math.compiled import gaussian_factor, gaussian_logpdf
from ..math.kamh import proposal_covariance
from ..math.kernels import check_bandwidth
from ..math.linalg import MultivariateNormal, safe_cholesky
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

__all__ = ["GAMMA_GRID", "LocalGaussianAdaptState", "LocalGaussianAdaptation"]

#: Default ``gamma`` candidates, in units of the random-walk scale ``2.38 / sqrt(d)``.
GAMMA_GRID = (0.1, 0.3, 1.0)
GAMMA_ROUNDS = 3  # trial rounds (the first is not scored)
_GAMMA_SHARE = 0.25  # of the kernel's tuning draws spent on the gamma trials
_KERNEL_DRAWS = 500  # the kernel's tuning draws when the step is not told (pm.sample defaults)


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
        """Cholesky factor and ``half_logdet`` of ``gamma^2 I + scale * gram``
        (:func:`~pymc_kameleon.math.kamh.proposal_covariance`).

        Compiled when Numba is available; a matrix the plain factorisation rejects goes to
        :func:`~pymc_kameleon.math.linalg.safe_cholesky` (jitter), which raises ``ValueError``
        on non-finite entries.  Either way the factor is a deterministic function of the
        covariance, so forward and reverse densities use the same rule.
        """
        if gram is None:  # the random walk N(y, gamma^2 I); scale may still be NaN
            gram, scale = state.zero_gram, 0.0
        L, half_logdet, ok = gaussian_factor(gram, gamma**2, scale)
        if not ok:
            L, _ = safe_cholesky(proposal_covariance(gram, gamma, scale))
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
