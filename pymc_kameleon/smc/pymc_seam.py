"""The two places where KameleonSMC relies on PyMC's SMC internals.

PyMC's :class:`~pymc.smc.kernels.SMC_KERNEL` evaluates the starting particles one after the
other in ``_initialize_kernel``, which its documentation asks subclasses not to override,
and draws them from the private ``_prior_expression``.  KameleonSMC needs the start's
evaluations as one batch (on the user's executor) and prior draws where PyMC would use an
``initval``: :class:`SeamedSMCKernel` is the one class that touches both, for PyMC 5 and 6
alike (read for PyMC 5.28 and 6.x).
"""

from __future__ import annotations

import numpy as np
from pymc.blocking import DictToArrayBijection
from pymc.pytensorf import floatX
from pymc.smc.kernels import SMC_KERNEL

__all__ = ["SeamedSMCKernel"]


class SeamedSMCKernel(SMC_KERNEL):
    """PyMC's SMC kernel with the start evaluated by :meth:`evaluate_start`."""

    def evaluate_start(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The prior and likelihood terms at the starting particles (the rows of ``X``)."""
        raise NotImplementedError

    def set_prior_expression(self, expression) -> None:
        """Draw the starting particles from ``expression`` (PyMC's initial-point
        expression of the free variables, transformed) instead of PyMC's own."""
        self._prior_expression = expression

    def _initialize_kernel(self) -> None:
        # PyMC's own start, its evaluations replaced by one batch
        init = self.start if self.start else self.initialize_population()
        population = [DictToArrayBijection.map({v.name: init[v.name][i]
                                                for v in self.variables}).data
                      for i in range(self.draws)]
        self.tempered_posterior = np.array(floatX(population))
        self.prior_logp, self.likelihood_logp = self.evaluate_start(self.tempered_posterior)
