"""A stage's proposal and the exact Metropolis-Hastings move of every particle.

At the start of each stage :meth:`StageProposal.fit` builds, from the resampled particles,
the whitening map, the KAMH subsample ``Z`` with its bandwidth and ``nu^2``, and two
Gaussian mixtures, each fitted to one half of the whitened particles (every copy of a
resampled particle in the same half).  :class:`MixtureMove` then moves every particle
once: with probability ``independent_weight`` a draw from the mixture fitted to the other
half, else the KAMH proposal built at the particle; the acceptance uses the mixture
proposal's density both ways (:meth:`MixtureMove.log_ratio`), and each particle's stored
log density, never re-evaluated (pseudo-marginal SMC).  ``docs/smc.md`` has the algorithm.

A mixture fitted to the particle it moves is not invariant for the target: it is a little
higher at its own points, so a particle in a thin region leaves it too easily and the
tails thin out stage after stage (``docs/benchmarks/smc.md``, "smc-cross-fitted").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..math.kamh import kamh_grams, kamh_proposals
from ..math.kernels import median_heuristic
from ..math.mixture import GaussianMixture
from ..math.whitening import AffineMap

__all__ = ["Chains", "MixtureMove", "MoveInfo", "StageProposal", "TARGET_ACCEPT"]

#: Target acceptance rate of the KAMH scale between stages (thesis Section 5.3).
TARGET_ACCEPT = 0.234


def fit_mixture(U: np.ndarray, rng: np.random.Generator, options) -> GaussianMixture:
    """The independent proposal: a Gaussian mixture fitted to whitened points ``U``."""
    return GaussianMixture.fit_clusters(U, options.n_clusters, rng, options.global_weight,
                                        options.em_iters)


def split_copies(X: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """Halves (0 or 1 per row) with every copy of a row in the same half and the halves as
    equal as the copies allow, in random order; None where a half would hold fewer than
    two distinct rows (a mixture cannot be fitted to it)."""
    _, groups = np.unique(X, axis=0, return_inverse=True)
    groups = np.ravel(groups)
    n_groups = groups.max() + 1
    order = rng.permutation(n_groups)
    first = order[np.cumsum(np.bincount(groups)[order]) <= len(X) / 2]
    if len(first) < 2 or n_groups - len(first) < 2:
        return None
    return np.where(np.isin(groups, first), 0, 1)


@dataclass(frozen=True)
class StageProposal:
    """What one stage proposes from (all in the whitened coordinates of ``whitening``).

    Attributes
    ----------
    whitening : AffineMap
        The particles' mean and covariance factor.
    Z : numpy.ndarray
        The KAMH subsample.
    bandwidth, gamma, nu2 : float
        The KAMH proposal's kernel bandwidth, isotropic part and scale.
    weight : float
        The probability of an independent proposal.
    mixtures : tuple of GaussianMixture
        The mixtures fitted to each half of the particles (one where they cannot be split).
    movers : numpy.ndarray
        For each particle the fit was made from, the index of the mixture that moves it:
        the one fitted to the other half.
    """

    whitening: AffineMap
    Z: np.ndarray
    bandwidth: float
    gamma: float
    nu2: float
    weight: float
    mixtures: tuple[GaussianMixture, ...]
    movers: np.ndarray

    @property
    def mixture(self) -> GaussianMixture:
        """The density of the stage's independent proposals: ``mixtures`` in the
        proportions of ``movers`` (what recycling weighs them by)."""
        shares = np.bincount(self.movers, minlength=len(self.mixtures)) / len(self.movers)
        return GaussianMixture(
            np.concatenate([s * m.weights for m, s in zip(self.mixtures, shares, strict=True)]),
            np.concatenate([m.means for m in self.mixtures]),
            np.concatenate([m.chols for m in self.mixtures]))

    @classmethod
    def fit(cls, X: np.ndarray, log_nu: float, rng: np.random.Generator,
            options) -> StageProposal:
        """The proposal of a stage whose resampled particles are the rows of ``X``
        (``log_nu``: the adapted log scale of the KAMH part)."""
        whitening = AffineMap.from_sample(X)
        U = whitening.rows_to_u(X)
        n = min(options.n_subsample, len(U))
        Z = U[rng.choice(len(U), size=n, replace=False)]
        s = median_heuristic(Z)
        bandwidth = s if s > 0 else 1.0
        # SMC's start of nu^2 (the convention: math/kamh.py): the kernel part's mean trace
        # is 2.38^2 at (a subset of) the particles
        grams = kamh_grams(U[: min(len(U), 100)], Z, bandwidth)
        trace = float(np.mean(np.trace(grams, axis1=1, axis2=2)))
        base = 2.38**2 / trace if trace > 0 else 1.0
        half = split_copies(U, rng)
        if half is None:
            mixtures, movers = (fit_mixture(U, rng, options),), np.zeros(len(U), dtype=int)
        else:  # each half's mixture moves the other half's particles
            mixtures, movers = (tuple(fit_mixture(U[half == h], rng, options) for h in (0, 1)),
                                1 - half)
        return cls(whitening, Z, bandwidth, options.gamma, base * np.exp(2.0 * log_nu),
                   options.independent_weight, mixtures, movers)

    def refit(self, X: np.ndarray, rng: np.random.Generator, options) -> StageProposal:
        """The same proposal with its whitening and one mixture fitted to the rows of ``X``
        (for importance sampling, where a proposal may depend on its points)."""
        whitening = AffineMap.from_sample(X)
        return replace(self, whitening=whitening,
                       mixtures=(fit_mixture(whitening.rows_to_u(X), rng, options),),
                       movers=np.zeros(len(X), dtype=int))

    def independent(self, movers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One draw for each entry of ``movers`` from the mixture it names."""
        out = np.empty((len(movers), self.mixtures[0].means.shape[1]))
        for m, mixture in enumerate(self.mixtures):
            sel = movers == m
            out[sel] = mixture.sample(int(sel.sum()), rng)
        return out

    def independent_logpdf(self, U: np.ndarray, movers: np.ndarray) -> np.ndarray:
        """The log density of each row of ``U`` under the mixture ``movers`` names."""
        out = np.empty(len(U))
        for m, mixture in enumerate(self.mixtures):
            sel = movers == m
            out[sel] = mixture.logpdf(U[sel])
        return out

    def local(self, U: np.ndarray):
        """The KAMH proposals built at the rows of ``U``."""
        return kamh_proposals(U, self.Z, self.bandwidth, self.gamma, self.nu2)


