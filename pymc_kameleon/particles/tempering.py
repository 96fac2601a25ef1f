"""Tempering a population from the prior to a target, free of PyMC.

:func:`next_beta` chooses the next inverse temperature as PyMC's SMC does (the effective
sample size of the incremental weights ``L(x)^(b' - b)`` at ``threshold`` times the
particles, by bisection); :func:`temper` runs the stages on a log density that costs
nothing to evaluate (the emulator's), with the package's moves
(:class:`~.mutation.Mutation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..adaptation.robbins_monro import log_scale_step
from ..math.importance import logsumexp, resample_indices
from .mutation import Mutation
from .proposal import TARGET_ACCEPT, StageProposal
from .rules import Levelled, Refreshed, StageRules

__all__ = ["FreeEvaluations", "next_beta", "temper"]


def next_beta(lik: np.ndarray, beta: float, threshold: float = 0.5) -> float:
    """The largest ``b' <= 1`` whose incremental weights ``exp((b' - beta) lik)`` keep an
    effective sample size of at least ``threshold`` times the particles."""
    lik = np.where(np.isfinite(lik), lik, -np.inf)

    def ess(b: float) -> float:
        lw = (b - beta) * lik
        lw = lw - logsumexp(lw)
        return float(np.exp(-logsumexp(2 * lw)))

    n = len(lik)
    if ess(1.0) >= threshold * n:
        return 1.0
    lo, hi = beta, 1.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if ess(mid) >= threshold * n:
            lo = mid
        else:
            hi = mid
    return max(lo, beta + 1e-12)


@dataclass
class FreeEvaluations:
    """An evaluator of a free log density ``log_target`` for :class:`~.mutation.Mutation`:
    its prior and likelihood terms (the target less the prior), no budget, NaN turned into
    ``-inf``."""

    log_prior: Callable[[np.ndarray], np.ndarray]
    log_target: Callable[[np.ndarray], np.ndarray]

    def left(self) -> float:
        return np.inf

    def __call__(self, X: np.ndarray, rng, beta: float) -> tuple[np.ndarray, np.ndarray]:
        prior = np.atleast_1d(np.asarray(self.log_prior(X), dtype=float))
        lik = np.atleast_1d(np.asarray(self.log_target(X), dtype=float)) - prior
        bad = np.isnan(prior) | np.isnan(lik)
        return np.where(bad, -np.inf, prior), np.where(bad, -np.inf, lik)


def temper(X: np.ndarray, evaluate: FreeEvaluations, rng: np.random.Generator, settings,
           max_steps: int = 30) -> np.ndarray:
    """Equally weighted draws of ``prior * L`` from prior draws ``X`` by tempered SMC with
    the package's mixture moves (``settings``: the proposal's, as
    :meth:`~.proposal.StageProposal.fit` reads them)."""
    prior, lik = evaluate(X, rng, 0.0)
    beta, log_nu, acc_local = 0.0, 0.0, np.nan
    rules = StageRules(stop=(Refreshed(0.9),), levelled=Levelled(None))
    mutation = Mutation(rules, max_steps)
    while beta < 1:
        new = next_beta(lik, beta)
        idx = resample_indices((new - beta) * np.where(np.isfinite(lik), lik, -np.inf),
                               len(X), rng)
        beta, X, prior, lik = new, X[idx], prior[idx], lik[idx]
        if np.isfinite(acc_local):
            log_nu = log_scale_step(log_nu, 1, 1.0, acc_local, TARGET_ACCEPT, gain=1.0)
        proposal = StageProposal.fit(X, log_nu, rng, settings)
        stage = mutation.run((X, prior + beta * lik, prior, lik), proposal, beta, evaluate,
                             rng, np.asarray)
        X, prior, lik = stage.X, stage.prior, stage.lik
        acc_local = stage.acceptance()[1]
    return X
