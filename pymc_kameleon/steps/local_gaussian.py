"""Position-dependent Gaussian Metropolis-Hastings proposals (shared by KAMH and F-KAMH).

Both kameleon samplers propose ``x* ~ N(y, gamma^2 I + scale * G(y))`` where ``G(y)`` is a
positive semi-definite "adaptive part" learned from the chain history and ``scale`` is
``nu^2`` (KAMH) or ``eta^2`` (F-KAMH).  This module implements what they share:

* the full Metropolis-Hastings correction ``log q(y | x*) - log q(x* | y)``, where the
  reverse density is built at the *proposed* point ``x*`` with the same history and scale;
* caching of ``G`` at the current point (after an accepted move the reverse proposal of the
  last iteration is the forward proposal of the next one), invalidated by adaptation;
* Robbins-Monro adaptation of ``scale`` toward the target acceptance while tuning.  The
  recursion runs on the dimensionless ratio ``scale / natural_scale`` (see
  :func:`pymc_kameleon.math.kamh.natural_nu2_scale`), so a refreshed history or bandwidth
  does not upset a tuned acceptance rate;
* a history schedule: ``_record`` every tuning iteration, ``_refresh`` at the iterations of a
  :class:`~pymc_kameleon.adaptation.GeometricSchedule` and once more at ``stop_tuning``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..adaptation import GeometricSchedule, RobbinsMonro
from ..math.linalg import MultivariateNormal
from .base import BaseKernelStep, ChainState, Proposal

__all__ = ["LocalGaussianAdaptState", "LocalGaussianStep"]


@dataclass
class LocalGaussianAdaptState:
    """Adaptive state common to the local-Gaussian samplers."""

    scaler: RobbinsMonro
    t: int = 0  # tuning iterations seen
    next_refresh: int = 1
    bandwidth: float = float("nan")
    active: bool = False  # is the adaptive part G(y) in use?
    cache: dict = field(default_factory=dict)  # position bytes -> (G, scale, proposal)


class LocalGaussianStep(BaseKernelStep):
    """Base for ``N(y, gamma^2 I + scale * G(y))`` Metropolis-Hastings steps.

    Subclasses implement :meth:`_gram`, :meth:`_natural_scale`, :meth:`_record` and
    :meth:`_refresh` (which sets ``active``) and extend the adapt state.
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
        gamma: float,
        scale: float | None,
        target_accept: float,
        adapt_scale: bool,
        adapt_exponent: float,
        schedule: GeometricSchedule,
        **kwargs,
    ):
        if not (np.isfinite(gamma) and gamma > 0):
            raise ValueError(f"gamma must be a positive number, got {gamma!r}")
        if scale is not None and not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"the initial scale must be a positive number, got {scale!r}")
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must lie in (0, 1), got {target_accept!r}")
        self.gamma = float(gamma)
        self.initial_scale = None if scale is None else float(scale)
        self.target_accept = float(target_accept)
        self.adapt_scale = bool(adapt_scale)
        self.adapt_exponent = float(adapt_exponent)
        self.schedule = schedule
        RobbinsMonro(1.0, self.target_accept, self.adapt_exponent)  # validate early
        super().__init__(vars, **kwargs)

    # ------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def _gram(self, y: np.ndarray) -> np.ndarray:
        """The adaptive part ``G(y)`` (only called while ``active``)."""

    @abstractmethod
    def _natural_scale(self) -> float:
        """Scale of ``G`` on which the dimensionless ratio is measured."""

    @abstractmethod
    def _record(self, x: np.ndarray) -> None:
        """Add a chain position to the history (tuning only)."""

    @abstractmethod
    def _refresh(self) -> None:
        """Rebuild the adaptive part from the history; set ``active`` and ``bandwidth``."""

    def _extra_stats(self) -> dict[str, Any]:
        """Sampler-specific stats added to every iteration's stats."""
        return {}

    def _new_scaler(self) -> RobbinsMonro:
        # 2.38^2 / d is the optimal random-walk scaling on a Gaussian target; the adaptive
        # part at the natural scale is about twice the local covariance (see kamh.py).
        return RobbinsMonro(2.38**2 / (2.0 * self.dim), self.target_accept, self.adapt_exponent)

    # ------------------------------------------------------------------ proposal
    @property
    def scale(self) -> float:
        """The scale (``nu^2`` or ``eta^2``) currently multiplying ``G``."""
        a = self._adapt
        if not a.active:
            return float("nan")
        return a.scaler.value * self._natural_scale()

    def _activate(self) -> None:
        """Mark the adaptive part as built; the first time, convert a user scale to a ratio."""
        a = self._adapt
        a.cache.clear()
        if not a.active and a.scaler.t == 0 and self.initial_scale is not None:
            ratio = self.initial_scale / self._natural_scale()
            a.scaler = RobbinsMonro(ratio, self.target_accept, self.adapt_exponent)
        a.active = True

    def proposal_at(self, y: np.ndarray) -> MultivariateNormal:
        """The proposal distribution ``q(. | y)`` under the current adaptation."""
        y = np.asarray(y, dtype=float)
        gram = self._gram(y) if self._adapt.active else None
        return self._gaussian(y, gram, self.scale)

    def _gaussian(self, y: np.ndarray, gram: np.ndarray | None, scale: float):
        cov = np.diag(np.full(y.shape[0], self.gamma**2))
        if gram is not None:
            cov += scale * gram
        return MultivariateNormal.from_cov(y, cov)

    def _cached_proposal(self, y: np.ndarray, cache: dict) -> tuple[bytes, tuple]:
        """``(key, (gram, scale, distribution))`` at ``y``, reusing ``cache`` when valid.

        The proposal at a point depends on the point, the adaptive part (the cache is
        emptied whenever that changes) and the scale (checked here).
        """
        y = np.asarray(y, dtype=float)
        key = y.tobytes()
        scale = self.scale
        entry = cache.get(key)
        if entry is None:
            gram = self._gram(y) if self._adapt.active else None
            entry = (gram, scale, self._gaussian(y, gram, scale))
        elif entry[1] != scale and not (np.isnan(scale) and np.isnan(entry[1])):
            entry = (entry[0], scale, self._gaussian(y, entry[0], scale))
        return key, entry

    def _propose(self, state: ChainState) -> tuple[Proposal, dict[str, Any]]:
        a = self._adapt
        key_y, entry_y = self._cached_proposal(state.position, a.cache)
        forward = entry_y[2]
        x_new = self._to_model_dtype(forward.sample(self.rng))
        key_x, entry_x = self._cached_proposal(x_new, a.cache)
        reverse = entry_x[2]
        log_correction = reverse.logpdf(state.position) - forward.logpdf(x_new)
        # both points can be the next current point: keep exactly their two entries
        a.cache = {key_y: entry_y, key_x: entry_x}
        stats = {
            "scaling": self.scale,
            "gamma": self.gamma,
            "bandwidth": a.bandwidth,
            **self._extra_stats(),
        }
        return Proposal(x_new, log_correction), stats

    # ------------------------------------------------------------------ adaptation
    def _adapt_step(self, new_state: ChainState, accept_prob: float) -> None:
        a = self._adapt
        a.t += 1
        if self.adapt_scale and a.active:
            a.scaler.update(accept_prob)
        self._record(new_state.position)
        if a.t >= a.next_refresh:
            self._refresh()
            a.next_refresh = self.schedule.next_after(a.t)

    def _on_stop_tuning(self) -> None:
        if self._adapt.t > 0:
            self._refresh()
