"""Kernel HMC's adaptation rules: step sizes, trials, reviews, fits and cross-validation.

:class:`KernelHMCRules` is the base of
:class:`~pymc_kameleon.adaptation.kernel_hmc.KernelHMCAdaptation`, which holds the
configuration these methods read (``surrogate``, ``bandwidth``, ``lam``, ``n_cv``, ...) and
calls them from its kernel functions while PyMC tunes.  A subclass of
``KernelHMCAdaptation`` overrides one of them to change one rule.  The rules and their
reasons are on ``docs/algorithms/kernel_hmc.md``.
"""

from __future__ import annotations

import copy

import numpy as np
from threadpoolctl import threadpool_limits

from ..math.ard import search_lengths
from ..math.hmc import hamiltonian_accept_prob
from ..math.kernels import distinct_rows, median_heuristic
from ..math.rff import RandomFourierFeatures
from ..math.score_matching import FiniteScoreEstimator, LiteScoreEstimator, cross_validate
from .kernel_hmc_state import KernelHMCAdaptState, Surrogate, Trial
from .step_size import AnchoredStepSize
from .warmup import NoiseCeiling

__all__ = ["KernelHMCRules"]

# bandwidth grids, in multiples of the median heuristic
_BANDWIDTH_FACTORS = {
    "lite": 2.0 ** np.arange(0.0, 2.25, 0.5),  # lite: narrow bumps confine the chain
    "finite": 2.0 ** np.arange(-1.0, 2.25, 0.5),
}
_LAMBDA_EXPONENTS = np.arange(-5.0, 2.0)  # 10^k times the natural scale of lambda
_MIN_DISTINCT = 20  # distinct history points needed before fitting (5 folds of >= 4)
# step-size band around the noise-free anchor of trajectories (anchor adapted on the
# surrogate's energy error)
_SURROGATE_BAND = (0.1, 2.0)
_MIN_CHECKED = 50  # tuning iterations a refit's candidate runs before it may take over
_REVIEW_RATIO = 0.5  # a surrogate in use below this fraction of the walk's ESJD is dropped
_CV_NEIGHBOURS = 2  # later cross-validations search +-2 grid bandwidths around the last best


