"""The PyMC step of the position-dependent Gaussian kernels (KAMH and F-KAMH).

The kernel and its adaptation are :class:`~pymc_kameleon.adaptation.local_gaussian.
LocalGaussianAdaptation` (PyMC-free); :class:`LocalGaussianStep` builds one from its
parameters, exposes it as :attr:`~LocalGaussianStep.adaptation` and the current chain's
state as :attr:`~LocalGaussianStep.adaptation_state`, and delegates the base's hooks to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..adaptation.local_gaussian import (
    GAMMA_GRID,
    GAMMA_ROUNDS,
    LocalGaussianAdaptation,
    LocalGaussianAdaptState,
)
from ..math.linalg import MultivariateNormal
from .base import BaseKernelStep, ChainState, Proposal

__all__ = ["GAMMA_GRID", "LocalGaussianAdaptState", "LocalGaussianStep"]

_GAMMA_SHARE = 0.25  # of the sampler's tuning draws spent on the trials
_KERNEL_DRAWS = 500  # the sampler's tuning draws when PyMC does not tell (pm.sample defaults)


class LocalGaussianStep(BaseKernelStep):
    """Base for ``N(y, gamma^2 I + scale * G(y))`` Metropolis-Hastings steps.

    A subclass passes the class of its kernel (a
    :class:`~pymc_kameleon.adaptation.local_gaussian.LocalGaussianAdaptation`) and its own
    parameters; the kernel is built from them and the common parameters below, documented
    with :class:`~pymc_kameleon.KameleonStep`.

    Parameters
    ----------
    adaptation_class : type
        The kernel and its adaptation.
    kernel_kwargs : dict
        The subclass's parameters of the kernel.
    gamma, bandwidth, target_accept, adapt_scale, adapt_exponent
        The parameters common to both kernels.
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
        adaptation_class: type[LocalGaussianAdaptation],
        kernel_kwargs: dict[str, Any],
        gamma: float | Sequence[float] | None = None,
        bandwidth: float | None = None,
        target_accept: float = 0.234,
        adapt_scale: bool = True,
        adapt_exponent: float = 0.6,
        **kwargs,
    ):
        self.adaptation = adaptation_class(
            gamma=gamma, bandwidth=bandwidth, target_accept=target_accept,
            adapt_scale=adapt_scale, adapt_exponent=adapt_exponent, **kernel_kwargs)
        super().__init__(vars, **kwargs)

    # the configuration, read where the steps' parameters are documented
    fixed_bandwidth = property(lambda self: self.adaptation.fixed_bandwidth)
    initial_scale = property(lambda self: self.adaptation.initial_scale)
    target_accept = property(lambda self: self.adaptation.target_accept)
    adapt_scale = property(lambda self: self.adaptation.adapt_scale)
    adapt_exponent = property(lambda self: self.adaptation.adapt_exponent)
    schedule = property(lambda self: self.adaptation.schedule)

    @property
    def adaptation_state(self) -> LocalGaussianAdaptState:
        """The current chain's adaptive state: the one :attr:`adaptation` acts on."""
        return self._adapt

    @property
    def gamma_candidates(self) -> tuple[float, ...]:
        """The values of ``gamma`` tried while tuning (one: a fixed ``gamma``)."""
        return self.adaptation.gamma_candidates(self._walk.scale0)

    @property
    def gamma(self) -> float:
        """``gamma`` in use: the candidate on trial while tuning, the chosen one after."""
        return self._adapt.gammas.value

    @property
    def scale(self) -> float:
        """``nu^2`` or ``eta^2``; before ``G`` exists the user's initial value (or NaN)."""
        return self.adaptation.scale(self._adapt)

    def proposal_at(self, y: np.ndarray) -> MultivariateNormal:
        """The proposal distribution ``q(. | y)`` under the current adaptation."""
        return self.adaptation.proposal_at(self._adapt, y, self.rng, self.tune)

    def _gamma_block(self) -> int:
        """Draws per candidate and round: the trials take ``_GAMMA_SHARE`` of the sampler's
        tuning draws (``_KERNEL_DRAWS`` of them when PyMC does not say how many)."""
        kernel = _KERNEL_DRAWS
        if self._chain_tune:
            kernel = max(0, self._chain_tune - self._warmup_length())
        n = len(self.gamma_candidates) * GAMMA_ROUNDS
        return max(1, int(_GAMMA_SHARE * kernel / n))

    # ------------------------------------------------------------------ the base's hooks
    def _initial_adapt_state(self) -> LocalGaussianAdaptState:
        return self.adaptation.init(self.dim, self._walk.scale0, self._gamma_block())

    def _propose(self, state: ChainState) -> tuple[Proposal, dict[str, Any]]:
        x, log_correction = self.adaptation.propose(self._adapt, state.position, self.rng,
                                                    self.tune)
        return Proposal(x, log_correction), {}

    def _tuning_stats(self) -> dict[str, Any]:
        return self.adaptation.tuning_stats(self._adapt, self.tune)

    def _adapt_step(self, new_state: ChainState, accept_prob: float) -> None:
        self.adaptation.update(self._adapt, new_state.position, new_state.logp, accept_prob,
                               self.rng)

    def _begin_tuning_draw(self, mean_accept: float) -> None:
        target = self._accept_target(self.adaptation.target_accept)
        self.adaptation.update_draw(self._adapt, mean_accept, target, self.rng)

    def _on_stop_tuning(self) -> None:
        self.adaptation.final(self._adapt, self.rng)
