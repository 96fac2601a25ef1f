"""The start of a chain: its stored value, the noise check and the Laplace start.

:class:`ChainStart` runs the first draw of a chain for a step and returns what it found (a
:class:`StartResult`): it evaluates the start (twice, more where the values differ: a
likelihood estimator is noisy), checks a seemingly deterministic log density for noise and,
for a deterministic one, searches a gradient-free Laplace approximation from the start and
from dispersed starts (prior draws; :func:`pymc_kameleon.adaptation.laplace.laplace_start`).
It reads nothing of the step: the log density, the rounding to stored precision, the
generator and the settings are its arguments, and the step starts its warm-up kernel from
the result.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.exceptions import SamplingError
from pymc.initial_point import make_initial_point_fn
from scipy.special import logsumexp

from ..adaptation.laplace import laplace_start
from ..pseudo_marginal import compiling_for
from .evaluations import StartError

__all__ = ["ChainStart", "StartResult", "searching"]

_LAPLACE_MAX_DIM = 100
# prior draws for the estimate of the normalising constant that the Laplace start's modes are
# judged against: 200 put the latent time series' estimate within 12 nats of its value in
# 95% of cases, its neck modes lie 33-42 below (docs/tuning.md, "Laplace start")
_EVIDENCE_DRAWS = 200
# The seed of those draws.  Fixed, so that every chain judges by the same draws and its own
# generator is untouched; the value itself is arbitrary, but changing it changes which mode a
# seeded run keeps, hence its draws.
_EVIDENCE_DRAWS_SEED = 20260527
_NOISE_PROBES = 3  # evaluations at the start beyond the first two (see ChainStart.probe_noise)

LogDensity = Callable[[np.ndarray], float]


@dataclass(frozen=True, eq=False)  # array fields
class StartResult:
    """What the first draw of a chain found.

    Attributes
    ----------
    x : numpy.ndarray
        Where the chain starts: the given start, or the Laplace mode where it is kept.
    logp : float
        The stored log density at ``x``.
    noisy : bool
        Whether the log density is noisy (a likelihood estimator).
    n_evals : int
        Log-density evaluations spent.
    laplace_start : int
        The start of the kept Laplace mode: -1 none, 0 the chain's start, k the k-th
        dispersed start (a prior draw).
    cov : numpy.ndarray or None
        The Laplace covariance for the warm-up's first window (``None``: no usable mode).
    moved : bool
        Whether ``x`` is not the given start (the Laplace mode was kept).
    """

    x: np.ndarray
    logp: float
    noisy: bool
    n_evals: int
    laplace_start: int = -1
    cov: np.ndarray | None = None
    moved: bool = False


def searching(logp: Callable[[np.ndarray], Any], dtype: Any = float) -> LogDensity:
    """``logp`` as the Laplace start's optimiser evaluates it.

    Its line search and its prior-draw starts reach points far outside the posterior (log
    rates near -9e5 on the suite's pk ODE), where a solver may raise or give NaN.  There
    such a point is ``-inf`` for the optimiser: it is no proposal of the chain, so it
    neither stops the run nor counts as a failed evaluation.

    Parameters
    ----------
    logp : callable
        The log density of the block's raveled values (returns a 0-d array or a float).
    dtype : numpy dtype, optional
        The dtype ``logp`` takes its input in.

    Returns
    -------
    callable
        ``x -> float``, ``-inf`` where ``logp`` raises or is not finite.
    """

    def search_logp(x: np.ndarray) -> float:
        with np.errstate(all="ignore"):
            try:
                value = float(logp(np.asarray(x, dtype=dtype)))
            except Exception:  # the user's code (an estimator, a solver) raised
                return -math.inf
        return value if math.isfinite(value) else -math.inf

    return search_logp


class ChainStart:
    """The first draw of a chain of one step (its block of variables in ``model``).

    Parameters
    ----------
    model : pymc.Model
        The model.
    vars : list of value variables
        The step's block, in the step's order.
    name : str
        The step's name and variables, for messages.
    estimators : bool
        Whether the log density holds likelihood estimators (noisy by construction).
    """

    #: Its evaluations of the model are one-off checks of the start, not a chain's moves,
    #: so compiling an estimator for them warns of nothing (``compiling_for``).
    exact_for_pseudo_marginal = True

    def __init__(self, model, vars, *, name: str = "", estimators: bool = False):
        self.model = model
        self.vars = list(vars)
        self.name = name
        self.estimators = bool(estimators)
        self._default_start: np.ndarray | None = None  # the model's initial point, raveled

    def run(self, x: np.ndarray, *, logp: LogDensity, search_logp: LogDensity,
            round: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator,
            stored: float | None = None, tune: bool = True, laplace: bool | None = None,
            laplace_starts: int = 0, laplace_max_evals: int | None = None,
            point: dict | None = None,
            point_map_info: Any = None) -> StartResult:
        """Start a chain at ``x`` (the block's raveled values).

        Parameters
        ----------
        x : numpy.ndarray
            The chain's start.
        logp : callable
            The log density the chain evaluates (failures counted or raised as the step's
            ``on_error`` says).
        search_logp : callable
            The log density for the Laplace start's optimiser (:func:`searching`).
        round : callable
            Rounds a point as PyMC stores it (float32 variables).
        rng : numpy.random.Generator
            The chain's generator (the dispersed starts).
        stored : float, optional
            The value another step of this package stored for this point.
        tune : bool
            Whether the chain is tuning: the noise check and the Laplace start only then.
        laplace : bool or None
            The Laplace start: ``None`` where the log density is deterministic and ``d <=
            100``, ``True`` where it is deterministic, ``False`` never.
        laplace_max_evals : int, optional
            A bound on the Laplace start's evaluations (prior draws, searches, Hessians,
            checks); when it runs out the chain starts without it, with a warning.
        laplace_starts : int
            Dispersed starts of the mode search.
        point, point_map_info : optional
            The full point and the block's layout, for the message of a bad start.

        Returns
        -------
        StartResult

        Raises
        ------
        StartError
            Where the log density is not finite at ``x``.
        """
        evals = 0
        if stored is not None:
            value = stored
        else:
            value, evals = logp(x), 1
        again = logp(x)
        evals += 1
        if stored is not None and not _same(again, stored):
            # A stored value that a fresh evaluation does not reproduce: a likelihood estimate
            # (another block's, to be kept: pseudo-marginal) or the value of a log density
            # that has changed since (a term added to the model); a second evaluation tells
            # them apart.  (Changed data are caught by the key's fingerprint.)
            third = logp(x)
            evals += 1
            if _same(third, again):  # noise-free: the fresh value is the value
                value = again
        noisy = not _same(again, value)
        # a non-finite value at the start: redraw (an estimate of zero, possibly twice in a
        # row, which two equal values do not tell from a deterministic -inf)
        for _ in range(10 if not np.isfinite(value) else 0):
            if np.isfinite(value):
                break
            value = again
            again, evals = logp(x), evals + 1
            noisy = noisy or not _same(again, value)
        if not np.isfinite(value):
            with compiling_for(self):
                _raise_bad_start(self.model, self.name, x, point, point_map_info)
        if self.estimators:
            noisy = True  # a likelihood estimator is noisy by construction
        elif tune and not noisy:
            noisy, n = self.probe_noise(x, value, logp, round)
            evals += n
        result = StartResult(x, value, noisy, evals)
        if tune and _use_laplace(laplace, noisy, x.size):
            result = self._laplace(result, logp, search_logp, round, rng, laplace_starts,
                                   laplace_max_evals)
        return result

    @staticmethod
    def probe_noise(x: np.ndarray, logp_x: float, logp: LogDensity,
                    round: Callable[[np.ndarray], np.ndarray]) -> tuple[bool, int]:
        """Is a log density that gave ``logp_x`` twice at ``x`` noisy after all?  Return the
        answer and the evaluations spent.

        Two equal values do not show that a function is deterministic: an estimator may
        repeat a value, or fail now and then; the Laplace start would then take finite
        differences of noise.  So ``_NOISE_PROBES`` more at ``x`` and two at a point
        nearby, where a deterministic function gives one value each (a few evaluations
        against the Laplace start's hundreds).
        """
        nearby = round(x + 1e-3 * np.maximum(1.0, np.abs(x)))
        here = [logp(x) for _ in range(_NOISE_PROBES)]
        near = [logp(nearby) for _ in range(2)]
        noisy = not all(_same(v, logp_x) for v in here) or not _same(*near)
        return noisy, len(here) + len(near)

    def _laplace(self, start: StartResult, logp: LogDensity, search_logp: LogDensity,
                 round: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator,
                 laplace_starts: int, budget: int | None) -> StartResult:
        """``start`` after the Laplace start: its covariance, and its mode where kept."""
        x = start.x
        user_start = self.user_start(x)
        starts = [] if user_start else self.dispersed_starts(x, rng, laplace_starts)
        capped = _Budget(search_logp, budget)
        search_logp = search_logp if budget is None else capped
        log_evidence, evals = self.prior_evidence(search_logp)
        res = laplace_start(search_logp, x, max_evals=200 * (x.size + 1), starts=starts,
                            log_evidence=log_evidence)
        if capped.exhausted:  # an unfinished search describes nothing: start without it
            warnings.warn(
                f"{self.name}: the Laplace start ran out of its laplace_max_evals={budget} "
                "evaluations; the warm-up starts from the chain's start without it.",
                UserWarning, stacklevel=2)
            return StartResult(x, start.logp, start.noisy, start.n_evals + capped.spent)
        n_evals = start.n_evals + res.n_evals + evals
        if res.degenerate:
            warnings.warn(
                f"{self.name}: the Laplace start found no usable "
                f"mode ({res.degenerate}: a spike, an edge of the region where the log "
                "density is finite, or a funnel where it grows without bound, as in a "
                "centred hierarchical model); the warm-up starts from the initial point "
                "instead.  For a funnel, a non-centred parameterisation usually helps.",
                UserWarning, stacklevel=2)
        if res.cov is None:
            return StartResult(x, start.logp, start.noisy, n_evals)
        mode = round(res.mode)
        value = logp(mode)
        n_evals += 1
        # a chain the user started (initvals) begins there: the Laplace covariance is
        # used, the mode is not
        if not user_start and np.isfinite(value) and value >= start.logp:
            return StartResult(mode, value, start.noisy, n_evals, res.start, res.cov, True)
        return StartResult(x, start.logp, start.noisy, n_evals, cov=res.cov)

    def user_start(self, x: np.ndarray) -> bool:
        """Whether the chain starts where the user put it: ``initvals`` given to pm.sample
        (a start other than the model's initial point) or an ``initval`` in the model."""
        model = self.model
        if any(model.rvs_to_initial_values.get(model.values_to_rvs[v]) is not None
               for v in self.vars):
            return True
        if self._default_start is None:
            self._default_start = self.ravel(model.initial_point())
        return not np.allclose(x, self._default_start, rtol=1e-12, atol=1e-12)

    def ravel(self, point: dict) -> np.ndarray:
        """The block's values in ``point`` (a dict by value-variable name) as one float
        vector, in the step's order."""
        raveled = DictToArrayBijection.map({v.name: point[v.name] for v in self.vars})
        return raveled.data.astype(float)

    def dispersed_starts(self, x: np.ndarray, rng: np.random.Generator,
                         n: int) -> list[np.ndarray]:
        """``n`` starting points for the optimiser: prior draws of the block
        (unconstrained), or the start ``x`` jittered by U(-2, 2) where the prior cannot be
        drawn from (a flat prior)."""
        if n == 0:
            return []
        seeds = rng.integers(2**31, size=n)
        try:
            draw = _prior_point_fn(self.model)
            return [self.ravel(draw(int(seed))) for seed in seeds]
        except Exception:  # e.g. "Cannot sample from flat variable"
            return [x + rng.uniform(-2.0, 2.0, size=x.size) for _ in seeds]

    def prior_evidence(self, logp: LogDensity) -> tuple[float, int]:
        """Log of the normalising constant of ``logp``, estimated by importance sampling
        from the prior (``_EVIDENCE_DRAWS`` draws, fixed), and the evaluations spent;
        ``-inf`` and 0 where the block is not the whole model or the prior cannot be drawn
        from.  Every chain computes it again (same draws, same value), so that its
        ``n_evals`` do not depend on whether the chains share a step object.

        The estimate is the mean of ``p(x) / prior(x)`` over prior draws: unbiased for the
        normalising constant, so its log exceeds the truth by ``t`` with probability at
        most ``e^-t`` (Markov's inequality) and mostly errs low.
        """
        model = self.model
        if {v.name for v in self.vars} != {v.name for v in model.value_vars}:
            return -np.inf, 0
        try:
            draw, prior_logp = _prior_point_fn(model), _prior_logp_fn(model)
            seeds = np.random.default_rng(_EVIDENCE_DRAWS_SEED).integers(
                2**31, size=_EVIDENCE_DRAWS)
            points = [draw(int(seed)) for seed in seeds]
            ratio = np.array([logp(self.ravel(p)) - float(prior_logp(p)) for p in points])
        except Exception:  # e.g. "Cannot sample from flat variable"
            return -np.inf, 0
        ratio = np.where(np.isfinite(ratio), ratio, -np.inf)
        return float(logsumexp(ratio) - np.log(ratio.size)), ratio.size


def _use_laplace(laplace: bool | None, noisy: bool, dim: int) -> bool:
    if laplace is None:
        return not noisy and dim <= _LAPLACE_MAX_DIM
    return bool(laplace) and not noisy


class _Budget:
    """``logp`` for at most ``budget`` evaluations, then ``-inf`` without evaluating."""

    def __init__(self, logp: LogDensity, budget: int | None):
        self.logp, self.budget, self.spent, self.exhausted = logp, budget, 0, False

    def __call__(self, x: np.ndarray) -> float:
        if self.spent >= self.budget:
            self.exhausted = True
            return -np.inf
        self.spent += 1
        return self.logp(x)


def _raise_bad_start(model, step: str, x: np.ndarray, point, info) -> None:
    full = DictToArrayBijection.rmap(RaveledVars(x, info), start_point=dict(point))
    try:
        model.check_start_vals(full)  # PyMC's message: the terms not finite
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
