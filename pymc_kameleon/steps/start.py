"""The start of a chain: its stored value, the noise check and the Laplace start.

:class:`ChainStart` is a part of :class:`~pymc_kameleon.steps.base.BaseKernelStep` (it uses
the base's log density, generator and chain record): at a chain's first draw it evaluates the
start (twice, more where the values differ: a likelihood estimator is noisy), checks a
seemingly deterministic log density for noise, initialises the warm-up kernel
(:mod:`pymc_kameleon.adaptation.warmup_kernel`) and, for a deterministic log density, starts
it from a gradient-free Laplace approximation searched from the start and from dispersed
starts (prior draws; :func:`pymc_kameleon.adaptation.laplace.laplace_start`).
"""

from __future__ import annotations

import math
import warnings
import weakref

import numpy as np
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.exceptions import SamplingError
from pymc.initial_point import make_initial_point_fn
from scipy.special import logsumexp

from ..adaptation.laplace import laplace_start
from ..adaptation.work import WorkPerDraw
from ..compat import caller_tuning_draws
from .evaluations import StartError

__all__ = ["ChainStart"]

_LAPLACE_MAX_DIM = 100
# prior draws for the estimate of the normalising constant that the Laplace start's modes are
# judged against: 200 put the latent time series' estimate within 12 nats of its value in
# 95% of cases, its neck modes lie 33-42 below (docs/tuning.md, "Laplace start")
_EVIDENCE_DRAWS = 200
_EVIDENCE_SEED = 20260527  # fixed: every chain judges by the same draws, its generator untouched
_NOISE_PROBES = 3  # evaluations at the start beyond the first two (see _probe_noise)


