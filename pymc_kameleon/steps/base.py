"""The PyMC step base shared by every sampler in this package.

:class:`BaseKernelStep` is the PyMC adapter.  It compiles the block's log density (no
gradient), keeps the chain's record (position, *stored* log density, the kernels' states) and
runs, per PyMC draw, ``n_steps`` iterations of the current kernel -- propose, then the
Metropolis-Hastings decision of :class:`~.metropolis.StepMetropolis`, then adapt while
tuning -- over the kernel protocol of :mod:`pymc_kameleon.adaptation.kernel`.  The kernels
run in sequence: the warm-up (:mod:`~pymc_kameleon.adaptation.warmup_kernel`, which learns
the whitening map), then the sampler's own, in the whitened coordinates ``u``; a step without
one keeps the warm-up to the end.  A sampler is a subclass that passes its kernel
(``adaptation``) and the warm-up's options; it overrides nothing of the base.

The chain's start (:mod:`~.start`), the evaluated log density and its failures
(:mod:`~.density`, :mod:`~.evaluations`), the stored value shared between steps
(:mod:`~.store`), the draw's tuning (:mod:`~.tuning`), records and stats (:mod:`~.records`),
the progress bar (:mod:`~.progress`) and the saved state (:mod:`~.state`) live in their own
modules.
"""

from __future__ import annotations

import math
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

from ..adaptation.kernel import ChainState, Iteration, Kernel, Proposal
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
from .messages import discrete_message, sampler_never_started
from .metropolis import StepMetropolis
from .progress import progress_update, progressbar_config
from .records import ChainRecord, StepInfo, fill_stats
from .start import ChainStart
from .state import KernelStepState, from_state, to_state
from .store import PointSync, SharedEstimate, data_fingerprint
from .tuning import begin_tuning_draw, kernel_draws, warmup_length

__all__ = ["BaseKernelStep", "ChainState", "Proposal", "StepInfo", "random_walk_target"]

_PHASES = ("warmup", "kernel")  # the names of the kernels in use, for StepInfo


