"""How a stage moves the particles: every particle until the stage rules end it, or
waste-free chains whose every state is kept.

:class:`Mutation` runs the stage's :class:`~.proposal.MixtureMove` on the particles.
Without ``chain_length`` every particle moves, step after step, until the
:class:`~.rules.StageRules` end the stage, and the last states are the new particles.  With
``chain_length = P`` (waste-free SMC; Dau and Chopin, 2022) ``M = draws / P`` of the
resampled particles each run ``P - 1`` steps and all ``M P`` states are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .proposal import Chains, MixtureMove, StageProposal
from .rules import StageRules, StepRecord, finite_mean, rise_se, unique_fraction

__all__ = ["Mutation", "StageResult"]


@dataclass
class StageResult:
    """A stage's new particles (positions; tempered, prior and likelihood log densities)
    and what its moves did."""

    X: np.ndarray
    logp: np.ndarray
    prior: np.ndarray
    lik: np.ndarray
    n_steps: int
    accept_prob: np.ndarray  # every proposal's acceptance probability
    independent: np.ndarray  # whether it came from the mixture
    refreshed: float  # the fraction of particles that accepted an independent proposal
    drift: float  # the mean log density's rise after the first step, in standard errors
    unique: float  # the fraction of distinct particles

    def acceptance(self) -> tuple[float, float, float]:
        """Mean acceptance probability of all, local and independent proposals."""
        acc, glob = self.accept_prob, self.independent

        def mean(sel):
            return float(np.mean(acc[sel])) if np.any(sel) else np.nan

        return (float(np.mean(acc)) if acc.size else np.nan, mean(~glob), mean(glob))


def drift(levels: list[float], logp: np.ndarray) -> float:
    """Rise of the particles' mean log density after the stage's first MH step, in standard
    errors of such a difference (about 0 once the particles have reached the stage's
    target)."""
    se = rise_se(logp)
    if len(levels) < 3 or not se > 0:
        return 0.0
    return float((levels[-1] - levels[1]) / se)


@dataclass
class Mutation:
    """The moves of a stage.

    Parameters
    ----------
    rules : StageRules
        When a stage without waste-free chains ends.
    max_steps : int
        The most steps of a stage.
    chain_length : int, optional
        ``P`` of waste-free SMC (None: off).
    move : MixtureMove
        One Metropolis-Hastings step of every chain.
    """

    rules: StageRules
    max_steps: int
    chain_length: int | None = None
    move: MixtureMove | None = None

    def run(self, particles: tuple[np.ndarray, ...], proposal: StageProposal, beta: float,
            evaluations, rng: np.random.Generator, to_float: Callable,
            on_independent: Callable | None = None,
            callback: Callable[[StepRecord], object] | None = None,
            enough: Callable[[], bool] | None = None) -> StageResult:
        """Move ``particles`` (positions; tempered, prior and likelihood log densities).

        ``evaluations``: the chain's :class:`~.evaluation.Evaluations`;
        ``on_independent(X, prior, lik)`` sees every evaluated independent proposal;
        ``callback(record)`` every step's :class:`~.rules.StepRecord`; ``enough()``, asked
        after every step, ends the stage early (where the draws are taken from the
        independent proposals, not from the particles).
        """
        move = self.move if self.move is not None else MixtureMove()
        P, N = self.chain_length, len(particles[0])
        rows = np.arange(N) if P is None else rng.choice(N, -(-N // P), replace=False)
        chains = Chains.start(*(a[rows] for a in particles), proposal, rows)  # copies
        kept = [chains.states()]
        if P is None:
            self.rules.start(chains.X)
        accept, independent = [], []
        refreshed = np.zeros(len(rows), dtype=bool)  # accepted an independent proposal
        levels = [finite_mean(chains.logp)]
        n_steps = 0
        while n_steps < self.max_steps and evaluations.left() >= len(rows):
            info = move(chains, proposal, beta, lambda X: evaluations(X, rng, beta), rng,
                        to_float)
            if on_independent is not None:
                on_independent(info.X_independent, info.prior_independent,
                               info.lik_independent)
            accept.append(info.accept_prob)
            independent.append(info.independent)
            refreshed |= info.accepted & info.independent
            n_steps += 1
            levels.append(finite_mean(chains.logp))
            record = StepRecord(n_steps, chains.X, chains.logp, refreshed, levels)
            if P is not None:
                kept.append(chains.states())
                done = len(kept) * len(rows) >= N
            else:
                done = self.rules.done(record)
            if callback is not None:
                callback(record)
            if done or (enough is not None and enough()):
                break
        if P is None:
            X, logp, prior, lik = chains.X, chains.logp, chains.prior, chains.lik
        else:  # every chain's states, step after step, the first N of them
            X, logp, prior, lik = (np.concatenate(a)[:N] for a in zip(*kept, strict=True))
        return StageResult(
            X, logp, prior, lik, n_steps,
            np.concatenate(accept) if accept else np.array([]),
            np.concatenate(independent) if independent else np.array([], dtype=bool),
            float(np.mean(refreshed)), drift(levels, chains.logp), unique_fraction(X))
