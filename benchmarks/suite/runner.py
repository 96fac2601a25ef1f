"""Run samplers on the suite's models and measure them with ``pm.sample(step=Step())``.

One run = one sampler on one model: a fresh model with the counting potential of
:mod:`pymc_kameleon.models.counting`, the step built in the model context, then
``pm.sample(draws, tune, chains, cores=1, step=step, random_seed=seed)`` with PyMC's other
defaults (``progressbar`` and ``compute_convergence_checks`` off: they only cost time).
Chains run one after the other in this process (``cores=1``) so that the counter sees every
evaluation of every chain.  ``wall`` is the time from building the step to the end of
``pm.sample`` (for NUTS, ``pm.sample`` builds and initialises the step itself), so work a
step does in its constructor is counted too.  Nothing of a step's internals is used.  The
first PyTensor compilation of a process also sets up the compiler itself (about 0.8 s on the
project's machine with PyTensor 2); :func:`warm_up` does that once, untimed, before the first
run, so that it is not charged to whichever sampler happens to run first.
"""

from __future__ import annotations

import contextlib
import signal
import time
import traceback
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import pymc as pm

from pymc_kameleon import KernelHMCStep, RandomWalkStep
from pymc_kameleon.compat import smc_stat_per_chain as per_chain
from pymc_kameleon.models.counting import add_counter

from ..common import SAMPLERS as COMMON_SAMPLERS
from ..common import SamplerSpec, quiet_pymc
from .metrics import accuracy, diagnostics, stack_posterior
from .models import ModelSpec, free_var_labels
from .reference import Reference, tail_quantiles

__all__ = ["DEFAULT_SAMPLERS", "SAMPLERS", "RunResult", "emulator_warned", "run_one", "warm_up"]


def _rw():
    return RandomWalkStep()


def _khmc():
    return KernelHMCStep()


#: Samplers in table order: ours (every one with its defaults), then PyMC's; the keys are
#: the names of ``--steps``.  ``khmc-lite`` (the other surrogate) is run only on request.
SAMPLERS: dict[str, SamplerSpec] = {
    **{k: COMMON_SAMPLERS[k] for k in ("kamh", "fkamh")},
    "khmc": SamplerSpec("khmc", "KernelHMCStep", _khmc, ours=True),
    "khmc-lite": COMMON_SAMPLERS["khmc-lite"],
    "rw": SamplerSpec("rw", "RandomWalkStep", _rw, ours=True),
    **{k: COMMON_SAMPLERS[k] for k in ("metropolis", "demz", "slice")},
    "nuts": SamplerSpec("nuts", "NUTS", None, gradient=True),
    # PyMC's other answer for a black-box model: its defaults (2000 particles per chain,
    # IMH kernel) with the suite's chains; ``tune`` and ``draws`` do not apply
    "smc": SamplerSpec("smc", "pm.sample_smc", None, smc=True),
}
#: The samplers run when ``--steps`` is not given.
DEFAULT_SAMPLERS = tuple(k for k in SAMPLERS if k != "khmc-lite")


