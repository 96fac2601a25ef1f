"""The places where KameleonSMC relies on PyMC's SMC internals.

PyMC's :class:`~pymc.smc.kernels.SMC_KERNEL` evaluates the starting particles one after the
other in ``_initialize_kernel``, which its documentation asks subclasses not to override,
draws them from the private ``_prior_expression``, and builds the progress bar's columns
with the private ``_progressbar_config`` and ``_make_progressbar_update_functions``.
KameleonSMC needs the start's evaluations as one batch (on the user's executor), prior
draws where PyMC would use an ``initval``, and its evaluations on the progress bar:
:class:`SeamedSMCKernel` is the one class that touches all of them, for PyMC 5 and 6 alike
(read for PyMC 5.28 and 6.x).
"""

from __future__ import annotations

import numpy as np
from pymc.blocking import DictToArrayBijection
from pymc.pytensorf import floatX
from pymc.smc.kernels import SMC_KERNEL

__all__ = ["SeamedSMCKernel"]


class SeamedSMCKernel(SMC_KERNEL):
    """PyMC's SMC kernel with the start evaluated by :meth:`evaluate_start` and the progress
    bar's columns from :meth:`progress_config` and :meth:`progress_update_functions`."""

    @staticmethod
    def progress_config(n_chains: int = 1) -> tuple[list, dict]:
        """The progress bar's columns and their initial cells (PyMC's by default)."""
        return SMC_KERNEL._progressbar_config(n_chains)

    def progress_update_functions(self) -> tuple:
        """Functions from a stage's stats to the cells' text (PyMC's by default)."""
        return SMC_KERNEL._make_progressbar_update_functions(self)

    @classmethod
    def _progressbar_config(cls, n_chains: int = 1):
        return cls.progress_config(n_chains)

    def _make_progressbar_update_functions(self):
        return self.progress_update_functions()

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
