"""Position-dependent Gaussian Metropolis-Hastings proposals (shared by KAMH and F-KAMH).

Both kameleon samplers propose ``x* ~ N(y, gamma^2 I + scale * G(y))`` where ``G(y)`` is a
positive semi-definite "adaptive part" learned from the chain history and ``scale`` is
``nu^2`` (KAMH) or ``eta^2`` (F-KAMH).  This module implements what they share:

* the full Metropolis-Hastings correction ``log q(y | x*) - log q(x* | y)``, where the
  reverse density is built at the *proposed* point ``x*`` with the same history and scale;
* caching of ``G`` at the current point (after an accepted move the reverse proposal of the
  last iteration is the forward proposal of the next one), invalidated by adaptation;
* Robbins-Monro adaptation of ``scale`` toward the target acceptance while tuning, batched
  per PyMC draw (mean acceptance of the draw's iterations).  When a refresh changes the
  natural scale of ``G`` (see :func:`pymc_kameleon.math.kamh.natural_nu2_scale`), an adapted
  scale moves with it, keeping the tuned acceptance rate; a scale the user fixed
  (``adapt_scale=False``) never changes;
* a history schedule: ``_record`` every tuning iteration, ``_refresh`` at the first draw
  boundary after each event of a :class:`~pymc_kameleon.adaptation.GeometricSchedule`
  (never after tuning: the last tuned proposal is the one that samples);
* the choice of ``gamma`` among a few candidates by trials while tuning
  (:class:`~pymc_kameleon.adaptation.TrialSelection`: round-robin blocks of draws, expected
  squared jump distance per iteration), each candidate with its own adapted scale; after
  the trials, a scale at its lower bound moves ``gamma`` to the next smaller candidate.

Everything runs in the whitened coordinates of the step base, so ``gamma`` is relative to
the posterior scale learned in the warm-up.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..adaptation import GeometricSchedule, RobbinsMonro, TrialSelection, check_robbins_monro
from ..math.compiled import gaussian_factor, gaussian_logpdf
from ..math.kernels import check_bandwidth
from ..math.linalg import MultivariateNormal, safe_cholesky
from .base import BaseKernelStep, ChainState, Proposal

__all__ = ["GAMMA_GRID", "LocalGaussianAdaptState", "LocalGaussianStep"]

#: Default ``gamma`` candidates, in units of the random-walk scale ``2.38 / sqrt(d)``.
GAMMA_GRID = (0.1, 0.3, 1.0)
_GAMMA_ROUNDS = 3  # trial rounds (the first is not scored)
_GAMMA_SHARE = 0.25  # of the sampler's tuning draws spent on the trials
_KERNEL_DRAWS = 500  # the sampler's tuning draws when PyMC does not tell (pm.sample defaults)


@dataclass
class LocalGaussianAdaptState:
    """Adaptive state common to the local-Gaussian samplers."""

    scalers: list[RobbinsMonro] | None = None  # absolute scale per gamma candidate,
    # created when G is first built
    gammas: TrialSelection | None = None  # gamma candidates and their trials
    last_jump: np.ndarray | float = 0.0  # squared components of the last proposed move
    t: int = 0  # tuning iterations seen
    next_refresh: int = 1
    bandwidth: float = float("nan")
    active: bool = False  # is the adaptive part G(y) in use?
    natural: float = float("nan")  # natural scale of G at the last refresh
    cache: dict = field(default_factory=dict)  # position bytes -> (G, scale, chol, half_logdet)


class LocalGaussianStep(BaseKernelStep):
    """Base for ``N(y, gamma^2 I + scale * G(y))`` Metropolis-Hastings steps.

    Subclasses implement :meth:`_gram`, :meth:`_natural_scale`, :meth:`_record` and
    :meth:`_refresh` (which sets ``active``) and extend the adapt state.  They take their
    own name for the initial ``scale`` (``nu2``, ``eta2``) and their default ``schedule``;
    the other keywords below are common to both and documented with
    :class:`~pymc_kameleon.KameleonStep`.

    Parameters
    ----------
    scale : float, optional
        Initial value of the adapted scale (default: its natural value, see
        :meth:`_default_ratio`).
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

    stats_dtypes_shapes = {
        **BaseKernelStep.stats_dtypes_shapes,
        "scaling": (np.float64, []),
        "gamma": (np.float64, []),
        "bandwidth": (np.float64, []),
    }
    _progress_columns = (("accept", "Accept"), ("scaling", "Scaling"))

    def __init__(
        self,
        vars=None,
        *,
        scale: float | None,
        schedule: GeometricSchedule,
        gamma: float | Sequence[float] | None = None,
        bandwidth: float | None = None,
        target_accept: float = 0.234,
        adapt_scale: bool = True,
        adapt_exponent: float = 0.6,
        **kwargs,
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
        self._gamma_given = given
        self.fixed_bandwidth = check_bandwidth(bandwidth)
        self.initial_scale = None if scale is None else float(scale)
        self.target_accept = float(target_accept)
        self.adapt_scale = bool(adapt_scale)
        self.adapt_exponent = float(adapt_exponent)
        self.schedule = schedule
        super().__init__(vars, **kwargs)
        self._zero_gram = np.zeros((self.dim, self.dim))  # the adaptive part while inactive

    @property
    def gamma_candidates(self) -> tuple[float, ...]:
        """The values of ``gamma`` tried while tuning (one: a fixed ``gamma``)."""
        if self._gamma_given is not None:
            return self._gamma_given
        return tuple(c * self._walk.scale0 for c in GAMMA_GRID)

    @property
    def gamma(self) -> float:
        """``gamma`` in use: the candidate on trial while tuning, the chosen one after."""
        return self._adapt.gammas.value

    def _initial_adapt_state(self) -> LocalGaussianAdaptState:
        a = self._new_adapt_state()
        a.gammas = TrialSelection(self.gamma_candidates, block=self._gamma_block(),
                                  rounds=_GAMMA_ROUNDS)
        return a

    def _gamma_block(self) -> int:
        """Draws per candidate and round: the trials take ``_GAMMA_SHARE`` of the sampler's
        tuning draws (``_KERNEL_DRAWS`` of them when PyMC does not say how many)."""
        kernel = _KERNEL_DRAWS
        if self._chain_tune:
            kernel = max(0, self._chain_tune - self._warmup_length())
        n = len(self.gamma_candidates) * _GAMMA_ROUNDS
        return max(1, int(_GAMMA_SHARE * kernel / n))

    # ------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def _new_adapt_state(self) -> LocalGaussianAdaptState:
        """A fresh adapt state of the sampler (``gammas`` is filled in by the base)."""

    @abstractmethod
    def _gram(self, y: np.ndarray) -> np.ndarray:
        """The adaptive part ``G(y)`` (only called while ``active``)."""

    @abstractmethod
    def _natural_scale(self) -> float:
        """Scale of ``G`` on which the dimensionless ratio is measured."""

    @abstractmethod
    def _record(self, x: np.ndarray, logp: float) -> None:
        """Add a chain position and its stored log density to the history (tuning only)."""

    @abstractmethod
    def _refresh(self) -> None:
        """Rebuild the adaptive part from the history; set ``active`` and ``bandwidth``."""

    def _extra_stats(self) -> dict[str, Any]:
        """Sampler-specific stats added to every iteration's stats."""
        return {}

    def _default_ratio(self) -> float:
        # 2.38^2 / d is the optimal random-walk scaling on a Gaussian target; the adaptive
        # part at the natural scale is about twice the local covariance (see kamh.py).
        return 2.38**2 / (2.0 * self.dim)

    # ------------------------------------------------------------------ proposal
    @property
    def scale(self) -> float:
        """``nu^2`` or ``eta^2``; before ``G`` exists the user's initial value (or NaN)."""
        a = self._adapt
        if a.scalers is None:
            return float("nan") if self.initial_scale is None else self.initial_scale
        return a.scalers[a.gammas.index].value

    def _activate(self) -> None:
        """Mark the adaptive part as (re)built and keep the scale consistent with it."""
        a = self._adapt
        a.cache.clear()
        natural = self._natural_scale()
        if a.scalers is None:
            ratio = self._default_ratio()
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

    def proposal_at(self, y: np.ndarray) -> MultivariateNormal:
        """The proposal distribution ``q(. | y)`` under the current adaptation."""
        y = np.asarray(y, dtype=float)
        _, (_, _, L, _) = self._cached_proposal(y, {})
        return MultivariateNormal(y, L)

    def _factor(self, gram: np.ndarray | None, scale: float,
                gamma: float) -> tuple[np.ndarray, float]:
        """Cholesky factor and ``half_logdet`` of ``gamma^2 I + scale * gram``.

        Compiled when Numba is available; a matrix the plain factorisation rejects goes to
        :func:`~pymc_kameleon.math.linalg.safe_cholesky` (jitter), which raises ``ValueError``
        on non-finite entries.  Either way the factor is a deterministic function of the
        covariance, so forward and reverse densities use the same rule.
        """
        if gram is None:  # the random walk N(y, gamma^2 I); scale may still be NaN
            gram, scale = self._zero_gram, 0.0
        gamma2 = gamma**2
        L, half_logdet, ok = gaussian_factor(gram, gamma2, scale)
        if not ok:
            cov = gamma2 * np.eye(gram.shape[0]) + scale * gram
            L, _ = safe_cholesky(cov)
            half_logdet = float(np.sum(np.log(np.abs(L.diagonal()))))
        return L, half_logdet

    def _cached_proposal(self, y: np.ndarray, cache: dict,
                         params: tuple[float, float] | None = None) -> tuple[bytes, tuple]:
        """``(key, (gram, (scale, gamma), chol, half_logdet))`` at ``y``, reusing ``cache``.

        The proposal at a point depends on the point, the adaptive part (the cache is
        emptied whenever that changes), the scale and ``gamma`` (both checked here;
        ``params``: ``(scale, gamma)`` in use, looked up unless given).
        """
        key = y.tobytes()
        if params is None:
            params = (self.scale, self.gamma)
        entry = cache.get(key)
        if entry is None:
            gram = self._gram(y) if self._adapt.active else None
            entry = (gram, params, *self._factor(gram, *params))
        elif entry[1] != params and not (np.isnan(params[0]) and np.isnan(entry[1][0])
                                         and params[1] == entry[1][1]):
            entry = (entry[0], params, *self._factor(entry[0], *params))
        return key, entry

    def _propose(self, state: ChainState) -> tuple[Proposal, dict[str, Any]]:
        a = self._adapt
        y = state.position
        params = (self.scale, self.gamma)  # the same for both points
        try:
            key_y, entry_y = self._cached_proposal(y, a.cache, params)
            z = self.rng.standard_normal(y.shape[0])
            move = entry_y[2] @ z
            x_new = y + move
            key_x, entry_x = self._cached_proposal(x_new, a.cache, params)
        except (ValueError, np.linalg.LinAlgError):  # overflowing covariance: a rejection
            return Proposal(y, -np.inf), {}
        # the same solve for both densities keeps a symmetric proposal exactly symmetric
        forward = gaussian_logpdf(x_new, y, entry_y[2], entry_y[3])
        reverse = gaussian_logpdf(y, x_new, entry_x[2], entry_x[3])
        log_correction = reverse - forward
        if not math.isfinite(log_correction):
            return Proposal(y, -np.inf), {}
        # both points can be the next current point: keep exactly their two entries
        a.cache = {key_y: entry_y, key_x: entry_x}
        if self.tune and not a.gammas.done:  # scores the gamma trials
            a.last_jump = move * move
        return Proposal(x_new, log_correction), {}

    def _tuning_stats(self) -> dict[str, Any]:
        return {
            "scaling": self.scale,
            "gamma": self.gamma,
            "bandwidth": self._adapt.bandwidth,
            **self._extra_stats(),
        }

    # ------------------------------------------------------------------ adaptation
    def _adapt_step(self, new_state: ChainState, accept_prob: float) -> None:
        a = self._adapt
        a.t += 1
        a.gammas.record(accept_prob, a.last_jump)
        a.last_jump = 0.0  # an outright rejection (no move proposed) jumps nowhere
        self._record(new_state.position, new_state.logp)

    def _begin_tuning_draw(self, mean_accept: float) -> None:
        a = self._adapt
        if self.adapt_scale and a.active and np.isfinite(mean_accept):
            # the scale of the candidate that ran the last draw
            scaler = a.scalers[a.gammas.index]
            scaler.update(mean_accept, target=self._accept_target(self.target_accept))
            if scaler.at_floor:
                # the adaptive part is gone (its scale at the lower bound, 1e-4 of its start)
                # and the acceptance still below the target: gamma's walk alone is too wide
                a.gammas.step_down()
        a.gammas.next_draw()
        if a.t >= a.next_refresh:
            self._refresh()
            a.next_refresh = self.schedule.next_after(a.t)

    def _on_stop_tuning(self) -> None:
        # trials cut short by the end of tuning (PyMC 5 does not tell the step how long
        # tuning is): the candidate in use, the one the last tuning draw reported
        self._adapt.gammas.stop()