class KernelHMCRules:
    """The adaptation rules of :class:`~pymc_kameleon.adaptation.kernel_hmc.KernelHMCAdaptation`
    (its base class; the configuration fields are the subclass's)."""

    def _update_step_sizes(self, state: KernelHMCAdaptState, noise: NoiseCeiling) -> None:
        """One Robbins-Monro update of the step size of the surrogate in use and of the one
        on trial, each on the acceptances of the iterations it proposed in the last draw."""
        proposers = [(state.current, state.tally)]
        if state.trial is not None:
            proposers.append((state.trial.surrogate, state.trial.tally))
        for k, tally in proposers:
            if self.adapt_step_size and tally.accepts:
                anchor = float(np.mean(tally.anchor_accepts)) if tally.anchor_accepts else None
                k.scaler.update(float(np.mean(tally.accepts)), anchor,
                                target=self.step_target(k, noise))
            tally.accepts, tally.anchor_accepts = [], []

    def _judge(self, state: KernelHMCAdaptState) -> None:
        """Settle a trial that has run its course, or review the surrogate in use.

        A refit's first ``_MIN_CHECKED`` iterations warm up its step size (which starts from
        a guess on the surrogate alone); the trial, for both, counts from there.  After
        ``_MIN_CHECKED`` more the refit takes over if :meth:`_beats_current`; otherwise it is
        dropped and the surrogate in use is reviewed on the same iterations
        (:meth:`review`).  Without a trial the surrogate in use is reviewed every
        ``_MIN_CHECKED`` of its own iterations.
        """
        trial = state.trial
        if trial is not None and not trial.warmed and trial.tally.n >= _MIN_CHECKED:
            trial.warmed = True
            trial.tally.restart()
            state.tally.restart()
        if trial is not None and trial.warmed and trial.tally.n >= _MIN_CHECKED:
            if self._beats_current(state, trial):
                self._take_over(state, trial)
                return
            state.trial = None
            if state.fallback is not None and state.tally.n > 0:
                self.review(state)
        elif trial is None and state.fallback is not None and state.tally.n >= _MIN_CHECKED:
            self.review(state)

    def _floored(self, k: Surrogate) -> bool:
        """Whether the step size of ``k`` (on trial or in use) sits on the floor of its band
        while adapted: it did not reach the (noise-lowered) target even at a tenth of the
        surrogate's own scale, so the surrogate's trajectories disagree with the target, and
        rare long accepted jumps would flatter its ESJD."""
        return self.adapt_step_size and k.scaler.at_floor

    def _beats_current(self, state: KernelHMCAdaptState, trial: Trial) -> bool:
        """Whether a refit checked on ``_MIN_CHECKED`` iterations moved the chain at least as
        far (expected squared jump distance per iteration, Rao-Blackwellised over the
        acceptance) as the surrogate in use over the same period, off the floor of its
        band.  A surrogate too poor to beat the random walk (e.g. in high dimension) never
        takes over."""
        return not self._floored(trial.surrogate) and (
            state.tally.n == 0 or trial.tally.esjd >= state.tally.esjd)

    def _take_over(self, state: KernelHMCAdaptState, trial: Trial) -> None:
        """The refit becomes the surrogate in use; a random walk it replaces is kept as the
        fallback, with its ESJD, for :meth:`review`."""
        if isinstance(trial.surrogate.estimator, FiniteScoreEstimator):
            self._flush_pending(state)
        if state.current.estimator is None:
            state.fallback = state.current
            state.fallback_esjd = trial.tally.esjd if state.tally.n == 0 else state.tally.esjd
        state.current = trial.surrogate
        state.tally.restart()  # the new surrogate in use is reviewed on its own iterations
        state.trial = None

    def review(self, state: KernelHMCAdaptState) -> None:
        """Keep the surrogate in use, or go back to the fallback random walk.

        Over the surrogate's iterations during a trial (without one, over its last
        ``_MIN_CHECKED`` iterations) its ESJD must stay at least ``_REVIEW_RATIO`` times the
        random walk's, as measured when the walk was replaced, and its step size off the
        floor of its band; otherwise the step goes back to the walk and its step size (the
        next refit starts a new trial).  A short trial can be flattered by a few long
        accepted jumps while the new step size is still settling; the review catches such
        a surrogate afterwards (``docs/algorithms/kernel_hmc.md``, "Review").  The tally
        restarts either way.
        """
        if self._floored(state.current) or state.tally.esjd < _REVIEW_RATIO * state.fallback_esjd:
            if self.surrogate == "finite":
                state.pending = []  # only surrogates learn online
            state.current, state.fallback, state.fallback_esjd = (state.fallback, None,
                                                                  float("nan"))
        state.tally.restart()  # the next review looks at fresh iterations

    def _flush_pending(self, state: KernelHMCAdaptState) -> None:
        """Learn the pending points into the finite surrogates (in use and on trial)."""
        if state.pending:
            points = np.array(state.pending)
            for k in (state.current, state.trial and state.trial.surrogate):
                if k is not None and isinstance(k.estimator, FiniteScoreEstimator):
                    k.estimator.update(points)
            state.pending = []

    def fit(self, state: KernelHMCAdaptState, tune_hyper: bool,
            rng: np.random.Generator) -> None:
        """Fit the surrogate on the history and put it on trial.

        With ``tune_hyper`` (and always at the first fit) the bandwidth and ``lambda`` are
        cross-validated first (:meth:`cross_validate`) and the step size is re-initialised
        on the new surrogate.  A degenerate history (too few distinct points) fits nothing.
        """
        X = state.reservoir.points
        s_med = median_heuristic(X)
        if distinct_rows(X).shape[0] < _MIN_DISTINCT or s_med <= 0:
            return  # degenerate history: keep the random walk until it spreads out
        s_med = max(s_med, self.min_bandwidth(state.dim))
        if self.surrogate == "finite" and state.base_features is None:
            state.base_features = RandomFourierFeatures.draw(
                state.dim, self.n_features, 1.0, rng, "phase"
            )
        s, lam, lengths = self.bandwidth, self.lam, state.current.lengths
        tune_hyper = tune_hyper or state.current.estimator is None
        # (with ard the bandwidth is never fixed: s is None and the lengths are searched too)
        if (s is None or lam is None) and tune_hyper:
            with threadpool_limits(limits=1):  # small dense algebra: threads only contend
                s, lam, lengths = self.cross_validate(state, s_med, rng)
        s = s if s is not None else state.current.bandwidth
        lam = lam if lam is not None else state.current.lam
        if self.surrogate == "lite":
            estimator = LiteScoreEstimator(s, lam)
        else:
            self._flush_pending(state)
            basis = state.base_features.with_lengths(lengths).with_bandwidth(s)
            estimator = FiniteScoreEstimator(basis, lam)
        with np.errstate(all="ignore"), threadpool_limits(limits=1):
            estimator.fit(X)
        scaler = copy.deepcopy(state.current.scaler)
        if (self.adapt_step_size and tune_hyper) or state.current.estimator is None:
            # restart from the surrogate's own scale
            eps = self._surrogate_step_size(estimator, X, state.current.scaler.value, rng)
            scaler = AnchoredStepSize(eps, self.target_accept, self.adapt_exponent,
                                      *_SURROGATE_BAND)
        # on trial against the surrogate in use, measured over the same iterations
        state.trial = Trial(Surrogate(scaler, estimator, float(s), float(lam), lengths))
        state.tally.restart()

    def _surrogate_step_size(self, estimator, X: np.ndarray, eps: float,
                             rng: np.random.Generator) -> float:
        """Step size at which trajectories on the *surrogate* Hamiltonian ``-f(q) + |p|^2/2``
        from history points are accepted with probability about ``target_accept``.

        Uses no target evaluation.  Doubles or halves ``eps`` (at most 10 times) and returns
        the largest tried value whose surrogate acceptance reaches the target.
        """
        starts = X[rng.choice(X.shape[0], size=min(20, X.shape[0]), replace=False)]
        momenta = rng.standard_normal(starts.shape)
        n_steps = int(round(np.mean(self.n_leapfrog)))

        def surrogate_accept(step: float) -> float:
            total = 0.0
            with np.errstate(all="ignore"):
                for q0, p0 in zip(starts, momenta, strict=True):
                    q1, p1 = estimator.leapfrog(q0, p0, step, n_steps)
                    total += hamiltonian_accept_prob(estimator.log_density, q0, p0, q1, p1)
            return total / starts.shape[0]

        if surrogate_accept(eps) >= self.target_accept:
            for _ in range(10):
                if surrogate_accept(2.0 * eps) < self.target_accept:
                    break
                eps *= 2.0
            return eps
        for _ in range(10):
            eps *= 0.5
            if surrogate_accept(eps) >= self.target_accept:
                break
        return eps

    def cross_validate(self, state: KernelHMCAdaptState, s_med: float,
                       rng: np.random.Generator) -> tuple[float, float, np.ndarray | None]:
        """Bandwidth, ``lambda`` and (with ARD) per-coordinate lengths by blocked
        cross-validation on the history around the median heuristic ``s_med``.

        The folds are distinct points in chain order: with random folds, the copies
        (rejections) and neighbours of a held-out point of an autocorrelated chain are in
        the training folds, which rewards over-fitting.  The first search covers the whole
        bandwidth grid, later ones the grid points near the last best
        (``state.cv_index``).
        """
        X = distinct_rows(state.reservoir.points_in_order)
        if X.shape[0] > self.n_cv:
            X = X[np.sort(rng.choice(X.shape[0], self.n_cv, replace=False))]
        s_ref = self.bandwidth or s_med
        factors = _BANDWIDTH_FACTORS[self.surrogate]
        window = np.arange(factors.size)  # first time the whole grid, then around the last best
        if state.cv_index is not None:
            i = state.cv_index
            window = window[max(i - _CV_NEIGHBOURS, 0) : i + _CV_NEIGHBOURS + 1]
        bandwidths = [self.bandwidth] if self.bandwidth is not None else s_med * factors[window]
        lam_scale = s_ref**2 if self.surrogate == "lite" else s_ref**-2
        lams = [self.lam] if self.lam is not None else lam_scale * 10.0**_LAMBDA_EXPONENTS
        if self.uses_ard(state.dim):  # bandwidth, lambda and lengths, from the last lengths
            # two sweeps from isotropic lengths, then one from the last lengths
            res = search_lengths(X, state.base_features, bandwidths, lams,
                                 lengths=state.cv_lengths,
                                 n_sweeps=2 if state.cv_lengths is None else 1,
                                 min_bandwidth=factors[0] * self.min_bandwidth(state.dim))
            state.cv_lengths = res.lengths
            state.cv_index = int(np.argmin(np.abs(np.log(s_med * factors / res.bandwidth))))
            return res.bandwidth, res.lam, res.lengths
        if self.surrogate == "lite":
            make = LiteScoreEstimator
        else:
            base = state.base_features

            def make(s, lam):
                return FiniteScoreEstimator(base.with_bandwidth(s), lam)

        with np.errstate(all="ignore"):
            result = cross_validate(X, bandwidths, lams, make, n_folds=5, shuffle=False)
        if self.bandwidth is None:
            best = int(np.argmin(np.min(result.losses, axis=1)))
            state.cv_index = int(window[best])
        return result.best_bandwidth, result.best_lam, None
