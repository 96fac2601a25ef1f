"""Recycling: every stage's evaluated independent proposals as one importance sample.

Every point drawn from a stage's mixture ``g_t`` and evaluated has its prior and likelihood
terms stored, so its density under the posterior is known without a new evaluation.
:class:`RecycledPool` weighs all of them with the deterministic-mixture weights
``w(y) = prior(y) L(y) / sum_t (n_t / n) g_t(y)`` (Owen and Zhou, 2000);
:func:`recycle` tops the pool up with adaptive importance-sampling rounds after the last
stage and resamples the posterior's draws from it (docs/smc.md, "Expensive models").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ..compat import MAX_KHAT, pareto_khat
from ..math.draw_worth import resample_draws
from ..math.importance import kish_ess, mixture_log_weights, resample_indices
from ..math.mixture import GaussianMixture
from ..math.whitening import AffineMap
from .proposal import StageProposal

__all__ = ["TOP_UP_ROUNDS", "RecycledPool", "Recycled", "defensive", "recycle",
           "worth"]

#: Most rounds of the recycling top-up, each of at least ``draws`` points from a mixture
#: refitted to the weighted pool (measured: docs/benchmarks/smc.md, "Against samplers
#: outside PyMC").
TOP_UP_ROUNDS = 8


def worth(log_w: np.ndarray) -> float:
    """What an importance sample of log weights ``log_w`` is worth: Kish's ESS, or 0 where
    no weight is finite or Pareto's k-hat is above :data:`MAX_KHAT`."""
    finite = np.isfinite(log_w)
    if not finite.any() or pareto_khat(log_w[finite]) > MAX_KHAT:
        return 0.0
    return kish_ess(log_w)


