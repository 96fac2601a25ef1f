"""The PyMC step base shared by every sampler in this package.

:class:`BaseKernelStep` is the PyMC adapter: it compiles the block's log density (no
gradient), keeps the chain state (position, *stored* log density) and runs, per PyMC draw,
``n_steps`` iterations of propose -> Metropolis-Hastings -> adapt, first with the warm-up
kernel (:mod:`pymc_kameleon.adaptation.warmup_kernel`, which learns the whitening map) and
then with the sampler's own proposal in the whitened coordinates ``u``.  Its parts live in
their own modules: the chain's start (:mod:`~.start`), the evaluated log density and its
failures (:mod:`~.density`, :mod:`~.evaluations`), the stored value shared between steps
(:mod:`~.store`), records and stats (:mod:`~.records`), the progress bar (:mod:`~.progress`)
and the saved state (:mod:`~.state`).

A sampler subclasses it and implements, in whitened coordinates: ``_initial_adapt_state``
(everything it adapts, as one object), ``_propose``, ``_adapt_step`` (per tuning
iteration), ``_begin_tuning_draw`` (per tuning draw: batched adaptation) and
``_tuning_stats`` (the tuned values it reports).

Exactness (see ``ALGORITHMS.md``): one log-density evaluation per iteration, at the proposal
(none when the proposal is rejected outright, e.g. a diverged trajectory); the current value
is stored and never re-estimated; a non-finite value at a proposal is a rejection;
adaptation happens only while tuning, and only between iterations.
"""

from __future__ import annotations

import math
import warnings
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars
from pymc.pytensorf import compile as compile_pytensor
from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
from pymc.stats.convergence import SamplerWarning
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence
from pymc.util import (
    get_random_generator,
    get_state_from_generator,
    get_value_vars_from_user_vars,
)
from pymc.vartypes import discrete_types

from ..adaptation.warmup import AffineMap
from ..adaptation.warmup_kernel import WarmupKernel, WarmupState, random_walk_target
from ..adaptation.work import WorkPerDraw
from ..compat import caller_tuning_draws, logp_compile_kwargs
from ..pseudo_marginal import (
    estimator_states,
    find_estimators,
    reseed_estimators,
    set_estimator_states,
)
from ..validation import check_integral
from .density import LogDensity
from .evaluations import FailedEvaluations, check_on_error
from .progress import progress_update, progressbar_config
from .records import ChainRecord, ChainState, Proposal, StepInfo, fill_stats
from .start import ChainStart
from .state import KernelStepState, from_state, to_state
from .store import PointSync, SharedEstimate, data_fingerprint

__all__ = ["BaseKernelStep", "ChainState", "Proposal", "StepInfo", "random_walk_target"]

_sum = np.add.reduce  # one ufunc call: the cheapest finiteness test of a vector (see _mh)
# Fewest iterations per draw by default: PyMC's loop, the stored value's key and the stats
# cost a draw as much as a few iterations, and with five the suite's small models meet its
# criteria at the same ESS per evaluation and more ESS per second than with max(2, d)
# (docs/benchmarks/suite.md, "At least five iterations per draw").
_MIN_DEFAULT_STEPS = 5




