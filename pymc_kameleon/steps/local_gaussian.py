"""The PyMC step of the position-dependent Gaussian kernels (KAMH and F-KAMH).

The kernel and its adaptation are :class:`~pymc_kameleon.adaptation.local_gaussian.
LocalGaussianAdaptation` (PyMC-free); :class:`LocalGaussianStep` builds one from its
parameters, exposes it as :attr:`~LocalGaussianStep.adaptation` and the current chain's
state as :attr:`~LocalGaussianStep.adaptation_state`; the base runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..adaptation.local_gaussian_base import (
    GAMMA_GRID,
    LocalGaussianAdaptation,
    LocalGaussianAdaptState,
)
from ..math.linalg import MultivariateNormal
from .base import BaseKernelStep

__all__ = ["GAMMA_GRID", "LocalGaussianAdaptState", "LocalGaussianStep"]



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
    progress_columns = (("accept", "Accept"), ("scaling", "Scaling"))

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
        adaptation = adaptation_class(
            gamma=gamma, bandwidth=bandwidth, target_accept=target_accept,
            adapt_scale=adapt_scale, adapt_exponent=adapt_exponent, **kernel_kwargs)
        super().__init__(vars, adaptation=adaptation, **kwargs)

    # the configuration, read where the steps' parameters are documented
    fixed_bandwidth = property(lambda self: self.adaptation.fixed_bandwidth)
    initial_scale = property(lambda self: self.adaptation.initial_scale)
    target_accept = property(lambda self: self.adaptation.target_accept)
    adapt_scale = property(lambda self: self.adaptation.adapt_scale)
    adapt_exponent = property(lambda self: self.adaptation.adapt_exponent)
    schedule = property(lambda self: self.adaptation.schedule)

    @property
    def gamma_candidates(self) -> tuple[float, ...]:
        """The values of ``gamma`` tried while tuning (one: a fixed ``gamma``)."""
        return self.adaptation.gamma_candidates(self.warmup.scale0)

    @property
    def gamma(self) -> float:
        """``gamma`` in use: the candidate on trial while tuning, the chosen one after."""
        return self.adaptation_state.gammas.value

    @property
    def scale(self) -> float:
        """``nu^2`` or ``eta^2``; before ``G`` exists the user's initial value (or NaN)."""
        return self.adaptation.scale(self.adaptation_state)

    def proposal_at(self, y: np.ndarray) -> MultivariateNormal:
        """The proposal distribution ``q(. | y)`` under the current adaptation."""
        return self.adaptation.proposal_at(self.adaptation_state, y, self.rng, self.tune)
