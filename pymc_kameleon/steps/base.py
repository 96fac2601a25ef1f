"""The PyMC step base shared by every sampler in this package.

:class:`BaseKernelStep` is the PyMC adapter.  It compiles the block's log density (no
gradient), keeps the chain's record (point, *stored* log density, one state per kernel) and
runs, per PyMC draw, ``n_steps`` iterations of the kernel in use -- propose, decide
(:class:`~.metropolis.StepMetropolis`), adapt while tuning -- over the protocol of
:mod:`pymc_kameleon.adaptation.kernel`: the warm-up kernel, then the sampler's own (or the
warm-up kept to the end).  A sampler passes its kernel as ``adaptation`` and overrides
nothing of the base.  The chain's start, draw-boundary tuning, stored values, records and
saved state live in the sibling modules.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pymc.vartypes import discrete_types

from ..adaptation.independence import EmulatorMoves
from ..adaptation.kernel import ChainState, Iteration, Kernel, Proposal
from ..adaptation.screen import SurrogateScreen
from ..adaptation.warmup import AffineMap
from ..adaptation.warmup_kernel import WarmupKernel, WarmupState, random_walk_target
from ..adaptation.work import MAX_FACTOR
from ..emulator import EmulatorSettings
from ..pseudo_marginal import compiling_for, find_estimators, reseed_estimators
from .chain import PHASES, Chain
from .density import LogDensity, compile_block_logp
from .evaluations import FailedEvaluations, check_on_error
from .messages import discrete_message, sampler_never_started, tuning_draws_warning
from .metropolis import StepMetropolis
from .progress import ProgressColumns
from .records import BASE_STATS, StepInfo
from .start import ChainStart
from .state import KernelStepState, restore_state, save_state
from .store import PointSync, SharedEstimate, data_fingerprint

__all__ = ["BaseKernelStep", "ChainState", "Proposal", "StepInfo", "random_walk_target"]


class BaseKernelStep(ProgressColumns, ArrayStepShared):
    """Base class for gradient-free, adaptive, pseudo-marginal-exact PyMC step methods.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables sampled jointly (default: every continuous value variable).
    adaptation : Kernel, optional
        The sampler's kernel (:mod:`pymc_kameleon.adaptation.kernel`), which takes over
        from the warm-up; None: the warm-up kernel is kept to the end (the random walk).
    warmup_options : dict, optional
        Arguments of the warm-up's :class:`~pymc_kameleon.adaptation.warmup_kernel.WarmupKernel`.
    n_steps : int, optional
        Metropolis-Hastings iterations per PyMC draw, each with at most one log-density
        evaluation (default: the kernel's, e.g. ``max(5, d)``, raised late in tuning where
        the chain mixes slowly, at most ``max_work_factor``-fold; docs/tuning.md, "Work
        per draw").
    max_work_factor : float, default 4
        Bound on that rise (at least 1).  A chain whose autocorrelation asks for more is
        reported through PyMC's ``warning`` stat when the work is set.
    warmup_draws : int, optional
        Tuning draws of the warm-up, the preconditioned random walk that learns the
        posterior's location and scale (default: half of ``tune``, else 500).
    tune_draws : int, optional
        The number of tuning draws of ``pm.sample`` (its ``tune``), which sets the
        warm-up's length and the later adaptation's schedule.  PyMC 6 tells the step itself
        (its number wins); PyMC 5 does not, so give it there when ``tune`` is not
        ``pm.sample``'s default 1000: without it the step assumes 1000, and warns at the end
        of tuning when the chain tuned for another number of draws.
    laplace : bool, optional
        Start the warm-up from a gradient-free Laplace approximation where it describes the
        target (docs/tuning.md, "Where the warm-up starts").  Default: for a deterministic
        log density with ``d <= 100``.  The stat ``laplace_start`` says which start was kept.
    laplace_starts : int, default 4
        Prior draws from which the Laplace start also searches the mode, once per chain;
        ``0``: the chain's start only.
    laplace_max_evals : int, optional
        A budget of the Laplace start's evaluations, once per chain (default none); when it
        runs out the chain starts without it, with a warning (docs/tuning.md).
    screen : bool or SurrogateScreen, default False
        Screen each proposal with a surrogate of the log density learned while tuning
        (delayed acceptance, exact; :mod:`pymc_kameleon.adaptation.screen`): a proposal the
        surrogate rejects costs no evaluation.  Stats ``screen_active``, ``evals_saved``.
    emulator : bool, EmulatorSettings or EmulatorMoves, default False
        Tune on an emulator of the log density and sample with independence proposals
        fitted to it (docs/emulator_steps.md): the first tuning draw builds the emulator
        (:class:`~pymc_kameleon.emulator.EmulatorRun`'s mode search and design rounds,
        true evaluations, counted), the rest of tuning moves on the emulator (free), and
        after tuning each iteration is, with probability ``weight``, an independence
        proposal from a defensive mixture fitted to the emulator's posterior, otherwise the
        kernel's own move (exact: a mixture of two Metropolis-Hastings kernels); with
        ``EmulatorMoves(delayed=True)`` both are screened by the emulator first (delayed
        acceptance, exact).  Where it does not pay the chain samples without it, with one
        warning.  Needs a block that is the whole model with a prior that can be drawn
        from; not with ``screen`` (the emulator screens its own moves with
        ``delayed=True``).  Stats ``emulator_active``, ``emulator_phase``,
        ``accept_independent``, ``accept_local``, ``emulator_stage1``,
        ``independence_khat``, ``trial_accept``, ``accept_estimate``.
    on_error : {"raise", "reject"}, default "raise"
        What an exception raised by the log density does: a
        :class:`~pymc_kameleon.steps.evaluations.LogDensityError` (a PyMC ``SamplingError``)
        naming the draw and the point, or a rejection counted in the stat ``n_errors``
        and reported once per chain.  NaN is always a counted rejection (``n_nan``),
        ``-inf`` a silent one (docs/robustness.md).
    callback : callable, optional
        ``callback(info)`` after every iteration (tuning included) with its
        :class:`StepInfo`; it must not change the step.
    logp_wrapper : callable, optional
        ``logp_wrapper(logp)`` returns the log density the step evaluates, given the
        compiled one (``logp(x)``: raveled values in, a 0-d array out): fault injection,
        counting.  Everything else (estimators' states, the data check) uses the compiled one.
    model, rng, initial_point, compile_kwargs
        As for every PyMC step method (``rng``: replaced by ``pm.sample``'s).
    blocked : bool, default True
        ``False`` gives one step per variable (a ``CompoundStep``), as for PyMC's steps.
    """

    name = "kernel_step"
    default_blocked = True
    #: Step keeps the stored log density of the current point (exact for estimators).
    exact_for_pseudo_marginal = True
    stats_dtypes_shapes: dict[str, tuple[Any, Any]] = BASE_STATS
    state_class = KernelStepState  # PyMC reads it through compat.StepHooks

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
        adaptation: Kernel | None = None,
        warmup_options: dict[str, Any] | None = None,
        n_steps: int | None = None,
        max_work_factor: float = MAX_FACTOR,
        warmup_draws: int | None = None,
        tune_draws: int | None = None,
        laplace: bool | None = None,
        laplace_starts: int = 4,
        laplace_max_evals: int | None = None,
        screen: bool | SurrogateScreen = False,
        emulator: bool | EmulatorSettings | EmulatorMoves = False,
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
        if initial_point is None:
            initial_point = model.initial_point()
        vars = (model.continuous_value_vars if vars is None
                else get_value_vars_from_user_vars(vars, model))
        if any(v.dtype in discrete_types for v in vars):
            raise ValueError(discrete_message(type(self).__name__, vars))
        if not vars:
            raise ValueError(f"{type(self).__name__}: no continuous variables to sample")
        with compiling_for(self):  # it stores the current estimate: no estimator warning
            self._logp_fn, shared, self.dim = compile_block_logp(model, vars, initial_point,
                                                                  compile_kwargs)
        if self.dim == 0:
            raise ValueError(f"{type(self).__name__}: the variables {[v.name for v in vars]} "
                             "have no elements (size 0): nothing to sample")
        check_on_error(on_error)
        self.callback = callback
        self._last: tuple | None = None  # the last iteration's StepInfo fields, unbuilt
        self.tune = True
        super().__init__(vars, shared, blocked=True, rng=rng)
        name = f"{type(self).__name__}{list(self.var_names)}"
        # public: what "the chain's stored value" means (docs/api/steps.md, instrumentation)
        sync = PointSync(SharedEstimate.for_model(model), self._data_fingerprint,
                         f"{type(self).__name__}{self.var_names}")
        # the evaluated density: the compiled one, or the user's wrapper around it
        self._density = LogDensity(
            self._logp_fn if logp_wrapper is None else logp_wrapper(self._logp_fn),
            on_error=on_error, name=name, model=model)
        self._mh = StepMetropolis(self._density)
        # the kernels in the order they run: the warm-up, kept to the end without a sampler's
        options = {"target": random_walk_target(self.dim), **(warmup_options or {})}
        self.warmup = WarmupKernel(self.dim, **options, to_the_end=adaptation is None)
        self.adaptation = self.warmup if adaptation is None else adaptation
        start = ChainStart(model, vars, name=name,
                           estimators=bool(find_estimators(self._logp_fn)))
        self._chain = Chain((self.warmup,) if adaptation is None else (self.warmup, adaptation),
                            self.dim, self._density, start, sync,
                            warmup_draws=warmup_draws, n_steps=n_steps,
                            max_work_factor=max_work_factor, laplace=laplace,
                            laplace_starts=laplace_starts, laplace_max_evals=laplace_max_evals,
                            screen=screen, tune_draws=tune_draws,
                            emulator=EmulatorMoves.of(emulator))
        self.reset_tuning()

    # ------------------------------------------------------------------ public reads
    # the chain's settings, as given
    warmup_draws = property(lambda self: self._chain.warmup_draws)
    tune_draws = property(lambda self: self._chain.tune_draws)
    laplace = property(lambda self: self._chain.laplace)
    laplace_starts = property(lambda self: self._chain.laplace_starts)
    laplace_max_evals = property(lambda self: self._chain.laplace_max_evals)
    max_work_factor = property(lambda self: self._chain.max_work_factor)

    @property
    def point_sync(self) -> PointSync:
        """When the incoming point is the chain's current one (its stored value kept) and
        when it is evaluated anew (docs/api/steps.md); a subclass instance may replace it."""
        return self._chain.point_sync

    @point_sync.setter
    def point_sync(self, value: PointSync) -> None:
        self._chain.point_sync = value

    @property
    def last_info(self) -> StepInfo | None:
        """The :class:`StepInfo` of the step's last Metropolis-Hastings iteration (``None``
        before the first)."""
        return None if self._last is None else self._info(*self._last)

    def _info(self, it: Iteration, phase: int, tune: bool) -> StepInfo:
        x, logp = self._mh.last if it.n_evals else (None, math.nan)
        return StepInfo(self._chain.record.x.copy(), None if x is None else x.copy(), float(logp),
                        float(it.accept_prob), bool(it.accepted), int(it.n_evals),
                        PHASES[phase], bool(tune), bool(it.probe))

    @property
    def on_error(self) -> str:
        """What an exception raised by the log density does (``"raise"`` or ``"reject"``)."""
        return self._density.on_error

    @property
    def n_steps(self) -> int:
        """Metropolis-Hastings iterations of the next draw: the user's ``n_steps`` if given,
        else the current kernel's default times the work factor (constant after tuning)."""
        return self._chain.n_steps(self.tune)

    @property
    def phase(self) -> str:
        """The kernel in use: ``"warmup"`` or ``"kernel"`` (the sampler's own)."""
        return PHASES[self._chain.record.phase]

    @property
    def preconditioner(self) -> AffineMap | None:
        """The warm-up's whitening map ``x = mean + chol @ u`` of the chain (a copy; None
        before its first draw); ``cov``: the learned posterior covariance (docs/tuning.md)."""
        walk = self._chain.record.walk
        if walk is None:
            return None
        return AffineMap(walk.precond.mean.copy(), walk.precond.chol.copy())

    @property
    def warmup_state(self) -> WarmupState | None:
        """The current chain's warm-up state (map, scale, windows, noise ceiling: live,
        not a copy), ``None`` before the chain's first draw."""
        return self._chain.record.walk

    @property
    def adaptation_state(self) -> Any:
        """The current chain's state of the sampler's kernel (:attr:`adaptation`; live)."""
        return self._chain.record.states[-1]

    @property
    def emulator_state(self) -> Any:
        """The current chain's emulator (:class:`~.emulated.EmulatorState`: phase, emulator,
        independence proposal ``g``, trial acceptance; live), ``None`` without
        ``emulator=`` or before the chain's first draw."""
        return self._chain.record.emulator

    @property
    def compiled_logp(self) -> Callable[[np.ndarray], Any]:
        """The block's compiled log density ``logp(x)`` of the raveled values, before any
        ``logp_wrapper``."""
        return self._logp_fn

    def _data_fingerprint(self) -> bytes:
        return data_fingerprint(self._logp_fn, self.shared.values())

    # ------------------------------------------------------------------ PyMC protocol
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
        self._chain.tell(tune, draws)

    def stop_tuning(self) -> None:
        """End tuning: everything adaptive is frozen from now on."""
        if self.tune:
            chain = self._chain
            ran = chain.tuning_mismatch()  # PyMC 5: the assumed number of tuning draws
            if ran is not None:
                tuning_draws_warning(type(self).__name__, self.var_names, ran, chain.tune)
            # the default warm-up took all of tuning: the user asked for another sampler
            if (len(chain.kernels) > 1 and self.warmup_draws is None
                    and chain.record.phase == 0 and chain.record.x is not None):
                sampler_never_started(type(self).__name__, self.var_names, chain.record.draw,
                                      chain.length, chain.tune)
            chain.stop_tuning(self.rng)
        self.tune = False

    def reset_tuning(self) -> None:
        """Start a chain afresh: initial adaptation, no stored state, ``tune = True``."""
        self._chain.reset()
        self._density.failed = FailedEvaluations()
        self.tune = True

    @property
    def sampling_state(self) -> KernelStepState:
        # the model's stored value is saved too: whether the next draw finds the incoming
        # point's value there decides how often it evaluates
        return save_state(self.vars, self.rng, self.tune, self._logp_fn,
                          {"warm": self._chain.record, "chain_tune": self._chain.tune,
                           "failed": self._density.failed,
                           "stored": self._chain.point_sync.store})

    @sampling_state.setter
    def sampling_state(self, state: KernelStepState) -> None:
        self.rng, self.tune, chain = restore_state(state, self.vars, self._logp_fn)
        self._chain.record, self._chain.tune = chain["warm"], chain["chain_tune"]
        self._density.failed = chain.get("failed", FailedEvaluations())
        if "stored" in chain:
            self._chain.point_sync.store.put(chain["stored"].key, chain["stored"].logp)

    def __deepcopy__(self, memo: dict) -> BaseKernelStep:
        # a copy samples the same model and shares its stored value, as a second step of
        # the model does (PyMC cannot clone a model with initvals)
        sync = self._chain.point_sync
        memo.setdefault(id(self._chain.start.model), self._chain.start.model)
        memo.setdefault(id(sync.store), sync.store)
        new = object.__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    # ------------------------------------------------------------------ sampling
    def step(self, point):
        self._incoming_point = point
        return super().step(point)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        chain, point, tune, rng = self._chain, self._incoming_point, self.tune, self.rng
        self._density.begin_draw(tune)
        evals = chain.enter(q0, point, tune, rng)
        if tune:
            chain.begin_tuning_draw(rng)
        w, callback = chain.record, self.callback
        mh = chain.metropolis(self._mh, rng)
        em = chain.emulator_draw(mh, tune, rng)  # None without an emulator
        if em is not None:
            evals, mh = evals + em.evals, em.mh
        kernel, kstate, phase = chain.kernels[w.phase], w.states[w.phase], w.phase
        state = ChainState(w.precond.to_u(w.x), w.logp)
        accept_sum, moves = 0.0, 0
        n_steps = self.n_steps  # fixed within a draw
        if em is not None and em.n_steps is not None and chain.n_steps_given is None:
            n_steps = em.n_steps  # after tuning: set by the independence moves' trial
        with np.errstate(all="ignore"):  # once per draw, not per iteration
            for _ in range(n_steps):  # propose -> MH -> adapt
                it = (kernel.step(kstate, state, mh, tune) if em is None
                      else em.step(kernel, kstate, state, tune, rng))
                state = it.state
                evals += it.n_evals
                accept_sum += it.accept_prob
                moves += it.accepted
                if tune:
                    if it.adapts:
                        w.accepts.append(it.accept_prob)
                    kernel.update(kstate, it, w.x, rng)
                if callback is not None:
                    callback(self._info(it, phase, tune))
        self._last = (it, phase, tune)  # the last iteration's info, built only when read
        stats = chain.draw_stats(self.stats_dtypes_shapes, tune, n_steps, evals,
                                 accept_sum / n_steps, moves / n_steps,
                                 None if em is None else em.stats())
        new = RaveledVars(w.x.astype(q0.data.dtype, copy=True), q0.point_map_info)
        chain.point_sync.remember(w, new, point)
        return new, [stats]
