"""Kernel HMC's per-chain state: the surrogates, their tallies, the trial and the proposal.

:class:`KernelHMCAdaptState` is what the functions of
:class:`~pymc_kameleon.adaptation.kernel_hmc.KernelHMCAdaptation` act on; the rules that
read and change it are in :mod:`.kernel_hmc_rules`.  Import these names from
:mod:`.kernel_hmc`, their one import path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..math.online import Reservoir
from ..math.rff import RandomFourierFeatures
from ..math.score_matching import FiniteScoreEstimator, LiteScoreEstimator
from .step_size import AnchoredStepSize

__all__ = ["HMCProposal", "KernelHMCAdaptState", "Surrogate", "Tally", "Trial"]


@dataclass(frozen=True, eq=False)  # compared by identity: it holds arrays and estimators
class Surrogate:
    """A proposal of the kernel phase: a fitted score surrogate and its step size, or the
    random walk (``estimator`` None) and its own.  The same value serves as the surrogate in
    use, the refit on trial and the random walk kept as the fallback; the step size and a
    finite surrogate keep adapting in place while tuning."""

    scaler: AnchoredStepSize
    estimator: LiteScoreEstimator | FiniteScoreEstimator | None = None
    bandwidth: float = float("nan")
    lam: float = float("nan")
    lengths: np.ndarray | None = None  # relative per-coordinate lengths (finite, ARD)


@dataclass
class Tally:
    """The tuning iterations one surrogate proposed: its ESJD since the last restart and the
    acceptances of the current draw (for its step size)."""

    n: int = 0
    jump: float = 0.0  # sum of accept_prob * |q* - q|^2
    accepts: list = field(default_factory=list)  # acceptance probabilities of a draw
    anchor_accepts: list = field(default_factory=list)  # surrogate acceptances of a draw

    @property
    def esjd(self) -> float:
        """Expected squared jump distance per iteration (Rao-Blackwellised)."""
        return self.jump / self.n

    def restart(self) -> None:
        """Count the ESJD from here on (a trial or review starts)."""
        self.n, self.jump = 0, 0.0


@dataclass
class Trial:
    """A refit on trial against the surrogate in use, until checked against the target."""

    surrogate: Surrogate
    tally: Tally = field(default_factory=Tally)
    warmed: bool = False  # whether its step size's warm-up (first _MIN_CHECKED) is over


@dataclass
class KernelHMCAdaptState:
    """One chain's kernel phase: the surrogate in use, the one on trial, the history."""

    current: Surrogate  # in use: reported, and frozen by final()
    reservoir: Reservoir
    tally: Tally = field(default_factory=Tally)  # of the surrogate in use, since the last
    # refit, take-over or review
    trial: Trial | None = None
    fallback: Surrogate | None = None  # the random walk the surrogate in use replaced,
    fallback_esjd: float = float("nan")  # and its ESJD then
    t: int = 0
    next_fit: int = 1
    next_cv: int = 1
    cv_lengths: np.ndarray | None = None  # of the last cross-validation (its next start)
    cv_index: int | None = None  # grid index of the last cross-validated bandwidth
    base_features: RandomFourierFeatures | None = None
    pending: list = field(default_factory=list)  # finite: points not yet in the surrogate
    surrogate_accept: float | None = None  # last proposal's acceptance on the surrogate
    last_jump: float = 0.0  # |q* - q|^2 of the last proposal
    by_candidate: bool = False  # whether the trial's surrogate made the last proposal
    n_leapfrog: int = 0  # of the last proposal (a stat)
    n_diverged: int = 0  # trajectories of the current draw rejected unevaluated (a stat)

    @property
    def dim(self) -> int:
        """Dimension of the chain."""
        return self.reservoir.dim

    def proposer(self) -> tuple[Surrogate, Tally]:
        """The surrogate that makes (made) the current proposal and its tally."""
        if self.by_candidate:
            return self.trial.surrogate, self.trial.tally
        return self.current, self.tally


class HMCProposal(NamedTuple):
    """What :meth:`KernelHMCAdaptation.propose` proposed (whitened coordinates)."""

    position: np.ndarray
    log_correction: float  # K(p) - K(p*); -inf: rejected without an evaluation
    n_leapfrog: int  # 1 for a random-walk iteration
    diverged: bool  # non-finite, or farther than max_jump: rejected unevaluated