@dataclass
class RunResult:
    """Measurements of one sampler on one model (all chains together).

    ``evals`` counts log-density evaluations over step construction and ``pm.sample``
    (NUTS: evaluations of logp and gradient together); ``wall`` is the time of both;
    ``accuracy`` holds :meth:`~benchmarks.suite.metrics.Accuracy.to_dict`.
    ``error`` is set (and the metrics are missing) when the run failed; ``skipped`` when it
    was not run.  ``stat_evals_per_draw`` is the mean of the step's own ``n_evals`` sample
    stat over the kept draws, when the step reports one (a cross-check of the counter, not
    relied on).  ``screen_active`` and ``screen_stage1``, when the step reports the surrogate
    screen's stats: the share of chains whose screen was active at the first kept draw (it is
    frozen at the end of tuning) and the mean fraction of screened iterations that passed its
    first stage over the kept draws.  ``tail_quantiles``: the 0.1 % and 99.9 % quantiles per
    scalar (shape ``(2, d)``, as in an MCMC reference's meta), to judge tails beside sds;
    ``quantiles``: the 1 % and 99 % quantiles, likewise (less noisy in a short run or
    reference).  ``chain_means``: each chain's mean per scalar (shape ``(chains, d)``), for
    the ESS from the spread of independent chains (:func:`~.metrics.spread_ess`).
    ``emulator_warned``, for steps with ``emulator=``: whether the run told its user
    something (a chain fell back, or :func:`~pymc_kameleon.steps.emulated.run_warnings`
    has a message), which the suite's silenced warnings would hide.
    """

    model: str
    sampler: str
    tune: int
    draws: int
    chains: int
    seed: int
    wall: float = float("nan")
    build_seconds: float = float("nan")
    evals: int = 0
    accept: float = float("nan")
    divergences: int | None = None
    nuts_steps: int | None = None
    stat_evals_per_draw: float | None = None
    screen_active: float | None = None
    screen_stage1: float | None = None
    accuracy: dict = field(default_factory=dict)
    tail_quantiles: list | None = None
    quantiles: list | None = None
    chain_means: list | None = None
    emulator_warned: bool | None = None
    error: str | None = None
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        """A run that produced metrics."""
        return self.error is None and self.skipped is None and bool(self.accuracy)

    @property
    def iterations(self) -> int:
        return self.chains * (self.tune + self.draws)

    @property
    def evals_per_iteration(self) -> float:
        return self.evals / self.iterations if self.iterations else float("nan")

    @property
    def ess_per_second(self) -> float:
        """Min bulk ESS per second of wall time (tuning included)."""
        return self.accuracy["min_ess_bulk"] / self.wall if self.ok else float("nan")

    @property
    def ess_per_1k_evals(self) -> float:
        """Min bulk ESS per 1000 log-density evaluations (tuning included)."""
        return 1000.0 * self.accuracy["min_ess_bulk"] / max(self.evals, 1) if self.ok \
            else float("nan")

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(evals_per_iteration=self.evals_per_iteration,
                   ess_per_second=self.ess_per_second, ess_per_1k_evals=self.ess_per_1k_evals)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> RunResult:
        """Inverse of :meth:`to_dict` (derived fields are recomputed)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


class RunTimeout(Exception):
    """A run exceeded ``--timeout``."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def _raise(signum, frame):
        raise RunTimeout(f"exceeded {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _stat_mean(stats, names: tuple[str, ...]) -> float:
    for name in names:
        if name in stats:
            return float(np.nanmean(np.asarray(stats[name].values, dtype=float)))
    return float("nan")


_WARMED_UP = False


def warm_up() -> None:
    """Compile and call a one-variable model's log density, once per process (untimed).

    Measured before this existed (Python 3.11, PyTensor 2.38): building ``KameleonStep`` on
    eight-schools-nc took 0.85-1.2 s as the first run of a process and 0.16 s after any other
    compilation; the wall time on the suite page had charged it to that one run.
    """
    global _WARMED_UP
    if _WARMED_UP:
        return
    with pm.Model() as tiny:
        pm.Normal("z", 0.0, 1.0)
    tiny.compile_logp()(tiny.initial_point())
    _WARMED_UP = True


def emulator_warned(stats) -> bool:
    """Whether a run of steps with ``emulator=`` warned its user: a chain fell back
    (stat ``emulator_phase``) or the finished run's checks have a message."""
    from pymc_kameleon.steps.emulated import EMULATOR_PHASES, run_warnings

    fallback = EMULATOR_PHASES.index("fallback")
    return bool(np.any(np.asarray(stats["emulator_phase"].values) == fallback)
                or run_warnings(stats))


def run_one(spec: ModelSpec, sampler: str, reference: Reference, tune: int, draws: int,
            chains: int, seed: int, timeout: float | None = None) -> RunResult:
    """Run ``sampler`` on ``spec`` and compare with ``reference``; never raises.

    Errors (including ``timeout``) are recorded in :attr:`RunResult.error`.
    """
    quiet_pymc()
    sampler_spec = SAMPLERS[sampler]
    result = RunResult(spec.name, sampler, tune, draws, chains, seed)
    if sampler_spec.gradient and not spec.has_gradient:
        result.skipped = "no gradient"
        return result
    try:
        warm_up()
        with _time_limit(timeout):
            model = spec.factory()
            counter = add_counter(model)
            names, labels = free_var_labels(model)
            if labels != reference.labels:
                raise ValueError(f"reference labels {reference.labels[:3]}... do not match "
                                 f"the model's {labels[:3]}...")
            counter.reset()
            start = time.perf_counter()
            with model:
                step = sampler_spec.make_step() if sampler_spec.make_step else None
                result.build_seconds = time.perf_counter() - start
                if sampler_spec.smc:
                    idata = pm.sample_smc(chains=chains, cores=1, random_seed=seed,
                                          progressbar=False, compute_convergence_checks=False)
                else:
                    idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=1,
                                      step=step, random_seed=seed, progressbar=False,
                                      compute_convergence_checks=False)
            result.wall = time.perf_counter() - start
            result.evals = counter.count
        stats = idata.sample_stats
        result.accept = _stat_mean(stats, ("accepted", "acceptance_rate", "accept"))
        if "n_evals" in stats:
            result.stat_evals_per_draw = _stat_mean(stats, ("n_evals",))
        if "screen_active" in stats:
            result.screen_active = _stat_mean(stats.isel(draw=0), ("screen_active",))
            result.screen_stage1 = _stat_mean(stats, ("screen_stage1",))
        if "emulator_phase" in stats:
            result.emulator_warned = emulator_warned(stats)
        if sampler_spec.smc:  # per stage; ragged when the chains ran different numbers
            result.accept = float(np.mean(np.concatenate(
                per_chain(stats["accept_rate"].values, chains,
                          stats.attrs.get("chain_stages")))))
        if sampler_spec.gradient:
            result.divergences = int(np.asarray(stats["diverging"].values).sum())
            result.nuts_steps = int(np.asarray(stats["n_steps"].values).sum())
        draws = stack_posterior(idata.posterior, names)
        result.tail_quantiles = tail_quantiles(draws)
        result.quantiles = tail_quantiles(draws, (0.01, 0.99))
        result.chain_means = draws.mean(axis=1).tolist()
        diag = diagnostics(draws)
        result.accuracy = accuracy(diag, reference.mean, reference.sd, labels).to_dict()
    except Exception as err:  # one failing run must not abort the suite
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        result.error = last[:300]
    return result