class RecycledPool:
    """The evaluated draws of every stage's independent mixture, with their weights.

    Parameters
    ----------
    own_stage : bool, default False
        Weigh each point by its own stage's density alone, ``p(y) / g_s(y)``, instead of
        the deterministic mixture: where a stage's proposal was fitted to earlier points
        of the pool, the mixture weights of those points depend on them and their tails
        come out short (``docs/benchmarks/emulator.md``), while each stage's own weights
        stay unbiased given the stages before it.
    """

    def __init__(self, own_stage: bool = False):
        self.own_stage = own_stage
        self.X, self.prior, self.lik = [], [], []
        self.stages: list[list] = []  # [whitening, mixture, n_t]
        self._weighted: tuple | None = None  # weighted()'s answer until the pool grows

    @property
    def size(self) -> int:
        return sum(len(x) for x in self.X)

    def new_stage(self, whitening: AffineMap, mixture: GaussianMixture) -> None:
        """Points added from now on are draws of ``mixture`` in ``whitening``'s ``u``."""
        self.stages.append([whitening, mixture, 0])
        self._weighted = None

    def add(self, X: np.ndarray, prior: np.ndarray, lik: np.ndarray) -> None:
        self.X.append(np.array(X, dtype=float))
        self.prior.append(prior)
        self.lik.append(lik)
        self.stages[-1][2] += len(X)
        self._weighted = None

    def weighted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Points, their prior and likelihood terms, and their log weights (each stage's
        mixture density in the model's coordinates: the whitened density over the
        whitening's determinant).

        Every stage's density at every point costs O(points x stages); callers that ask
        again before the pool grows (a check of its worth, then the draws) get the same
        read-only arrays.
        """
        if self._weighted is not None:
            return self._weighted
        X, prior, lik = (np.concatenate(a) for a in (self.X, self.prior, self.lik))
        if self.own_stage:
            log_w = self._own_stage_weights(X, prior + lik)
        else:
            log_g = [self.stage_log_density(X, s) for s in range(len(self.stages))]
            log_w = mixture_log_weights(prior + lik, log_g, [s[2] for s in self.stages])
        out = (X, prior, lik, log_w)
        for a in out:
            a.setflags(write=False)
        self._weighted = out
        return out

    def stage_log_density(self, Y: np.ndarray, stage: int = -1) -> np.ndarray:
        """The log density of stage ``stage``'s proposal at rows ``Y``, in the model's
        coordinates (its mixture's in the whitened ones, less the whitening's log
        determinant)."""
        whitening, mixture, _ = self.stages[stage]
        return mixture.logpdf(whitening.rows_to_u(Y)) - whitening.log_det

    def _own_stage_weights(self, X: np.ndarray, log_p: np.ndarray) -> np.ndarray:
        """Each stage's own weights ``p / g_s``, scaled so that a stage's share of the
        total is its share of the stages' Kish ESS (a stage of poor weights counts less;
        each stage's estimate of the evidence stays unbiased given the stages before)."""
        log_p = np.where(np.isnan(log_p), -np.inf, log_p)
        out, ess, start = [], [], 0
        for w, mix, n in self.stages:  # the points are stored stage after stage
            log_w = log_p[start:start + n] - mix.logpdf(w.rows_to_u(X[start:start + n]))
            out.append(log_w + w.log_det)
            ess.append(kish_ess(log_w) if n and np.isfinite(log_w).any() else 0.0)
            start += n
        share = np.array(ess) / max(sum(ess), 1e-300)
        total = sum(n for _, _, n in self.stages)
        return np.concatenate([lw + np.log(max(sh * total / max(len(lw), 1), 1e-300))
                               for lw, sh in zip(out, share, strict=True)])


def defensive(mixture: GaussianMixture, share: float = 0.3,
              widen: float = 1.5) -> GaussianMixture:
    """The mixture with a ``share`` of its mass on copies ``widen`` times as wide: draws of a
    fitted mixture alone give a few huge weights where the posterior's tails are heavier."""
    return GaussianMixture(np.concatenate([(1 - share) * mixture.weights,
                                           share * mixture.weights]),
                           np.concatenate([mixture.means, mixture.means]),
                           np.concatenate([mixture.chols, widen * mixture.chols]))


@dataclass
class Recycled:
    """The recycled posterior: ``draws`` resampled points with their prior and likelihood
    terms, the pool's Kish ESS and its log evidence."""

    X: np.ndarray
    prior: np.ndarray
    lik: np.ndarray
    ess: float
    log_evidence: float


def recycle(pool: RecycledPool, proposal: StageProposal, extra: int, draws: int,
            size: int, evaluate, rng: np.random.Generator, to_float,
            options, target_ess: float | None = None) -> Recycled | None:
    """Top ``pool`` up with ``extra`` evaluations in adaptive importance-sampling rounds,
    then resample ``size`` draws from it; None (with a warning) where no weight is finite.

    Each round draws from the defensive version of a mixture refitted to ``draws`` points
    resampled from the weighted pool; the refit is skipped while the pool's Kish ESS is
    below ``10 d`` (a fit to fewer distinct points would be too narrow).  With
    ``target_ess`` the rounds have ``draws`` points each, as many as ``extra`` pays for,
    and stop once the pool is worth ``target_ess`` (:func:`worth`; none if it already is).
    Copies of a point are returned next to each other where the pool is worth fewer
    draws than ``size``, so that ArviZ counts them about once.
    """
    if target_ess is None:
        rounds = int(np.clip(extra // max(draws, 1), 1, TOP_UP_ROUNDS)) if extra > 0 else 0
        sizes = [extra // rounds + (k < extra % rounds) for k in range(rounds)]
    else:
        sizes = [draws] * int(min(extra // max(draws, 1), TOP_UP_ROUNDS))
    for k, n in enumerate(sizes):
        if (k > 0 or target_ess is not None) and pool.size:
            X, _, _, log_w = pool.weighted()
            if target_ess is not None and worth(log_w) >= target_ess:
                break
            if k > 0 and np.isfinite(log_w).any() and kish_ess(log_w) >= 10 * X.shape[1]:
                proposal = proposal.refit(X[resample_indices(log_w, draws, rng)], rng,
                                          options)
        top_up = defensive(proposal.mixture)
        pool.new_stage(proposal.whitening, top_up)
        X = to_float(proposal.whitening.rows_to_x(top_up.sample(n, rng)))
        pool.add(X, *evaluate(X))
    if not pool.size:  # the budget was spent before any stage or top-up
        warnings.warn("KameleonSMC: no evaluation is left to recycle (the budget was spent "
                      "before any stage); the particles are returned instead",
                      RuntimeWarning, stacklevel=4)
        return None
    X, prior, lik, log_w = pool.weighted()
    if not np.isfinite(log_w).any():
        warnings.warn("KameleonSMC: no recycled draw has a finite weight; the particles "
                      "are returned instead", RuntimeWarning, stacklevel=4)
        return None
    ess = kish_ess(log_w)
    log_evidence = float(logsumexp(log_w) - np.log(len(log_w)))
    idx = resample_draws(X, log_w, size, rng)
    return Recycled(X[idx], prior[idx], lik[idx], ess, log_evidence)