class ChainStart:
    """The first draw of a chain (a part of the step base, not a step of its own)."""

    #: True while the Laplace start's optimiser evaluates the log density: its line search
    #: and its prior-draw starts reach points far outside the posterior (log rates near
    #: -9e5 on the suite's pk ODE), where a solver may raise or give NaN.  There such a
    #: point is -inf for the optimiser; it is no proposal of the chain, so it neither
    #: stops the run (``on_error="raise"``) nor counts as a failed evaluation.
    _searching: bool = False

    def _probe_noise(self, x: np.ndarray, logp: float) -> tuple[bool, int]:
        """Is a log density that gave ``logp`` twice at ``x`` noisy after all?  Return the
        answer and the evaluations spent.

        Two equal values do not show that a function is deterministic: an estimator may
        repeat a value, or fail now and then; the Laplace start would then take finite
        differences of noise.  So ``_NOISE_PROBES`` more at ``x`` and two at a point
        nearby, where a deterministic function gives one value each (a few evaluations
        against the Laplace start's hundreds).
        """
        nearby = self._round(x + 1e-3 * np.maximum(1.0, np.abs(x)))
        here = [self._logp(x) for _ in range(_NOISE_PROBES)]
        near = [self._logp(nearby) for _ in range(2)]
        noisy = not all(_same(v, logp) for v in here) or not _same(*near)
        return noisy, len(here) + len(near)

    def _start_chain(self, x: np.ndarray, key: bytes, point, stored: float | None) -> int:
        """First draw of a chain: value at the start, noise check, Laplace start, map."""
        w = self._warm
        evals = 0
        if stored is not None:
            logp = stored
        else:
            logp, evals = self._logp(x), 1
        again = self._logp(x)
        evals += 1
        if stored is not None and not _same(again, stored):
            # A stored value that a fresh evaluation does not reproduce: a likelihood estimate
            # (another block's, to be kept: pseudo-marginal) or the value of a log density
            # that has changed since (a term added to the model); a second evaluation tells
            # them apart.  (Changed data are caught by the key's fingerprint.)
            third = self._logp(x)
            evals += 1
            if _same(third, again):  # noise-free: the fresh value is the value
                logp = again
        w.noisy = not _same(again, logp)
        # a non-finite value at the start: redraw (an estimate of zero, possibly twice in a
        # row, which two equal values do not tell from a deterministic -inf)
        for _ in range(10 if not np.isfinite(logp) else 0):
            if np.isfinite(logp):
                break
            logp = again
            again, evals = self._logp(x), evals + 1
            w.noisy = w.noisy or not _same(again, logp)
        if not np.isfinite(logp):
            self._raise_bad_start(x, point)
        if self._has_estimators:
            w.noisy = True  # a likelihood estimator is noisy by construction
        elif self.tune and not w.noisy:
            noisy, n = self._probe_noise(x, logp)
            w.noisy, evals = noisy, evals + n
        w.x, w.logp, w.key = x, logp, key
        tune = caller_tuning_draws() if self.tune else None  # PyMC 5: from its chain loop
        if tune is not None:
            self._chain_tune = tune
        if self.tune and self._n_steps_given is None:
            w.work = WorkPerDraw.schedule(self._chain_tune, self._warmup_length())
        w.walk = self._walk.init()
        if self.tune and self._walk.adapt and self._use_laplace(w.noisy):
            evals += self._laplace(x)
        return evals

    def _use_laplace(self, noisy: bool) -> bool:
        if self.laplace is None:
            return not noisy and self.dim <= _LAPLACE_MAX_DIM
        return bool(self.laplace) and not noisy

    def _laplace(self, x: np.ndarray) -> int:
        w = self._warm
        user_start = self._user_start(x)
        starts = [] if user_start else self._dispersed_starts(x)
        self._searching = True
        try:
            log_evidence, evals = self._prior_evidence()
            res = laplace_start(self._logp, x, max_evals=200 * (self.dim + 1), starts=starts,
                                log_evidence=log_evidence)
        finally:
            self._searching = False
        res.n_evals += evals
        if res.degenerate:
            warnings.warn(
                f"{type(self).__name__}{self.var_names}: the Laplace start found no usable "
                f"mode ({res.degenerate}: a spike, an edge of the region where the log "
                "density is finite, or a funnel where it grows without bound, as in a "
                "centred hierarchical model); the warm-up starts from the initial point "
                "instead.  For a funnel, a non-centred parameterisation usually helps.",
                UserWarning, stacklevel=2)
        if res.cov is None:
            return res.n_evals
        mode = self._round(res.mode)
        logp = self._logp(mode)
        # a chain the user started (initvals) begins there: the Laplace covariance is
        # used, the mode is not
        if not user_start and np.isfinite(logp) and logp >= w.logp:
            w.x, w.logp = mode, logp
            w.key = b""  # the point changed; the store is updated at the end of the draw
            w.start = res.start
        self._walk.start_at(w.walk, w.x, res.cov)
        return res.n_evals + 1

    def _user_start(self, x: np.ndarray) -> bool:
        """Whether the chain starts where the user put it: ``initvals`` given to pm.sample
        (a start other than the model's initial point) or an ``initval`` in the model."""
        model = self._model
        if any(model.rvs_to_initial_values.get(model.values_to_rvs[v]) is not None
               for v in self.vars):
            return True
        if self._default_start is None:
            ip = model.initial_point()
            self._default_start = self._ravel(ip)
        return not np.allclose(x, self._default_start, rtol=1e-12, atol=1e-12)

    def _ravel(self, point: dict) -> np.ndarray:
        """The block's values in ``point`` (a dict by value-variable name) as one float
        vector, in the step's order."""
        raveled = DictToArrayBijection.map({v.name: point[v.name] for v in self.vars})
        return raveled.data.astype(float)

    def _dispersed_starts(self, x: np.ndarray) -> list[np.ndarray]:
        """``laplace_starts`` starting points for the optimiser: prior draws of the block
        (unconstrained), or the start jittered by U(-2, 2) where the prior cannot be drawn
        from (a flat prior)."""
        n = self.laplace_starts
        if n == 0:
            return []
        seeds = self.rng.integers(2**31, size=n)
        try:
            draw = _prior_point_fn(self._model)
            return [self._ravel(draw(int(seed))) for seed in seeds]
        except Exception:  # e.g. "Cannot sample from flat variable"
            return [x + self.rng.uniform(-2.0, 2.0, size=x.size) for _ in seeds]

    def _prior_evidence(self) -> tuple[float, int]:
        """Log of the normalising constant of the log density, estimated by importance
        sampling from the prior (``_EVIDENCE_DRAWS`` draws, fixed), and the evaluations
        spent; ``-inf`` and 0 where the block is not the whole model or the prior cannot be
        drawn from.  Every chain computes it again (same draws, same value), so that its
        ``n_evals`` do not depend on whether the chains share a step object.

        The estimate is the mean of ``p(x) / prior(x)`` over prior draws: unbiased for the
        normalising constant, so its log exceeds the truth by ``t`` with probability at
        most ``e^-t`` (Markov's inequality) and mostly errs low.
        """
        model = self._model
        if {v.name for v in self.vars} != {v.name for v in model.value_vars}:
            return -np.inf, 0
        try:
            draw, prior_logp = _prior_point_fn(model), _prior_logp_fn(model)
            seeds = np.random.default_rng(_EVIDENCE_SEED).integers(2**31, size=_EVIDENCE_DRAWS)
            points = [draw(int(seed)) for seed in seeds]
            ratio = np.array([self._logp(self._ravel(p)) - float(prior_logp(p))
                              for p in points])
        except Exception:  # e.g. "Cannot sample from flat variable"
            return -np.inf, 0
        ratio = np.where(np.isfinite(ratio), ratio, -np.inf)
        return float(logsumexp(ratio) - np.log(ratio.size)), ratio.size

    def _raise_bad_start(self, x: np.ndarray, point) -> None:
        q = RaveledVars(x, self._q0_info)
        full = DictToArrayBijection.rmap(q, start_point=dict(point))
        step = f"{type(self).__name__}{list(self.var_names)}"
        try:
            self._model.check_start_vals(full)  # PyMC's message: the terms not finite
        except SamplingError as exc:
            raise StartError.at_start(step, str(exc)) from None
        raise StartError.at_start(step,
            "Initial evaluation of model at starting point failed!\n"
            f"Starting values:\n{full}\n\n"
            "The log density of the block is not finite there although no single term "
            "is (a likelihood estimator that keeps returning zero, or a potential). "
            "Choose another start (initvals=...).")


_PRIOR_POINT_FNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _prior_point_fn(model):
    """A seeded function drawing every free variable from its prior (unconstrained values),
    compiled once per model."""
    fn = _PRIOR_POINT_FNS.get(model)
    if fn is None:
        fn = make_initial_point_fn(model=model, jitter_rvs=set(), default_strategy="prior",
                                   return_transformed=True)
        _PRIOR_POINT_FNS[model] = fn
    return fn


_PRIOR_LOGP_FNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _prior_logp_fn(model):
    """The prior log density of every free variable at an (unconstrained) point, with the
    transforms' Jacobians, compiled once per model (``FAST_COMPILE``: 200 evaluations of a
    small graph, where the default backends' compile time of 0.3-0.8 s would dominate)."""
    fn = _PRIOR_LOGP_FNS.get(model)
    if fn is None:
        fn = model.compile_fn(model.varlogp, point_fn=True, mode="FAST_COMPILE")
        _PRIOR_LOGP_FNS[model] = fn
    return fn


def _same(a: float, b: float) -> bool:
    """Equal log densities, NaN equal to NaN (two evaluations of a noise-free density)."""
    return a == b or (math.isnan(a) and math.isnan(b))
