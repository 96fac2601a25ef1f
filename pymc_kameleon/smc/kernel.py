"""``KameleonSMC``: PyMC's SMC hooks, each handing its work to one part of this package.

PyMC calls, per chain: ``initialize`` (prior draws, :meth:`KameleonSMC.evaluate_start`,
``setup_kernel``), then per stage ``update_beta_and_weights`` and ``step`` (resample;
``tune``: the stage's proposal; ``mutate``: the stage's moves and, after the last stage,
the recycled output; ``sample_stats``), and ``sample_settings`` at the end.  The proposal,
moves and recycling are the PyMC-free :mod:`pymc_kameleon.particles`.
"""

from __future__ import annotations

import pickle
import uuid
from concurrent.futures import Executor

import numpy as np
from pymc.model import modelcontext
from pymc.pytensorf import floatX

from ..adaptation.robbins_monro import log_scale_step
from ..compat.smc import SeamedSMCKernel
from ..emulator import EmulatorSettings
from ..model_point import ModelPoint
from ..parallel import BatchEvaluator, dumps
from ..particles.mutation import Mutation
from ..particles.proposal import TARGET_ACCEPT, MixtureMove, StageProposal
from ..particles.recycling import RecycledPool, worth
from ..particles.rules import StageRules
from ..pseudo_marginal import compiling_for, reseed_estimators
from .emulated import (
    EMULATOR_PHASES,
    EMULATOR_STATS,
    EmulatorMode,
    point_values,
    take_recycled,
)
from .evaluation import Evaluations, vectorised_logp
from .options import SMCOptions
from .prior import (
    check_proper_priors,
    check_start_finite,
    prior_draws_replace_initvals,
    sortable_ordered,
    sorted_ordered_draws,
    value_transforms,
)
from .report import STATS, ChainReport, stage_stats, warn_final_stage
from .weighted import PENDING

__all__ = ["KameleonSMC"]

EXECUTOR_STAYS = (
    "KameleonSMC(executor=...) evaluates each chain's particles on the executor and cannot be "
    "sent to pm.sample_smc's chain processes: pass cores=1 (the chains then run one after the "
    "other, each on every worker of the executor)")


def _restore_kernel(cls, payload: bytes):
    kernel = cls.__new__(cls)
    kernel.__dict__.update(pickle.loads(payload))
    return kernel


def emulator_settings(emulator) -> EmulatorSettings | None:
    """The settings of ``emulator=`` (True, False/None, a dict or EmulatorSettings)."""
    if emulator is True:
        return EmulatorSettings()
    if isinstance(emulator, dict):
        return EmulatorSettings(**emulator)
    if emulator is None or emulator is False or isinstance(emulator, EmulatorSettings):
        return emulator or None
    raise TypeError(f"emulator must be a bool, a dict or EmulatorSettings, not {emulator!r}")


