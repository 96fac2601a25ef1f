"""Targets, sampler registry and the single-chain runner shared by the benchmark scripts.

Every run is one chain: one ``pm.sample(chains=1, cores=1)`` call with its own seed, timed and
counted on its own, so that per-chain results can be averaged (mean +- sd over chains).

* Gradient-free samplers (ours and PyMC's Metropolis, DEMetropolisZ, Slice) sample a
  :func:`pymc_kameleon.models.synthetic.counted_model` built from the NumPy log density; the
  counting Op's ``count`` is reset right before ``pm.sample`` and read right after it, so
  every evaluation made by ``pm.sample`` (tuning, draws, and the handful of initial-point
  checks) is counted.  PyMC's element-wise Metropolis evaluates the model twice per coordinate and
  iteration (``delta_logp`` computes ``logp(x*) - logp(x)``), which the count shows.
* NUTS samples the PyTensor model of the same target (it needs the gradient); its cost is the
  number of gradient (logp + gradient) evaluations, the sum of the ``n_steps`` stat over
  tuning and draws.
* Wall time is measured around ``pm.sample`` only (step construction and NUTS
  initialisation happen before), and includes tuning.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import arviz as az
import numpy as np
import pymc as pm

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep
from pymc_kameleon.compat import as_dataset, group_dataset
from pymc_kameleon.models import banana_model
from pymc_kameleon.models.synthetic import counted_model, flower_model
from pymc_kameleon.models.targets import (
    banana_coverage_error,
    banana_logp,
    banana_sample,
    flower_logp,
    flower_sample,
    quantile_coverage_error,
)

from .quiet import quiet_pymc  # re-exported: the scripts import it from here

__all__ = [
    "SAMPLERS",
    "STEP_CLASSES",
    "TARGETS",
    "ChainResult",
    "SamplerSpec",
    "Target",
    "fmt_mean_sd",
    "mean_sd",
    "run_chain",
    "summarize",
]

#: Size and seed of the exact flower reference sample for the quantile coverage error.
FLOWER_REFERENCE_SIZE = 200_000
FLOWER_REFERENCE_SEED = 20140621
#: Points of the first chain kept (thinned) for trace and pair plots.
TRACE_POINTS = 2000


# ------------------------------------------------------------------------------- targets
@dataclass(frozen=True)
class Target:
    """A synthetic target with exact answers and its paper settings.

    ``kind`` is ``"banana"`` (params ``b``, ``v``) or ``"flower"`` (``r0``, ``A``, ``w``,
    ``s``); ``tune`` and ``draws`` are the paper's burn-in and post-burn-in iterations.
    """

    key: str
    title: str
    kind: str
    dim: int
    params: dict
    tune: int
    draws: int

    def with_dim(self, dim: int) -> Target:
        """The same target in another dimension (tests use 2-d versions)."""
        return Target(self.key, self.title.replace(f"{self.dim}-d", f"{dim}-d"), self.kind,
                      int(dim), self.params, self.tune, self.draws)

    def numpy_logp(self) -> Callable[[np.ndarray], float]:
        """The NumPy log density (picklable partial)."""
        fn = banana_logp if self.kind == "banana" else flower_logp
        return functools.partial(fn, **self.params)

    def initval(self) -> np.ndarray:
        """Start of every chain: the origin (banana) or the tip of a petal (flower)."""
        x = np.zeros(self.dim)
        if self.kind == "flower":
            p = self.params
            x[0] = max(p["r0"] + p["A"], p["s"])
        return x

    def pymc_model(self) -> pm.Model:
        """The PyTensor model (has a gradient; used for NUTS)."""
        if self.kind == "banana":
            return banana_model(self.dim, **self.params)
        return flower_model(self.dim, **self.params)

    def exact_sample(self, n: int, seed: int) -> np.ndarray:
        """``n`` exact i.i.d. draws."""
        if self.kind == "banana":
            return banana_sample(n, dim=self.dim, rng=seed, **self.params)
        return flower_sample(n, dim=self.dim, rng=seed, **self.params)

    def coverage_error(self, X: np.ndarray) -> float:
        """Quantile coverage error at 0.1..0.9 (exact for the banana; flower: vs a reference)."""
        if self.kind == "banana":
            return banana_coverage_error(X, **self.params)
        return quantile_coverage_error(X, _flower_reference(self.dim, **self.params))


@functools.lru_cache(maxsize=4)
def _flower_reference(dim: int, **params) -> np.ndarray:
    # exact i.i.d. draws replace the cached long-MCMC reference suggested in issue #3
    return flower_sample(FLOWER_REFERENCE_SIZE, dim=dim, rng=FLOWER_REFERENCE_SEED, **params)


def _target(key, title, kind, params, tune, draws) -> Target:
    return Target(key, title, kind, 8, params, tune, draws)


#: The paper's synthetic experiments (Sejdinovic et al., 2014, Section 5.2), d = 8.
TARGETS: dict[str, Target] = {
    t.key: t
    for t in (
        _target("banana-moderate", "8-d banana B(0.03, 100)", "banana",
                {"b": 0.03, "v": 100.0}, 20_000, 20_000),
        _target("banana-strong", "8-d banana B(0.1, 100)", "banana",
                {"b": 0.1, "v": 100.0}, 40_000, 40_000),
        _target("flower", "8-d flower F(10, 6, 6, 1)", "flower",
                {"r0": 10.0, "A": 6.0, "w": 6.0, "s": 1.0}, 60_000, 60_000),
    )
}


# ------------------------------------------------------------------------------- samplers
@dataclass(frozen=True)
class SamplerSpec:
    """One sampler of the comparison.

    ``make_step`` is called inside the model context and returns the step method (``None``
    for NUTS, which is built by ``pm.init_nuts``, and for ``pm.sample_smc``: ``smc``).
    ``full_fraction`` < 1 runs the sampler with that fraction of the full-mode iterations
    (marked in the tables).
    """

    key: str
    label: str
    make_step: Callable[[], object] | None
    ours: bool = False
    gradient: bool = False
    full_fraction: float = 1.0
    smc: bool = False


#: Our step classes by their command-line keys, for scripts that build them with arguments.
STEP_CLASSES = {"kamh": KameleonStep, "fkamh": FastKameleonStep, "rw": RandomWalkStep,
                "khmc": KernelHMCStep}


def _kamh():
    return KameleonStep()


def _fkamh():
    return FastKameleonStep()


def _khmc_finite():
    return KernelHMCStep(surrogate="finite")


def _khmc_lite():
    return KernelHMCStep(surrogate="lite")


def _metropolis():
    return pm.Metropolis()  # PyMC default: element-wise updates of the vector


def _demz():
    return pm.DEMetropolisZ()


def _slice():
    return pm.Slice()


#: All samplers, in table order; keys are used on the command line and in result files.
SAMPLERS: dict[str, SamplerSpec] = {
    s.key: s
    for s in (
        SamplerSpec("kamh", "KameleonStep", _kamh, ours=True),
        SamplerSpec("fkamh", "FastKameleonStep", _fkamh, ours=True),
        SamplerSpec("khmc-finite", "KernelHMCStep finite", _khmc_finite, ours=True),
        SamplerSpec("khmc-lite", "KernelHMCStep lite", _khmc_lite, ours=True),
        SamplerSpec("metropolis", "pm.Metropolis", _metropolis),
        SamplerSpec("demz", "pm.DEMetropolisZ", _demz),
        SamplerSpec("slice", "pm.Slice", _slice),
        SamplerSpec("nuts", "NUTS (gradient)", None, gradient=True),
    )
}


# ------------------------------------------------------------------------------- runner
@dataclass
class ChainResult:
    """Metrics of one chain of one sampler on one target.

    ``evals`` counts log-density evaluations (gradient evaluations for NUTS) over the whole
    ``pm.sample`` call; ``wall`` is its wall time in seconds; ``ess`` is ArviZ's bulk ESS of
    the draws, minimised over dimensions; ``trace`` holds thinned draws of the first two
    coordinates (only when requested).
    """

    target: str
    sampler: str
    seed: int
    tune: int
    draws: int
    wall: float
    evals: int
    accept: float
    mean_norm: float
    coverage: float
    ess: float
    trace: np.ndarray | None = field(default=None, repr=False)

    @property
    def ess_per_second(self) -> float:
        """Min bulk ESS per second of ``pm.sample`` wall time (tuning included)."""
        return self.ess / self.wall

    @property
    def ess_per_1k_evals(self) -> float:
        """Min bulk ESS per 1000 (gradient) evaluations, tuning included."""
        return 1000.0 * self.ess / max(self.evals, 1)

    @property
    def evals_per_iteration(self) -> float:
        """Evaluations per iteration (tuning + draws)."""
        return self.evals / (self.tune + self.draws)

    def to_dict(self) -> dict:
        """JSON-ready metrics (without the trace)."""
        out = {k: v for k, v in asdict(self).items() if k != "trace"}
        out.update(ess_per_second=self.ess_per_second, ess_per_1k_evals=self.ess_per_1k_evals,
                   evals_per_iteration=self.evals_per_iteration)
        return out


def model_dim(model: pm.Model | None = None) -> int:
    """Number of scalars of the free variables of ``model`` (default: the model in
    context), the ``d`` of a step that samples all of them."""
    point = pm.modelcontext(model).initial_point()
    return int(sum(np.size(v) for v in point.values()))


def _sample(model, step, tune, draws, seed, **kwargs):
    with model:
        start = time.perf_counter()
        idata = pm.sample(draws=draws, tune=tune, chains=1, cores=1, step=step,
                          random_seed=seed, progressbar=False,
                          compute_convergence_checks=False, **kwargs)
        wall = time.perf_counter() - start
    return idata, wall


def run_chain(target: Target, sampler: str, seed: int, tune: int, draws: int,
              keep_trace: bool = False) -> ChainResult:
    """Run one chain of ``sampler`` on ``target`` and compute its metrics.

    Parameters
    ----------
    target : Target
    sampler : str
        A key of :data:`SAMPLERS`.
    seed : int
        ``random_seed`` of ``pm.sample`` (and of NUTS' jittered start).
    tune, draws : int
        PyMC's ``tune`` (burn-in, adaptation) and ``draws``.
    keep_trace : bool
        Keep about :data:`TRACE_POINTS` thinned draws of the first two coordinates.
    """
    quiet_pymc()
    spec = SAMPLERS[sampler]
    if spec.gradient:
        model = target.pymc_model()
        with model:
            initvals, step = pm.init_nuts(init="jitter+adapt_diag", chains=1,
                                          random_seed=seed, progressbar=False)
        idata, wall = _sample(model, step, tune, draws, seed, initvals=initvals[0],
                              discard_tuned_samples=False)
        stats = idata.sample_stats
        evals = int(stats["n_steps"].sum() + idata.warmup_sample_stats["n_steps"].sum())
        accept = float(stats["acceptance_rate"].mean())  # mean tree acceptance probability
    else:
        model, op = counted_model(target.numpy_logp(), target.dim, target.initval())
        with model:
            step = spec.make_step()
        op.count = 0
        idata, wall = _sample(model, step, tune, draws, seed)
        evals = op.count
        stats = idata.sample_stats
        accept = float(stats["accepted"].mean()) if "accepted" in stats else float("nan")
    X = idata.posterior["x"].values[0]  # (draws, dim)
    ess = float(as_dataset(az.ess(group_dataset(idata)[["x"]], method="bulk"))["x"].values.min())
    trace = None
    if keep_trace:
        thin = max(1, X.shape[0] // TRACE_POINTS)
        trace = np.array(X[::thin, :2])
    return ChainResult(
        target=target.key, sampler=sampler, seed=int(seed), tune=int(tune), draws=int(draws),
        wall=wall, evals=evals, accept=accept,
        mean_norm=float(np.linalg.norm(X.mean(axis=0))),
        coverage=float(target.coverage_error(X)), ess=ess, trace=trace,
    )


# ------------------------------------------------------------------------------- summaries
#: Metrics summarised over chains: (ChainResult attribute, table header).
METRICS: tuple[tuple[str, str], ...] = (
    ("accept", "acceptance"),
    ("mean_norm", "‖mean‖"),
    ("coverage", "coverage error"),
    ("ess", "min ESS"),
    ("ess_per_second", "ESS/s"),
    ("ess_per_1k_evals", "ESS/1000 evals"),
    ("evals_per_iteration", "evals/iter"),
    ("wall", "wall [s]"),
)


def mean_sd(values) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof=1``; 0 for a single value)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def fmt_mean_sd(mean: float, sd: float, digits: str = ".3g") -> str:
    """``"mean ± sd"`` for tables (``"mean"`` when ``sd`` is 0, ``"n/a"`` if not finite)."""
    if not np.isfinite(mean):
        return "n/a"
    return f"{mean:{digits}} ± {sd:.2g}" if sd > 0 else f"{mean:{digits}}"


def summarize(results: list[ChainResult]) -> dict[str, dict[str, tuple[float, float]]]:
    """Mean and standard deviation over chains of every metric, per sampler (table order).

    Returns ``{sampler: {metric: (mean, sd)}}``; ``sd`` is 0 for a single chain.
    """
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for key in SAMPLERS:
        runs = [r for r in results if r.sampler == key]
        if not runs:
            continue
        out[key] = {}
        for metric, _ in METRICS:
            out[key][metric] = mean_sd([getattr(r, metric) for r in runs])
    return out
