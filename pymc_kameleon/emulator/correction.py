"""The exact correction: adaptive multiple importance sampling on the true density.

The proposal of a round is a Gaussian mixture fitted to draws (at first the emulator's
posterior, then the weighted sample so far), its covariances widened, plus a defensive
heavy-tailed component (a Student-t over the draws' covariance, widened) that covers tails
the emulator missed.  Every point is evaluated truly; over the rounds the weights are the
deterministic-mixture weights ``p(y) / sum_t (n_t / n) g_t(y)`` of
:class:`~pymc_kameleon.particles.recycling.RecycledPool`, on the true log density only (a
likelihood estimate stays with its point).  So the emulator can cost efficiency, never
correctness, as long as the proposals cover the posterior; Pareto's k-hat of the weights
says when they do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from ..compat import pareto_khat
from ..math.importance import kish_ess, resample_indices
from ..math.mixture import GaussianMixture
from ..math.whitening import AffineMap
from ..particles.recycling import RecycledPool
from .settings import ENGINE_DEFAULTS, EmulatorSettings

__all__ = ["DefensiveMixture", "StudentT", "correction_proposal"]


@dataclass
class StudentT:
    """A multivariate Student-t with location ``mean``, scale factor ``chol`` and ``df``."""

    mean: np.ndarray
    chol: np.ndarray
    df: float

    def logpdf(self, X: np.ndarray) -> np.ndarray:
        d = len(self.mean)
        U = np.linalg.solve(self.chol, (X - self.mean).T).T
        q = np.sum(U**2, axis=1)
        nu = self.df
        return (gammaln((nu + d) / 2) - gammaln(nu / 2) - 0.5 * d * np.log(nu * np.pi)
                - np.sum(np.log(np.diag(self.chol))) - 0.5 * (nu + d) * np.log1p(q / nu))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        Z = rng.standard_normal((n, len(self.mean)))
        g = rng.chisquare(self.df, size=n) / self.df
        return self.mean + (Z / np.sqrt(g)[:, None]) @ self.chol.T


@dataclass
class DefensiveMixture:
    """A Gaussian mixture with a share ``weight`` of its mass on a Student-t."""

    mixture: GaussianMixture
    t: StudentT
    weight: float

    def logpdf(self, X: np.ndarray) -> np.ndarray:
        return np.logaddexp(np.log1p(-self.weight) + self.mixture.logpdf(X),
                            np.log(self.weight) + self.t.logpdf(X))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        heavy = rng.random(n) < self.weight
        out = np.empty((n, len(self.t.mean)))
        out[~heavy] = self.mixture.sample(int((~heavy).sum()), rng)
        out[heavy] = self.t.sample(int(heavy.sum()), rng)
        return out


def correction_proposal(X: np.ndarray, rng: np.random.Generator,
                        settings: EmulatorSettings) -> tuple[AffineMap, DefensiveMixture]:
    """The whitening of draws ``X`` and the defensive mixture fitted to them in its
    coordinates (``settings``: the emulator's; fields left at None: the engine's)."""
    settings = settings.completed(ENGINE_DEFAULTS)
    whitening = AffineMap.from_sample(X)
    fit = GaussianMixture.fit_clusters(whitening.rows_to_u(X), settings.n_clusters, rng,
                                       settings.global_weight, settings.em_iters)
    widened = GaussianMixture(fit.weights, fit.means, settings.widen * fit.chols)
    d = X.shape[1]
    t = StudentT(np.zeros(d), settings.defensive_scale * np.eye(d), settings.defensive_df)
    return whitening, DefensiveMixture(widened, t, settings.defensive_weight)


@dataclass
class Correction:
    """The weighted sample of the correction rounds so far."""

    pool: RecycledPool

    def round(self, X: np.ndarray, n: int, evaluate, rng: np.random.Generator,
              settings) -> None:
        """One round of ``n`` true evaluations from the proposal fitted to draws ``X``."""
        whitening, proposal = correction_proposal(X, rng, settings)
        self.pool.new_stage(whitening, proposal)
        Y = whitening.rows_to_x(proposal.sample(n, rng))
        self.pool.add(Y, *evaluate(Y))

    def weighted(self):
        return self.pool.weighted()

    def resampled(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws resampled from the weighted sample (the next round's fit)."""
        X, _, _, log_w = self.pool.weighted()
        return X[resample_indices(log_w, n, rng)]

    def summary(self) -> tuple[float, float, float]:
        """Kish's ESS, Pareto's k-hat and the log evidence of the weighted sample."""
        _, _, _, log_w = self.pool.weighted()
        finite = np.isfinite(log_w)
        if not finite.any():
            return 0.0, np.inf, -np.inf
        return (kish_ess(log_w), pareto_khat(log_w[finite]),
                float(logsumexp(log_w) - np.log(len(log_w))))