class KameleonSMC(ChainReport, SeamedSMCKernel):
    r"""Kernel adaptive SMC mutation kernel (KASMC) for :func:`pymc.sample_smc`.

    ``pm.sample_smc(kernel=KameleonSMC)`` keeps PyMC's tempering, resampling and evidence;
    each particle makes exact Metropolis-Hastings moves from a Gaussian mixture fitted to the
    other half of the whitened particles or from the KAMH proposal, one log density per
    proposal, each stored value never re-evaluated (pseudo-marginal SMC).  How and what it
    costs: ``docs/smc.md``.

    Parameters
    ----------
    gamma, n_subsample, independent_weight, n_clusters, global_weight, em_iters : optional
        The moves (:class:`~pymc_kameleon.smc.SMCOptions`: defaults and meanings).
    correlation_threshold, max_steps, min_steps, refresh_fraction, stationarity : optional
        The end of a stage; ``learning_rate`` and ``slowest_rule`` too (as above).
    executor : concurrent.futures.Executor or dask.distributed.Client, optional
        Evaluate each batch of proposals on it (needs ``pm.sample_smc(cores=1)``).
    max_evals : int, optional
        Evaluation budget per chain; then straight to ``beta = 1``, with a warning.
    waste_free : bool or int, default False
        Waste-free stages with chains of ``P`` states (``True``: ``P`` chosen).
    recycle : int, optional
        Spend this many more evaluations on adaptive importance-sampling rounds after the
        last stage, and return this many draws resampled from the importance sample.
    weights_path : str or path-like, optional
        With ``emulator`` or ``recycle``: write every chain's weighted sample (points,
        their true log prior and likelihood, importance weights) and the emulator's
        design points to this ``.npz`` file once the run is done
        (:mod:`pymc_kameleon.smc.weighted` lists its arrays).  The result holds the same
        as its group ``weighted_sample`` with or without it.
    on_error : {"raise", "reject"}, default "raise"
        An exception of the log density: a :class:`~pymc_kameleon.LogDensityError` naming
        the point in the model's variables, or zero density counted in the stat ``n_errors``
        (as for the steps; NaN is always zero density, in ``n_nan``; docs/robustness.md).
    vectorize : bool, default False
        One vectorised compiled call per batch where the model is PyTensor throughout.
    emulator : bool, EmulatorSettings or dict, default False
        Let an emulator of the log density choose where to evaluate, and the true
        evaluations decide the answer by importance sampling (``docs/emulator.md``); falls
        back to the stages, with a warning, where it does not pay.  A dict holds
        :class:`~pymc_kameleon.emulator.EmulatorSettings`' arguments.
    rules, move : StageRules, MixtureMove, optional
        When a stage's moves end, and every particle's MH move (default: from the settings
        above; :mod:`pymc_kameleon.particles.rules`, :mod:`~pymc_kameleon.particles.proposal`).
    callback : callable, optional
        ``callback(record)`` after every move of every particle, with the stage's
        :class:`~pymc_kameleon.particles.rules.StepRecord`; it must not change it.
    **kwargs
        Passed to :class:`pymc.smc.kernels.SMC_KERNEL` (``draws``, ``threshold``, ...).

    References
    ----------
    .. [1] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, 5.2.1.
    .. [2] South, L. F., Pettitt, A. N., Drovandi, C. C. (2019). Sequential Monte Carlo
       samplers with independent MCMC proposals. Bayesian Analysis 14(3).
    .. [3] Dau, H.-D., Chopin, N. (2022). Waste-free sequential Monte Carlo. JRSS-B 84(1).
    .. [4] Owen, A., Zhou, Y. (2000). Safe and effective importance sampling. JASA 95(449).
    """

    stats_dtypes_shapes: dict[str, tuple[type, list]] = STATS
    #: every particle stores its likelihood estimate, never re-estimated
    exact_for_pseudo_marginal = True

    def __init__(self, *args, executor: Executor | None = None, vectorize: bool = False,
                 rules: StageRules | None = None, move: MixtureMove | None = None,
                 callback=None, emulator: bool | EmulatorSettings = False, **kwargs):
        check_proper_priors(kwargs.get("model"))
        self.options = options = SMCOptions.pop_from(kwargs)
        with compiling_for(self):  # each particle keeps its estimate: exact (no warning)
            super().__init__(*args, **kwargs)
        options.check(self.draws)
        self.executor, self.callback = executor, callback
        self.rules = StageRules.from_options(options) if rules is None else rules
        self.move = MixtureMove() if move is None else move
        self._run = uuid.uuid4().hex  # travels with the kernel to every chain (RunSettings)
        PENDING.clear()  # a weighted sample no result took is no other run's (weighted.py)
        model = modelcontext(kwargs.get("model"))
        self._transforms, self._ordered = value_transforms(model), sortable_ordered(model)
        self._point = ModelPoint(model, [(v.name, *self.var_info[v.name]) for v in self.variables])
        expression = prior_draws_replace_initvals(model)
        if expression is not None:
            self.set_prior_expression(expression)
        with compiling_for(self):
            self._batched = (vectorised_logp(model, self.variables,
                                             kwargs.get("compile_kwargs")) if vectorize else None)
        self.evaluations: Evaluations | None = None  # the chain's, from its start on
        self.emulator = emulator_settings(emulator)
        if options.weights_path is not None and self.emulator is None and not options.recycle:
            raise ValueError(
                "weights_path keeps the weighted sample behind the draws of emulator=... or "
                "recycle=...; without either the draws are the stages' own particles and "
                "carry no weights")
        if self.emulator is not None:
            self.stats_dtypes_shapes = {**STATS, **EMULATOR_STATS}
        self._new_chain()

    @property
    def point(self) -> ModelPoint:
        """The map from the sampler's raveled points to the model's variables."""
        return self._point

    @property
    def n_steps(self) -> int:
        """MH steps of the last stage (as PyMC's kernels report them)."""
        return 0 if self.stage is None else self.stage.n_steps

    def _new_chain(self) -> None:
        self.log_nu, self.proposal, self.stage = 0.0, None, None
        self.pool = None if self.options.recycle is None else RecycledPool()
        self.emulated: EmulatorMode | None = None
        self.emulator_run = None  # the chain's EmulatorRun, also after a fallback
        self._emulator_stats: dict = {}  # the stats of a run that fell back
        self.recycled_ess = self.log_evidence_recycled = np.nan
        # what the recycled draws must be worth where the emulator fell back (None: as
        # recycle= says, or no recycling); the last stage ends once the pool is
        self.recycle_target: float | None = None
        self.worth = np.nan  # what the returned draws are worth where known (warn_worth)

    # ------------------------------------------------------------------ PyMC hooks
    def set_rng(self, rng: np.random.Generator) -> None:
        """PyMC's per-chain generator swap, plus fresh seeds for likelihood estimators."""
        with compiling_for(self):  # PyMC copies the compiled functions
            super().set_rng(rng)
        reseed_estimators(self.likelihood_logp_func, rng)

    def initialize_population(self) -> dict[str, np.ndarray]:
        """PyMC's prior draws, with iid ``ordered`` variables drawn and sorted (exact; see
        ``docs/smc.md``) instead of left unordered, whose transformed values are NaN."""
        return sorted_ordered_draws(super().initialize_population(), self._ordered,
                                    self.draws, self.rng)

    def evaluate_start(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The start's evaluations as one batch on the executor (PyMC's own are one point
        after the other in this process)."""
        evaluator = BatchEvaluator((self.prior_logp_func, self.likelihood_logp_func),
                                   self.executor, batched=self._batched)
        self.evaluations = ev = Evaluations(evaluator, self.options.max_evals,
                                            self.options.on_error, self._point)
        self.show_chain(lambda: ev.live, "emulator" if self.emulator is not None else "stages")
        if self.emulator is not None:  # the emulator evaluates where it chooses
            return point_values(self.prior_logp_func, X), np.zeros(len(X))
        return self.evaluations.raw(X, self.rng)

    def setup_kernel(self) -> None:
        """A new chain: adaptation reset; a starting particle's NaN log density is ``-inf``
        (reported); a start mostly without finite density stops with a clear error."""
        self._new_chain()
        check_start_finite(self.tempered_posterior, self.prior_logp, self.likelihood_logp,
                           {v.name: self.var_info[v.name][1] for v in self.variables},
                           self._transforms, bool(self.start))
        self.prior_logp, self.likelihood_logp = self.evaluations.reject_nan(
            self.tempered_posterior, np.atleast_1d(self.prior_logp),
            np.atleast_1d(self.likelihood_logp))
        if self.emulator is not None:
            self.emulated = EmulatorMode(self, self.emulator)
            self.emulator_run = self.emulated.run

    def update_beta_and_weights(self) -> None:
        """PyMC's next temperature; once the evaluation budget cannot pay for another stage,
        straight to ``beta = 1`` by importance weights, with a warning."""
        if self.emulated is None and self.evaluations.left() >= self.draws:
            return super().update_beta_and_weights()
        self.iteration += 1
        if self.emulated is None:  # (the emulator's round sets beta itself)
            self.weights, increment = self.evaluations.straight_to_posterior(
                self.likelihood_logp, self.beta)
            self.log_marginal_likelihood += increment
            self.beta = 1.0

    def step(self) -> dict:
        """One stage: PyMC's (resample, tune, mutate), or one round of the emulator; after
        the last, the chain's failed evaluations are reported."""
        mode = self.emulated
        if mode is not None:
            self._cell.phase = EMULATOR_PHASES.get(mode.run.phase, mode.run.phase)
        if mode is not None and mode.round():
            stats = {**stage_stats(self), **mode.stats()}
        else:
            if mode is not None:  # fell back: the stages on the true density, from the prior
                self.emulated, self._emulator_stats = None, mode.stats()
                self._cell.phase = "stages"
                mode.fall_back()
            stats = {**super().step(), **self._emulator_stats}
            if "budget_spent" in stats:  # after a fallback: the stages' budget
                stats["budget_spent"] = self.evaluations.budget_warned
        if self.beta >= 1:  # the chain's failures reported, its end on the progress bar
            self.evaluations.report()
            self._cell.end()
        # each stat one Python type at every stage: PyMC stores several chains' stats as
        # object arrays, which netCDF saves only when their values share a type
        return {name: kind(stats[name]) for name, (kind, _) in self.stats_dtypes_shapes.items()}

    def tune(self) -> None:
        """The stage's proposal, after adapting ``log nu`` to the last stage's acceptance."""
        if self.stage is not None and np.isfinite(self.stage.acceptance()[1]):
            self.log_nu = log_scale_step(self.log_nu, 1, 1.0, self.stage.acceptance()[1],
                                         TARGET_ACCEPT, gain=self.options.learning_rate)
        self.proposal = StageProposal.fit(self.tempered_posterior, self.log_nu, self.rng,
                                          self.options)
        if self.pool is not None:
            self.pool.new_stage(self.proposal.whitening, self.proposal.mixture)

    def mutate(self) -> None:
        """Exact MH moves of the particles for the stage's tempered target."""
        o = self.options
        mutation = Mutation(self.rules, o.max_steps,
                            o.chain_length(self.draws, self.tempered_posterior.shape[1]),
                            self.move)
        enough = None
        if self.recycle_target is not None and self.beta >= 1:
            def enough() -> bool:
                return worth(self.pool.weighted()[3]) >= self.recycle_target
        self.stage = stage = mutation.run(
            (self.tempered_posterior, self.tempered_posterior_logp, self.prior_logp,
             self.likelihood_logp), self.proposal, self.beta, self.evaluations, self.rng,
            floatX, None if self.pool is None else self.pool.add, self.callback, enough)
        self.tempered_posterior, self.tempered_posterior_logp = stage.X, stage.logp
        self.prior_logp, self.likelihood_logp = stage.prior, stage.lik
        if self.beta >= 1:  # after the last stage: warnings, or the recycled draws
            warn_final_stage(stage, self.pool is not None)
            if self.pool is not None:
                self._cell.phase = "recycling"
                take_recycled(self)

    def __reduce__(self):
        if self.executor is not None:  # an executor does not travel to another process
            raise TypeError(EXECUTOR_STAYS)
        # pm.sample_smc(cores > 1) cloudpickles the kernel with its compiled functions;
        # as_op/wrap_py Ops defined in __main__ travel by value (docs/smc.md)
        return _restore_kernel, (type(self), dumps(self.__dict__))