class BaseKernelStep(ArrayStepShared):
    """Base class for gradient-free, adaptive, pseudo-marginal-exact PyMC step methods.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables sampled jointly by this step (default: every continuous value
        variable of the model).
    n_steps : int, optional
        Metropolis-Hastings iterations per PyMC draw, each with one log-density evaluation
        (default: ``max(5, d)``; kernel HMC: ``ceil(sqrt(d))`` in its kernel phase).  Late
        in tuning the default is raised where the chain mixes slowly, at most fourfold, and
        frozen after tuning (the stat ``n_steps``; docs/tuning.md, "Work per draw").  The
        attribute ``n_steps`` is the count of the next draw.
    warmup_draws : int, optional
        Tuning draws spent on the preconditioned random walk that learns the posterior's
        location and scale before the sampler's own adaptation starts (default: half of
        ``tune``, else 500).  With ``tune <= warmup_draws`` the step samples with the tuned
        preconditioned random walk.
    laplace : bool, optional
        Start the warm-up from a gradient-free Laplace approximation, searched from the
        chain's start and from ``laplace_starts`` prior draws and used only where it
        describes the target (docs/tuning.md, "Where the warm-up starts").  Default: when
        the log density is deterministic (never with likelihood estimators) and
        ``d <= 100``.  The stat ``laplace_start`` says which start was kept; a chain given
        its own start (``initvals``) begins there.
    laplace_starts : int, default 4
        Prior draws (a uniform jitter of the start where a prior is flat) from which the
        Laplace start also searches the mode, so that a chain does not begin in a local
        mode that holds no mass (ODE fits).  Each start costs at most ``200 (d + 1)``
        log-density evaluations, once per chain; ``0`` searches from the chain's start only.
    on_error : {"raise", "reject"}, default "raise"
        What an exception raised by the log density (e.g. by a likelihood estimator)
        does.  ``"raise"``: a :class:`~pymc_kameleon.steps.evaluations.LogDensityError`
        (a PyMC ``SamplingError``) naming the draw, the chain and the point, with the
        user's exception as its cause.  ``"reject"``: the proposal is rejected, counted in
        the sample stat ``n_errors`` and reported once per chain (a ``SamplerWarning``
        in PyMC's log); the current point is never re-evaluated.  A NaN log density is
        always a rejection, counted in ``n_nan`` and reported the same way; ``-inf`` is a
        silent rejection.  Both counted cases change the target where the failures
        depend on the point: see ``docs/robustness.md``.
    callback : callable, optional
        ``callback(info)``, called after every Metropolis-Hastings iteration (tuning
        included) with its :class:`StepInfo`: instrumentation without touching the step.
        It must not change the step.
    logp_wrapper : callable, optional
        ``logp_wrapper(logp)`` returns the log density the step evaluates, given the
        compiled one: ``logp(x)`` takes the block's raveled values (a 1-d array) and
        returns the log density (a 0-d array); the returned callable has the same
        signature.  For fault injection (raise, return NaN) and counting.  Everything
        else (the estimators' seeds and states, the data check) uses the compiled one.
    model : pymc.Model, optional
        Taken from the context if not given.
    rng : RandomGenerator, optional
        Seed or generator; ``pm.sample`` replaces it with one derived from ``random_seed``.
    initial_point : dict, optional
        Used only to compile the log density (shapes of the other variables).
    compile_kwargs : dict, optional
        Passed to PyTensor's ``compile``.
    blocked : bool, default True
        ``False`` gives one step per variable (a ``CompoundStep``), as for PyMC's steps.
    """

    name = "kernel_step"
    default_blocked = True
    #: Step keeps the stored log density of the current point (exact for estimators).
    exact_for_pseudo_marginal = True
    stats_dtypes_shapes: dict[str, tuple[Any, Any]] = {
        "accept": (np.float64, []),
        "accepted": (np.float64, []),  # float like pm.Metropolis (same name, same dtype)
        "tune": (bool, []),
        "model_logp": (np.float64, []),
        "n_evals": (np.int64, []),
        # the start of the kept Laplace mode: -1 none (the chain's own start), 0 the
        # chain's start, k the k-th dispersed start (a prior draw)
        "laplace_start": (np.int64, []),
        "n_steps": (np.int64, []),  # MH iterations of the draw
        "n_nan": (np.int64, []),  # evaluations that gave NaN (rejected; reported)
        "n_errors": (np.int64, []),  # evaluations that raised, with on_error="reject"
        "warning": (SamplerWarning, None),  # the chain's report of the two (PyMC's stat)
    }
    #: (stat name, progress bar header) pairs shown during sampling.
    _progress_columns: tuple[tuple[str, str], ...] = (("accept", "Accept"),)
    _state_class = KernelStepState

    def __new__(cls, *args, **kwargs):
        # PyMC's BlockedStep.__new__ takes every value variable when none are given (with
        # blocked=False one step per variable, discrete ones included, which __init__
        # refuses) and treats an explicit vars=None as one variable.  Ours default to the
        # model's continuous variables, as __init__ does.
        if (args[0] if args else kwargs.get("vars")) is None:
            continuous = pm.modelcontext(kwargs.get("model")).continuous_value_vars
            if continuous:
                args, kwargs = args[1:], {**kwargs, "vars": continuous}
        return super().__new__(cls, *args, **kwargs)

    def __init__(
        self,
        vars=None,
        *,
        n_steps: int | None = None,
        warmup_draws: int | None = None,
        laplace: bool | None = None,
        laplace_starts: int = 4,
        on_error: str = "raise",
        callback: Callable[[StepInfo], Any] | None = None,
        logp_wrapper: Callable[[Callable], Callable] | None = None,
        model=None,
        rng=None,
        initial_point: dict[str, np.ndarray] | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
    ):
        model = pm.modelcontext(model)
        self._warm = ChainRecord()
        if initial_point is None:
            initial_point = model.initial_point()
        if vars is None:
            vars = model.continuous_value_vars
        else:
            vars = get_value_vars_from_user_vars(vars, model)
        self._check_continuous(vars)
        if not vars:
            raise ValueError(f"{type(self).__name__}: no continuous variables to sample")
        if n_steps is not None:
            n_steps = check_integral("n_steps", n_steps)
        if warmup_draws is not None:
            warmup_draws = check_integral("warmup_draws", warmup_draws)

        shared = make_shared_replacements(initial_point, vars, model)
        [logp], raveled_input = join_nonshared_inputs(
            point=initial_point, outputs=[model.logp()], inputs=vars, shared_inputs=shared
        )
        self._logp_fn = compile_pytensor([raveled_input], logp,
                                          **logp_compile_kwargs(compile_kwargs))
        self._logp_fn.trust_input = True
        self.callback = callback
        self._last: tuple | None = None  # the last iteration's StepInfo fields, unbuilt
        self._evaluated: tuple = (None, math.nan)  # last (point, logp) of _evaluate
        self._model = model
        self.dim = int(sum(np.size(initial_point[v.name]) for v in vars))
        if self.dim == 0:
            raise ValueError(f"{type(self).__name__}: the variables {[v.name for v in vars]} "
                             "have no elements (size 0): nothing to sample")
        self._n_steps_given = None if n_steps is None else int(n_steps)
        self.warmup_draws = None if warmup_draws is None else int(warmup_draws)
        self.laplace = laplace
        self.laplace_starts = check_integral("laplace_starts", laplace_starts, minimum=0)
        check_on_error(on_error)
        self._chain_draws: int | None = None  # tuning + posterior draws, when PyMC tells us
        self._chain_tune: int | None = None  # number of tuning draws, when PyMC tells us
        self.tune = True
        super().__init__(vars, shared, blocked=True, rng=rng)
        # public: what "the chain's stored value" means (docs/api/steps.md, instrumentation)
        self.point_sync = PointSync(SharedEstimate.for_model(model), self._data_fingerprint,
                                   f"{type(self).__name__}{self.var_names}")
        # the evaluated density: the compiled one, or the user's wrapper around it
        self._density = LogDensity(
            self._logp_fn if logp_wrapper is None else logp_wrapper(self._logp_fn),
            on_error=on_error, name=f"{type(self).__name__}{list(self.var_names)}")
        self._start = ChainStart(model, vars, name=f"{type(self).__name__}{list(self.var_names)}",
                                 estimators=bool(find_estimators(self._logp_fn)))
        self._walk = WarmupKernel(self.dim, **self._warmup_config())
        self.reset_tuning()

    @property
    def last_info(self) -> StepInfo | None:
        """The :class:`StepInfo` of the step's last Metropolis-Hastings iteration (``None``
        before the first)."""
        return None if self._last is None else self._info(*self._last)

    def _info(self, n_evals: int, accept_prob: float, accepted: bool, phase: str,
              tune: bool, probe: bool) -> StepInfo:
        x, logp = self._evaluated if n_evals else (None, math.nan)
        return StepInfo(self._warm.x.copy(), None if x is None else x.copy(), float(logp),
                        float(accept_prob), bool(accepted), int(n_evals), phase, bool(tune),
                        bool(probe))

    def _data_fingerprint(self) -> bytes:
        return data_fingerprint(self._logp_fn, self.shared.values())

    @property
    def on_error(self) -> str:
        """What an exception raised by the log density does (``"raise"`` or ``"reject"``)."""
        return self._density.on_error

    @property
    def n_steps(self) -> int:
        """Metropolis-Hastings iterations of the next draw: the user's ``n_steps`` if given,
        else the step's default (constant after tuning, set at draw boundaries)."""
        if self._n_steps_given is not None:
            return self._n_steps_given
        return max(1, math.ceil(self._default_n_steps() * self._warm.work_factor))

    @property
    def preconditioner(self) -> AffineMap | None:
        """The whitening map ``x = mean + chol @ u`` of the current chain, learned by the
        warm-up (read-only: a copy).

        At a chain's first draw it is the Laplace start's Gaussian or the given ``cov``
        (:class:`RandomWalkStep`), then each warm-up window's estimate of the posterior's
        location and covariance; it is frozen when the sampler's own proposal takes over
        (:class:`RandomWalkStep`: when tuning ends).  ``None`` before the chain's first
        draw.  Its ``cov`` is the learned posterior covariance in the step's raveled
        coordinates, e.g. the initial shape of another run,
        ``RandomWalkStep(cov=step.preconditioner.cov)`` (``docs/tuning.md``, the warm-up).

        Returns
        -------
        AffineMap or None
            :class:`~pymc_kameleon.adaptation.warmup.AffineMap` with ``mean``, ``chol``
            and ``cov``.
        """
        walk = self._warm.walk
        if walk is None:
            return None
        return AffineMap(walk.precond.mean.copy(), walk.precond.chol.copy())

    @property
    def warmup(self) -> WarmupKernel:
        """The warm-up kernel (chain-independent: its windows, scale and rules), which
        acts on :attr:`warmup_state`."""
        return self._walk

    @property
    def warmup_state(self) -> WarmupState | None:
        """The current chain's warm-up state (map, scale, windows, noise ceiling: live,
        not a copy), ``None`` before the chain's first draw."""
        return self._warm.walk

    @property
    def compiled_logp(self) -> Callable[[np.ndarray], Any]:
        """The block's compiled log density ``logp(x)`` of the raveled values, before any
        ``logp_wrapper``."""
        return self._logp_fn

    # ------------------------------------------------------------------ subclass hooks
    def _default_n_steps(self) -> int:
        """Default iterations per draw; may depend on the tuning state (then it must change
        only at draw boundaries while tuning, and not after ``stop_tuning``)."""
        return max(_MIN_DEFAULT_STEPS, self.dim)

    @abstractmethod
    def _initial_adapt_state(self) -> Any:
        """A fresh object holding everything the sampler adapts (and caches)."""

    def _propose(self, state: ChainState) -> tuple[Proposal, dict[str, Any]]:
        """Propose from ``state`` (whitened coordinates); return it and per-iteration stats.

        Called only in the kernel phase: a sampler whose warm-up kernel is kept to the end
        (``to_the_end`` in :meth:`_warmup_config`) never has one and need not implement it.
        """
        raise NotImplementedError(f"{type(self).__name__} has no kernel phase")

    def _adapt_step(self, new_state: ChainState, accept_prob: float) -> None:
        """Record one tuning iteration of the sampler (history, accumulators)."""

    def _begin_tuning_draw(self, mean_accept: float) -> None:
        """Apply batched adaptation at the start of a tuning draw.

        ``mean_accept`` is the mean acceptance probability of the sampler's iterations in
        the previous draw.  Values reported by :meth:`_tuning_stats` may change only here,
        so a draw reports the values it used, as PyMC's own steps do.
        """

    def _tuning_stats(self) -> dict[str, Any]:
        """Tuned values reported with every draw (constant within a draw)."""
        return {}

    def _on_stop_tuning(self) -> None:
        """Called once when tuning ends, before the first draw after tuning.

        It may change the proposal only where the last tuning draw already reported the
        value used from then on (PyMC's convention for tuned values): KAMH and F-KAMH end
        gamma trials cut short with the candidate in use
        (:meth:`~pymc_kameleon.adaptation.TrialSelection.stop`); F-KAMH factorises its
        frozen feature covariance once by an exact truncated eigendecomposition, where
        tuning used a warm-started subspace iteration: the proposal changes slightly at
        the boundary (the same covariance, a more accurate low-rank factor), no reported
        value does.
        """

    def _warmup_config(self) -> dict[str, Any]:
        """Initial scale and shape, target, gain exponent and switch of the warm-up walk, and
        whether it is kept to the end of tuning instead of handing over to the sampler's
        kernel (the arguments of :class:`~pymc_kameleon.adaptation.warmup_kernel.WarmupKernel`)."""
        return {"scale": None, "cov": None, "target": random_walk_target(self.dim),
                "exponent": 0.6, "adapt": True}

    # ------------------------------------------------------------------ PyMC protocol
    @classmethod
    def _check_continuous(cls, vars) -> None:
        discrete = [v.name for v in vars if v.dtype in discrete_types]
        if discrete:
            raise ValueError(
                f"{cls.__name__} samples continuous variables only, but got discrete "
                f"variable(s) {discrete}. Give them to another step method, e.g. "
                f"pm.sample(step=[{cls.__name__}([...continuous vars...]), "
                f"pm.Metropolis([...discrete vars...])])."
            )

    @staticmethod
    def competence(var, has_grad=None):
        """COMPATIBLE for continuous variables, INCOMPATIBLE for discrete ones."""
        if var.dtype in discrete_types:
            return Competence.INCOMPATIBLE
        return Competence.COMPATIBLE

    def set_rng(self, rng) -> None:
        """Set the step's generator and reseed pseudo-marginal estimators from it."""
        self.rng = get_random_generator(rng, copy=False)
        reseed_estimators(self._logp_fn, self.rng)

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        """PyMC >= 6: prepare one chain (generator, estimators, number of tuning draws)."""
        self.set_rng(rng)
        self._chain_tune = int(tune)
        self._chain_draws = int(tune) + int(draws)

    def stop_tuning(self) -> None:
        """End tuning: everything adaptive is frozen from now on."""
        if self.tune:
            self._warn_if_sampler_never_started()
            self._on_stop_tuning()
            if self._warm.walk is not None and self._warm.phase == "warmup":
                self._walk.final(self._warm.walk)
        self.tune = False

    def _warn_if_sampler_never_started(self) -> None:
        """A ``UserWarning`` when tuning ends inside the default warm-up: the user asked for
        this sampler and would get the warm-up's random walk without being told (the warm-up
        is half of ``tune``; a step driven outside ``pm.sample``, which is not told ``tune``,
        assumes 500 draws).  An explicit ``warmup_draws`` is the user's choice and is not
        warned about."""
        w = self._warm
        if (self._walk.to_the_end or self.warmup_draws is not None or w.x is None
                or w.phase == "kernel"):
            return
        length = self._warmup_length()
        why = (f"half of tune={self._chain_tune}" if self._chain_tune
               else "the number of tuning draws was not given to the step")
        name = type(self).__name__
        plural = "" if w.draw == 1 else "s"
        warnings.warn(
            f"{name}{self.var_names}: tuning ended after {w.draw} draw{plural}, within the "
            f"warm-up ({length} draws: {why}), so {name}'s own adaptation never started and "
            "the chain samples with the warm-up's tuned random walk.  Tune for more than "
            f"{length} draws (pm.sample's default tune=1000 does) or give warmup_draws below "
            "the number of tuning draws.", UserWarning, stacklevel=2)

    def reset_tuning(self) -> None:
        """Start a chain afresh: initial adaptation, no stored state, ``tune = True``."""
        self._adapt = self._initial_adapt_state()
        self._warm = ChainRecord()
        self._density.failed = FailedEvaluations()
        self.tune = True

    # ------------------------------------------------------------------ state
    @property
    def sampling_state(self) -> KernelStepState:
        return KernelStepState(
            var_names=[v.name for v in self.vars],
            rng=get_state_from_generator(self.rng),
            tune=self.tune,
            chain=to_state({"warm": self._warm, "adapt": self._adapt,
                            "chain_tune": self._chain_tune,
                            "failed": self._density.failed}),
            estimators=to_state(estimator_states(self._logp_fn)),
        )

    @sampling_state.setter
    def sampling_state(self, state: KernelStepState) -> None:
        if not isinstance(state, KernelStepState):
            raise TypeError(f"expected a KernelStepState, got {type(state).__name__}")
        names = [v.name for v in self.vars]
        if list(state.var_names) != names:
            raise ValueError(f"the state belongs to variables {state.var_names}, not {names}")
        self.rng = from_state(state.rng)
        self.tune = bool(state.tune)
        chain = from_state(state.chain)
        self._warm, self._adapt = chain["warm"], chain["adapt"]
        self._chain_tune = chain["chain_tune"]
        self._density.failed = chain.get("failed", FailedEvaluations())
        set_estimator_states(self._logp_fn, from_state(state.estimators))

    # ------------------------------------------------------------------ sampling
    def step(self, point):
        self._incoming_point = point
        return super().step(point)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        w = self._warm
        point = self._incoming_point
        self._density.begin_draw(self.tune)
        evals = self._sync(q0, point)
        if self.tune:
            self._tuning_draw_start()
        u = w.precond.to_u(w.x)
        state = ChainState(u, w.logp)
        accept_sum, moves, info = 0.0, 0, {}
        kernel = w.phase == "kernel"
        phase = "kernel" if kernel else "warmup"  # which kernel proposes, for StepInfo
        n_steps = self.n_steps  # fixed within a draw
        callback = self.callback
        with np.errstate(all="ignore"):  # once per draw, not per iteration
            for _ in range(n_steps):  # propose -> MH -> adapt
                probe = not kernel and self.tune and self._walk.probe(w.iteration, w.noisy)
                adapts = not probe  # a probe's acceptance measures the noise, not a proposal
                if kernel:
                    proposal, info = self._propose(state)
                    state, accept_prob, accepted, evaluated = self._mh(state, proposal)
                else:
                    state, accept_prob, accepted, evaluated, adapts = self._walk_iteration(
                        state, probe)
                evals += evaluated
                accept_sum += accept_prob
                moves += accepted
                if self.tune:
                    w.iteration += 1
                    if adapts:
                        w.accepts.append(accept_prob)
                    if kernel:
                        self._adapt_step(state, accept_prob)
                    else:
                        self._walk.update(w.walk, w.x, accept_prob, accepted, probe)
                if callback is not None:
                    callback(self._info(evaluated, accept_prob, accepted, phase, self.tune,
                                        probe))
        # the last iteration's info, built only when read (last_info)
        self._last = (evaluated, accept_prob, accepted, phase, self.tune, probe)
        stats = {
            "accept": accept_sum / n_steps,
            "accepted": moves / n_steps,
            "tune": self.tune,
            "model_logp": w.logp,
            "n_evals": evals,
            "laplace_start": w.start,
            "n_steps": n_steps,
            **self._density.failed.draw_stats(),
            "warning": self._density.failed.warning(self._density.name, self._density.info,
                                                    self._chain_draws),
            **self._fill_stats(info),
            **self._tuning_stats(),
        }
        new = RaveledVars(w.x.astype(q0.data.dtype, copy=True), q0.point_map_info)
        self.point_sync.remember(w, new, point)
        return new, [stats]

    def _walk_proposal(self, state: ChainState, probe: bool = False,
                       factor: float = 1.0) -> Proposal:
        """The warm-up kernel's proposal from ``state``, its scale times ``factor``
        (symmetric: log correction 0)."""
        return Proposal(self._walk.propose(self._warm.walk, state.position, self.rng, probe,
                                           factor), 0.0)

    def _walk_iteration(self, state: ChainState,
                        probe: bool) -> tuple[ChainState, float, bool, int, bool]:
        """One iteration of the warm-up walk: the new state, the acceptance probability
        (reported, and adapted on while tuning), whether the chain moved, the evaluations
        spent, and whether the scale adapts on this iteration (not on a probe)."""
        state, accept_prob, accepted, evaluated = self._mh(
            state, self._walk_proposal(state, probe))
        return state, accept_prob, accepted, evaluated, not probe

    def _mh(self, state: ChainState, proposal: Proposal) -> tuple[ChainState, float, bool, int]:
        """One Metropolis-Hastings decision; updates the stored model-space position."""
        # e.g. a diverged trajectory: no evaluation (the sum is non-finite when an entry is;
        # also when finite entries near 1e308 overflow it, a region no target holds)
        if proposal.log_correction == -math.inf or not math.isfinite(
                _sum(proposal.position)):
            return state, 0.0, False, 0
        new, x_new = self._evaluate(proposal.position)
        state, accept_prob, accepted = self._decide(
            state, new, x_new, new.logp - state.logp + proposal.log_correction)
        return state, accept_prob, accepted, 1

    def _evaluate(self, position: np.ndarray) -> tuple[ChainState, np.ndarray]:
        """The log density at the whitened ``position`` (one evaluation): the state there
        and its model-space point (float32 variables rounded as PyMC stores them)."""
        w = self._warm
        density = self._density
        x_new = density.round(w.precond.to_x(position))
        u_new = w.precond.to_u(x_new) if density.float32 else position
        logp = density.unchecked(x_new)  # astep ignores FP warnings
        self._evaluated = (x_new, logp)
        return ChainState(u_new, logp), x_new

    def _decide(self, state: ChainState, new: ChainState, x_new: np.ndarray,
                log_accept: float) -> tuple[ChainState, float, bool]:
        """Accept ``new`` with probability ``min(1, exp(log_accept))`` (never a point
        outside the support); the chain's state, the probability, whether it moved."""
        if not math.isfinite(new.logp) or math.isnan(log_accept):
            log_accept = -math.inf
        accept_prob = float(np.exp(min(log_accept, 0.0)))
        u = self.rng.random()  # the same stream as uniform(), a quarter of its cost
        if (math.log(u) if u > 0.0 else -math.inf) < log_accept:
            w = self._warm
            w.x, w.logp = x_new, new.logp
            return new, accept_prob, True
        return state, accept_prob, False

    def _fill_stats(self, info: dict[str, Any]) -> dict[str, Any]:
        """Per-iteration sampler stats, with neutral values where none were produced."""
        return fill_stats(self.stats_dtypes_shapes, BaseKernelStep.stats_dtypes_shapes, info)

    # ------------------------------------------------------------------ chain state
    def _sync(self, q0: RaveledVars, point) -> int:
        """Make the stored state match the incoming point; return evaluations spent."""
        w = self._warm
        self._density.layout(q0)
        key = self.point_sync.key(w, point)
        if w.x is not None and key == w.key:
            return 0
        x = np.array(q0.data, dtype=float)
        stored = self.point_sync.store.get(key)
        if w.x is None:
            return self._start_chain(x, key, point, stored, q0.point_map_info)
        return self.point_sync.refresh(w, x, key, stored, self._density)

    def _start_chain(self, x: np.ndarray, key: bytes, point, stored: float | None,
                     info) -> int:
        """First draw of a chain: the start (:class:`~.start.ChainStart`), then the
        warm-up kernel from it; return the evaluations spent."""
        w = self._warm
        walk = self._walk
        laplace = self.laplace
        if not walk.adapt or (laplace is None and walk.cov is not None):
            laplace = False  # a given initial shape is replaced only on request
        res = self._start.run(
            x, logp=self._density, search_logp=self._density.searching(),
            round=self._density.round, rng=self.rng, stored=stored, tune=self.tune, laplace=laplace,
            laplace_starts=self.laplace_starts, point=point, point_map_info=info)
        w.x, w.logp, w.noisy, w.start = res.x, res.logp, res.noisy, res.laplace_start
        w.key = b"" if res.moved else key  # a moved start is stored at the draw's end
        tune = caller_tuning_draws() if self.tune else None  # PyMC 5: from its chain loop
        if tune is not None:
            self._chain_tune = tune
        if self.tune and self._n_steps_given is None:
            w.work = WorkPerDraw.schedule(self._chain_tune, self._warmup_length())
        w.walk = walk.init()
        if res.cov is not None:
            walk.start_at(w.walk, w.x, res.cov)
        return res.n_evals

    # ------------------------------------------------------------------ adaptation
    def _tuning_draw_start(self) -> None:
        """Batched adaptation at a draw boundary (the first draw of a chain adapts nothing)."""
        w = self._warm
        if w.work is not None and w.draw > 0:
            self._measure_work()
        if w.draw > 0:
            if w.phase == "kernel":
                mean = float(np.mean(w.accepts)) if w.accepts else float("nan")
                self._begin_tuning_draw(mean)
            else:
                info = self._walk.update_draw(w.walk, w.x, w.draw, self._warmup_length(),
                                              w.accepts, tune=self._chain_tune, logp=w.logp)
                if info.new_window and w.work is not None:
                    w.work.positions.clear()  # positions whitened by another map do not mix
                if info.done:
                    self._walk.final(w.walk)
                    w.phase = "kernel"
                    self._adapt = self._initial_adapt_state()
        w.accepts = []
        w.draw += 1

    def _measure_work(self) -> None:
        """Record the whitened position of the draw just done; at the window's end, set
        the factor on the iterations per draw (docs/tuning.md, "Work per draw")."""
        w = self._warm
        if w.draw >= w.work.start:  # whiten only inside the window
            w.work.update(w.draw, w.precond.to_u(w.x))
        if w.draw + 1 >= w.work.decide:
            w.work_factor, w.work = w.work.final(), None

    def _warmup_length(self) -> int:
        if self.warmup_draws is not None:
            return self.warmup_draws
        if self._chain_tune:
            return max(1, self._chain_tune // 2)
        return 500

    def _accept_target(self, target: float) -> float:
        """A sampler's acceptance target, lowered when estimator noise caps acceptance."""
        return self._warm.walk.noise.target(target)

    # ------------------------------------------------------------------ progress bar
    @classmethod
    def _progressbar_config(cls, n_chains=1):
        return progressbar_config(cls._progress_columns, n_chains)

    @classmethod
    def _make_progressbar_update_functions(cls):
        return (progress_update(cls._progress_columns),)