@dataclass
class Chains:
    """The particles a stage moves: whitened and raw positions, stored log densities
    (never re-evaluated: pseudo-marginal estimates stay with their point), the local
    proposals built at them, the mixture that moves each (an index into the proposal's
    ``mixtures``) and its log density there."""

    U: np.ndarray
    X: np.ndarray
    logp: np.ndarray
    prior: np.ndarray
    lik: np.ndarray
    q: Any
    g: np.ndarray
    movers: np.ndarray

    @classmethod
    def start(cls, X, logp, prior, lik, proposal: StageProposal,
              rows: np.ndarray | None = None) -> Chains:
        """Chains at the given particles (arrays the chains own: the moves change them),
        which are the particles ``rows`` of the proposal's fit (default: all of them)."""
        U = proposal.whitening.rows_to_u(X)
        movers = proposal.movers if rows is None else proposal.movers[rows]
        return cls(U, X, logp, prior, lik, proposal.local(U),
                   proposal.independent_logpdf(U, movers), movers)

    def accept(self, accepted, U, X, q, g, logp, prior, lik) -> None:
        self.U[accepted] = U[accepted]
        self.q.replace(accepted, q)
        for mine, new in ((self.g, g), (self.X, X), (self.logp, logp), (self.prior, prior),
                          (self.lik, lik)):
            mine[accepted] = new[accepted]

    def states(self) -> tuple[np.ndarray, ...]:
        """Copies of the positions and their log densities (tempered, prior, likelihood)."""
        return self.X.copy(), self.logp.copy(), self.prior.copy(), self.lik.copy()


@dataclass
class MoveInfo:
    """One move of every chain: acceptance probabilities, which proposals came from the
    mixture, which were accepted, and the mixture's evaluated proposals."""

    accept_prob: np.ndarray
    independent: np.ndarray
    accepted: np.ndarray
    X_independent: np.ndarray
    prior_independent: np.ndarray
    lik_independent: np.ndarray


class MixtureMove:
    """One exact Metropolis-Hastings step of every chain with the stage's mixture proposal.

    A subclass may change :meth:`log_ratio` (the tests break it on purpose); pass it as
    ``KameleonSMC(move=...)``.
    """

    def __call__(self, chains: Chains, proposal: StageProposal, beta: float, evaluate,
                 rng: np.random.Generator, to_float) -> MoveInfo:
        """Move every chain once (``evaluate(X)``: prior and likelihood terms of a batch;
        ``to_float``: the model's float type)."""
        n = len(chains.U)
        glob = rng.random(n) < proposal.weight
        U_prop = chains.q.sample(rng)
        U_prop[glob] = proposal.independent(chains.movers[glob], rng)
        q_prop = proposal.local(U_prop)
        g_prop = proposal.independent_logpdf(U_prop, chains.movers)
        X_prop = to_float(proposal.whitening.rows_to_x(U_prop))
        pl, ll = evaluate(X_prop)
        prop_logp = pl + ll * beta
        log_ratio = self.log_ratio(prop_logp, chains.logp, chains.U, U_prop, chains.q, q_prop,
                                   chains.g, g_prop, proposal.weight)
        accepted = np.log(rng.random(n)) < log_ratio
        chains.accept(accepted, U_prop, X_prop, q_prop, g_prop, prop_logp, pl, ll)
        return MoveInfo(np.exp(np.minimum(log_ratio, 0.0)), glob, accepted, X_prop[glob],
                        pl[glob], ll[glob])

    @staticmethod
    def log_ratio(prop_logp, cur_logp, U, U_prop, q_cur, q_prop, g_cur, g_prop,
                  weight: float) -> np.ndarray:
        """Full MH log ratio per particle with the mixture proposal's density both ways:
        ``w g(u*) + (1 - w) q_Z(u* | u)`` forward, the same with ``u`` and ``u*`` swapped
        in reverse (``q_Z(u | u*)`` built at the proposal).  The linear whitening's
        Jacobian cancels; NaN counts as a rejection."""
        log_fwd, log_rev = q_cur.logpdf(U_prop), q_prop.logpdf(U)
        if weight > 0:
            with np.errstate(divide="ignore"):
                lw, l1w = np.log(weight), np.log1p(-weight)
            log_fwd = np.logaddexp(lw + g_prop, l1w + log_fwd)
            log_rev = np.logaddexp(lw + g_cur, l1w + log_rev)
        log_ratio = prop_logp - cur_logp + log_rev - log_fwd
        return np.where(np.isnan(log_ratio), -np.inf, log_ratio)
