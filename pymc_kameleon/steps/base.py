"""The PyMC step base shared by every sampler in this package.

:class:`BaseKernelStep` owns everything that is not specific to one algorithm:

* compiling the model log density once, for the raveled value variables of the block
  (only the log density: no gradient is ever compiled or used);
* the chain state (position and *stored* log density, :class:`ChainState`), refreshed once
  when another step of a ``CompoundStep`` changed variables outside the block;
* the Metropolis-Hastings decision from a :class:`Proposal` and its log correction
  (reverse minus forward proposal density, or the kinetic-energy difference for HMC);
* stats, tuning (``stop_tuning`` / ``reset_tuning``), ``sampling_state``, ``competence``,
  seeding of pseudo-marginal likelihood estimators, error handling for bad input.

A sampler subclasses it and implements three hooks: ``_initial_adapt_state`` (everything it
adapts, as one object), ``_propose`` and ``_adapt_step``.  The split mirrors BlackJAX's
``State(position, logdensity)`` / ``Info(...)``.

Exactness (see ``ALGORITHMS.md``): one log-density evaluation per iteration, at the proposal
(none when the proposal is rejected outright, e.g. a diverged trajectory);
the current value is stored and never re-estimated (this keeps pseudo-marginal chains exact);
a non-finite value at a proposal is a rejection; adaptation happens only while tuning.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import pymc as pm
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.pytensorf import compile as compile_pytensor
from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_value_vars_from_user_vars
from rich.progress import TextColumn
from rich.table import Column

from ..pseudo_marginal import reseed_estimators

__all__ = ["BaseKernelStep", "ChainState", "Proposal"]


@dataclass(frozen=True)
class ChainState:
    """Where the chain is: raveled position and the log density stored for it."""

    position: np.ndarray
    logp: float


@dataclass(frozen=True)
class Proposal:
    """A proposed position and the log correction of the acceptance ratio.

    ``log_correction`` is ``log q(x | x*) - log q(x* | x)`` for a Metropolis-Hastings
    proposal, or ``K(p) - K(p*)`` for a Hamiltonian one; the step accepts with probability
    ``min(1, exp(logp(x*) - logp(x) + log_correction))``.
    """

    position: np.ndarray
    log_correction: float


@dataclass_state
class KernelStepState(StepMethodState):
    """Everything a :class:`BaseKernelStep` changes while sampling."""

    tune: bool
    _chain: Any
    _others: Any
    _adapt: Any


class BaseKernelStep(ArrayStepShared):
    """Base class for gradient-free, adaptive, pseudo-marginal-exact PyMC step methods.

    Subclasses set ``name``, extend ``stats_dtypes_shapes`` and ``_progress_columns``, and
    implement :meth:`_initial_adapt_state`, :meth:`_propose` and :meth:`_adapt_step`.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables sampled jointly by this step (default: every continuous value
        variable of the model).
    model : pymc.Model, optional
        Taken from the context if not given.
    rng : RandomGenerator, optional
        Seed or generator; ``pm.sample`` replaces it with one derived from ``random_seed``.
    initial_point : dict, optional
        Used only to compile the log density (shapes of the other variables).
    compile_kwargs : dict, optional
        Passed to PyTensor's ``compile``.
    blocked : bool
        Must be ``True``: the proposals move all variables of the block jointly.
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
    }
    #: (stat name, progress bar header) pairs shown during sampling.
    _progress_columns: tuple[tuple[str, str], ...] = (("accept", "Accept"),)
    _state_class = KernelStepState

    def __init__(
        self,
        vars=None,
        *,
        model=None,
        rng=None,
        initial_point: dict[str, np.ndarray] | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
    ):
        if not blocked:
            raise ValueError(f"{type(self).__name__} proposes all its variables jointly; "
                             "blocked=False is not supported")
        model = pm.modelcontext(model)
        if initial_point is None:
            initial_point = model.initial_point()
        if vars is None:
            vars = model.continuous_value_vars
        else:
            vars = get_value_vars_from_user_vars(vars, model)
        self._check_continuous(vars)
        if not vars:
            raise ValueError(f"{type(self).__name__}: no continuous variables to sample")

        shared = make_shared_replacements(initial_point, vars, model)
        [logp], raveled_input = join_nonshared_inputs(
            point=initial_point, outputs=[model.logp()], inputs=vars, shared_inputs=shared
        )
        self._logp_fn = compile_pytensor([raveled_input], logp, **(compile_kwargs or {}))
        self._logp_fn.trust_input = True
        self._model = model
        self.dim = int(sum(np.size(initial_point[v.name]) for v in vars))
        self.tune = True
        self._chain: ChainState | None = None
        self._others: dict[str, np.ndarray] | None = None
        super().__init__(vars, shared, blocked=True, rng=rng)
        self._adapt = self._initial_adapt_state()

    # ------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def _initial_adapt_state(self) -> Any:
        """A fresh object holding everything the sampler adapts (and caches)."""

    @abstractmethod
    def _propose(self, state: ChainState) -> tuple[Proposal, dict[str, Any]]:
        """Propose from ``state``; return the proposal and sampler-specific stats."""

    @abstractmethod
    def _adapt_step(self, new_state: ChainState, accept_prob: float) -> None:
        """Adapt after one tuning iteration (never called after ``stop_tuning``)."""

    def _on_stop_tuning(self) -> None:
        """Called once when tuning ends (freeze, precompute)."""

    # ------------------------------------------------------------------ PyMC protocol
    @classmethod
    def _check_continuous(cls, vars) -> None:
        discrete = [v.name for v in vars if v.dtype in pm.discrete_types]
        if discrete:
            raise ValueError(
                f"{cls.__name__} samples continuous variables only, but got discrete "
                f"variable(s) {discrete}. Give them to another step method, e.g. "
                f"pm.sample(step=[{cls.__name__}([...continuous vars...]), "
                f"pm.Metropolis([...discrete vars...])])."
            )

    @staticmethod
    def competence(var, has_grad):
        """COMPATIBLE for continuous variables, INCOMPATIBLE for discrete ones."""
        if var.dtype in pm.discrete_types:
            return Competence.INCOMPATIBLE
        return Competence.COMPATIBLE

    def set_rng(self, rng) -> None:
        """Set the step's generator and reseed pseudo-marginal estimators from it."""
        super().set_rng(rng)
        reseed_estimators(self._logp_fn, self.rng)

    def stop_tuning(self) -> None:
        """End tuning: everything adaptive is frozen from now on."""
        if self.tune:
            self._on_stop_tuning()
        self.tune = False

    def reset_tuning(self) -> None:
        """Forget all adaptation and the stored chain state (called by PyMC per chain)."""
        self._adapt = self._initial_adapt_state()
        self._chain = None
        self._others = None

    # ------------------------------------------------------------------ sampling
    def step(self, point):
        self._incoming_point = point
        return super().step(point)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        state = self._sync_state(q0)
        proposal, info = self._propose(state)
        if proposal.log_correction == -np.inf:  # e.g. a diverged trajectory: no evaluation
            logp_new = -np.inf
        else:
            logp_new = self._logp(proposal.position)
        with np.errstate(invalid="ignore", over="ignore"):
            log_accept = logp_new - state.logp + proposal.log_correction
        if not np.isfinite(logp_new) or np.isnan(log_accept):
            log_accept = -np.inf
        accept_prob = float(np.exp(min(log_accept, 0.0)))
        accepted = bool(np.log(self.rng.uniform()) < log_accept)
        new_state = ChainState(proposal.position, logp_new) if accepted else state
        self._chain = new_state
        if self.tune:
            self._adapt_step(new_state, accept_prob)
        stats = {
            "accept": accept_prob,
            "accepted": accepted,
            "tune": self.tune,
            "model_logp": new_state.logp,
            **info,
        }
        return RaveledVars(new_state.position, q0.point_map_info), [stats]

    def _logp(self, x: np.ndarray) -> float:
        with np.errstate(all="ignore"):
            value = float(self._logp_fn(x))
        return value if np.isfinite(value) else -np.inf

    def _to_model_dtype(self, x: np.ndarray) -> np.ndarray:
        """Cast a proposal to the dtype PyMC uses for this block (float32 models)."""
        return np.asarray(x, dtype=self._dtype)

    def _sync_state(self, q0: RaveledVars) -> ChainState:
        """The stored chain state, refreshed only if the point changed behind our back."""
        x = q0.data
        self._dtype = x.dtype
        point = self._incoming_point
        others = {name: point[name] for name in self.shared}
        stale = (
            self._chain is None
            or not np.array_equal(self._chain.position, x)
            or self._others is None
            or any(not np.array_equal(others[k], self._others[k]) for k in others)
        )
        if stale:
            logp = self._logp(x)
            if not np.isfinite(logp):
                raise ValueError(self._bad_start_message(q0, point))
            self._chain = ChainState(x.copy(), logp)
            self._others = {k: np.array(v, copy=True) for k, v in others.items()}
        return self._chain

    def _bad_start_message(self, q0: RaveledVars, point) -> str:
        full_point = DictToArrayBijection.rmap(q0, start_point=dict(point))
        try:
            logps = self._model.point_logps(full_point)
            bad = {k: float(v) for k, v in logps.items() if not np.isfinite(v)}
        except Exception:  # noqa: BLE001 - best effort diagnostics only
            bad = {}
        values = {name: np.asarray(full_point[name]).tolist() for name in self.var_names}
        detail = (
            f"non-finite terms: {bad}" if bad else "no single term is non-finite (check the "
            "likelihood estimator or potentials)"
        )
        return (
            f"{type(self).__name__}: the log density is not finite at the current point "
            f"{values}; {detail}. Choose another start (initvals=...)."
        )

    # ------------------------------------------------------------------ progress bar
    @classmethod
    def _progressbar_config(cls, n_chains=1):
        columns = [
            TextColumn(f"{{task.fields[{stat}]:{fmt}}}", table_column=Column(header, ratio=1))
            for stat, header in cls._progress_columns
            for fmt in ["0.2f" if stat == "accept" else "0.3g"]
        ]
        stats = {stat: [0.0] * n_chains for stat, _ in cls._progress_columns}
        return columns, stats

    @classmethod
    def _make_progressbar_update_functions(cls):
        keys = [stat for stat, _ in cls._progress_columns]

        def update_stats(step_stats):
            return {key: step_stats[key] for key in keys}

        return (update_stats,)