class BaseKernelStep(ArrayStepShared):
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
        the chain mixes slowly, at most fourfold; docs/tuning.md, "Work per draw").
    warmup_draws : int, optional
        Tuning draws of the warm-up, the preconditioned random walk that learns the
        posterior's location and scale (default: half of ``tune``, else 500).
    laplace : bool, optional
        Start the warm-up from a gradient-free Laplace approximation where it describes the
        target (docs/tuning.md, "Where the warm-up starts").  Default: for a deterministic
        log density with ``d <= 100``.  The stat ``laplace_start`` says which start was kept.
    laplace_starts : int, default 4
        Prior draws from which the Laplace start also searches the mode (each at most
        ``200 (d + 1)`` evaluations, once per chain); ``0``: the chain's start only.
    on_error : {"raise", "reject"}, default "raise"
        What an exception raised by the log density does: a
        :class:`~pymc_kameleon.steps.evaluations.LogDensityError` (a PyMC ``SamplingError``)
        naming the draw, chain and point, or a rejection counted in the stat ``n_errors``
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
    progress_columns: tuple[tuple[str, str], ...] = (("accept", "Accept"),)
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
        adaptation: Kernel | None = None,
        warmup_options: dict[str, Any] | None = None,
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
        if initial_point is None:
            initial_point = model.initial_point()
        vars = (model.continuous_value_vars if vars is None
                else get_value_vars_from_user_vars(vars, model))
        if any(v.dtype in discrete_types for v in vars):
            raise ValueError(discrete_message(type(self).__name__, vars))
        if not vars:
            raise ValueError(f"{type(self).__name__}: no continuous variables to sample")
        shared = make_shared_replacements(initial_point, vars, model)
        [logp], raveled_input = join_nonshared_inputs(
            point=initial_point, outputs=[model.logp()], inputs=vars, shared_inputs=shared)
        self._logp_fn = compile_pytensor([raveled_input], logp,
                                          **logp_compile_kwargs(compile_kwargs))
        self._logp_fn.trust_input = True
        self.dim = int(sum(np.size(initial_point[v.name]) for v in vars))
        if self.dim == 0:
            raise ValueError(f"{type(self).__name__}: the variables {[v.name for v in vars]} "
                             "have no elements (size 0): nothing to sample")
        self._n_steps_given = None if n_steps is None else check_integral("n_steps", n_steps)
        self.warmup_draws = (None if warmup_draws is None
                             else check_integral("warmup_draws", warmup_draws))
        self.laplace = laplace
        self.laplace_starts = check_integral("laplace_starts", laplace_starts, minimum=0)
        check_on_error(on_error)
        self.callback = callback
        self._last: tuple | None = None  # the last iteration's StepInfo fields, unbuilt
        self._chain_draws: int | None = None  # tuning + posterior draws, when PyMC tells us
        self._chain_tune: int | None = None  # number of tuning draws, when PyMC tells us
        self.tune = True
        super().__init__(vars, shared, blocked=True, rng=rng)
        name = f"{type(self).__name__}{list(self.var_names)}"
        # public: what "the chain's stored value" means (docs/api/steps.md, instrumentation)
        self.point_sync = PointSync(SharedEstimate.for_model(model), self._data_fingerprint,
                                    f"{type(self).__name__}{self.var_names}")
        # the evaluated density: the compiled one, or the user's wrapper around it
        self._density = LogDensity(
            self._logp_fn if logp_wrapper is None else logp_wrapper(self._logp_fn),
            on_error=on_error, name=name)
        self._mh = StepMetropolis(self._density)
        self._start = ChainStart(model, vars, name=name,
                                 estimators=bool(find_estimators(self._logp_fn)))
        # the kernels in the order they run: the warm-up, kept to the end without a sampler's
        options = {"target": random_walk_target(self.dim), **(warmup_options or {})}
        self.warmup = WarmupKernel(self.dim, **options, to_the_end=adaptation is None)
        self.adaptation = self.warmup if adaptation is None else adaptation
        self._kernels = (self.warmup,) if adaptation is None else (self.warmup, adaptation)
        self.reset_tuning()

    # ------------------------------------------------------------------ public reads
    @property
    def last_info(self) -> StepInfo | None:
        """The :class:`StepInfo` of the step's last Metropolis-Hastings iteration (``None``
        before the first)."""
        return None if self._last is None else self._info(*self._last)

    def _info(self, it: Iteration, phase: int, tune: bool) -> StepInfo:
        x, logp = self._mh.last if it.n_evals else (None, math.nan)
        return StepInfo(self._warm.x.copy(), None if x is None else x.copy(), float(logp),
                        float(it.accept_prob), bool(it.accepted), int(it.n_evals),
                        _PHASES[phase], bool(tune), bool(it.probe))

    @property
    def on_error(self) -> str:
        """What an exception raised by the log density does (``"raise"`` or ``"reject"``)."""
        return self._density.on_error

    @property
    def n_steps(self) -> int:
        """Metropolis-Hastings iterations of the next draw: the user's ``n_steps`` if given,
        else the current kernel's default times the work factor (constant after tuning)."""
        if self._n_steps_given is not None:
            return self._n_steps_given
        w = self._warm
        n = self._kernels[w.phase].n_steps(w.states[w.phase], self.dim, self.tune)
        return max(1, math.ceil(n * w.work_factor))

    @property
    def phase(self) -> str:
        """The kernel in use: ``"warmup"`` or ``"kernel"`` (the sampler's own)."""
        return _PHASES[self._warm.phase]

    @property
    def preconditioner(self) -> AffineMap | None:
        """The whitening map ``x = mean + chol @ u`` of the current chain, learned by the
        warm-up (a copy; ``None`` before the chain's first draw).  Its ``cov`` is the
        learned posterior covariance in the step's raveled coordinates, e.g. the initial
        shape of another run, ``RandomWalkStep(cov=step.preconditioner.cov)``
        (``docs/tuning.md``, the warm-up)."""
        walk = self._warm.walk
        if walk is None:
            return None
        return AffineMap(walk.precond.mean.copy(), walk.precond.chol.copy())

    @property
    def warmup_state(self) -> WarmupState | None:
        """The current chain's warm-up state (map, scale, windows, noise ceiling: live,
        not a copy), ``None`` before the chain's first draw."""
        return self._warm.walk

    @property
    def adaptation_state(self) -> Any:
        """The current chain's state of the sampler's kernel (:attr:`adaptation`; live)."""
        return self._warm.states[-1]

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
        self._chain_tune = int(tune)
        self._chain_draws = int(tune) + int(draws)

    def stop_tuning(self) -> None:
        """End tuning: everything adaptive is frozen from now on."""
        if self.tune:
            w = self._warm
            # the default warm-up took all of tuning: the user asked for another sampler
            if (not self.warmup.to_the_end and self.warmup_draws is None and w.phase == 0
                    and w.x is not None):
                sampler_never_started(type(self).__name__, self.var_names, w.draw,
                                      self._warmup_length(), self._chain_tune)
            last = len(self._kernels) - 1  # the sampler's kernel first, then the one in use
            for i in sorted({last, w.phase}, reverse=True):
                if w.states[i] is not None:
                    self._kernels[i].final(w.states[i], self.rng)
        self.tune = False

    def reset_tuning(self) -> None:
        """Start a chain afresh: initial adaptation, no stored state, ``tune = True``."""
        self._warm = ChainRecord()
        length = self._warmup_length()
        self._warm.states += [k.init(self.dim, self.warmup.scale0,
                                     kernel_draws(self._chain_tune, length))
                              for k in self._kernels[1:]]
        self._density.failed = FailedEvaluations()
        self.tune = True

    @property
    def sampling_state(self) -> KernelStepState:
        return KernelStepState(
            var_names=[v.name for v in self.vars],
            rng=get_state_from_generator(self.rng),
            tune=self.tune,
            chain=to_state({"warm": self._warm, "chain_tune": self._chain_tune,
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
        self._warm, self._chain_tune = chain["warm"], chain["chain_tune"]
        self._density.failed = chain.get("failed", FailedEvaluations())
        set_estimator_states(self._logp_fn, from_state(state.estimators))

    # ------------------------------------------------------------------ sampling
    def step(self, point):
        self._incoming_point = point
        return super().step(point)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        w, point, tune = self._warm, self._incoming_point, self.tune
        self._density.begin_draw(tune)
        evals = self._sync(q0, point)
        if tune:
            begin_tuning_draw(w, self._kernels, dim=self.dim, walk_scale=self.warmup.scale0,
                              length=self._warmup_length(), tune=self._chain_tune,
                              n_steps=lambda: self.n_steps, rng=self.rng)
        mh, rng, callback = self._mh, self.rng, self.callback
        mh.record, mh.rng = w, rng
        kernel, kstate, phase = self._kernels[w.phase], w.states[w.phase], w.phase
        state = ChainState(w.precond.to_u(w.x), w.logp)
        accept_sum, moves = 0.0, 0
        n_steps = self.n_steps  # fixed within a draw
        with np.errstate(all="ignore"):  # once per draw, not per iteration
            for _ in range(n_steps):  # propose -> MH -> adapt
                it = kernel.step(kstate, state, mh, tune)
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
        failed = self._density.failed
        stats = {
            "accept": accept_sum / n_steps,
            "accepted": moves / n_steps,
            "tune": tune,
            "model_logp": w.logp,
            "n_evals": evals,
            "laplace_start": w.start,
            "n_steps": n_steps,
            **failed.draw_stats(),
            "warning": failed.warning(self._density.name, self._density.info,
                                      self._chain_draws),
            **fill_stats(self.stats_dtypes_shapes, BaseKernelStep.stats_dtypes_shapes,
                         self.adaptation.stats(w.states[-1], tune)),
        }
        new = RaveledVars(w.x.astype(q0.data.dtype, copy=True), q0.point_map_info)
        self.point_sync.remember(w, new, point)
        return new, [stats]

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
        w, walk, laplace = self._warm, self.warmup, self.laplace
        if not walk.adapt or (laplace is None and walk.cov is not None):
            laplace = False  # a given initial shape is replaced only on request
        res = self._start.run(
            x, logp=self._density, search_logp=self._density.searching(),
            round=self._density.round, rng=self.rng, stored=stored, tune=self.tune,
            laplace=laplace, laplace_starts=self.laplace_starts, point=point,
            point_map_info=info)
        w.x, w.logp, w.start = res.x, res.logp, res.laplace_start
        w.key = b"" if res.moved else key  # a moved start is stored at the draw's end
        tune = caller_tuning_draws() if self.tune else None  # PyMC 5: from its chain loop
        if tune is not None:
            self._chain_tune = tune
        if self.tune and self._n_steps_given is None:
            w.work = WorkPerDraw.schedule(self._chain_tune, self._warmup_length())
        w.walk = walk.init()
        w.walk.noisy = res.noisy
        if res.cov is not None:
            walk.start_at(w.walk, w.x, res.cov)
        return res.n_evals

    def _warmup_length(self) -> int:
        return warmup_length(self.warmup_draws, self._chain_tune)

    # ------------------------------------------------------------------ progress bar
    @classmethod
    def _progressbar_config(cls, n_chains=1):
        return progressbar_config(cls.progress_columns, n_chains)

    @classmethod
    def _make_progressbar_update_functions(cls):
        return (progress_update(cls.progress_columns),)
