"""Kernel adaptive SMC (KASMC): a KAMH mutation kernel for ``pm.sample_smc``.

``pm.sample_smc(kernel=KameleonSMC)`` keeps PyMC's adaptive tempering, systematic
resampling and log marginal likelihood estimate, and replaces only the mutation: at each
stage every particle runs exact Metropolis-Hastings steps for the tempered posterior with
a mixture of the KAMH proposal and an independent Gaussian-mixture proposal, both built
from the stage's particle system (see ``docs/smc.md``).

References
----------
- Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Section 5.2.1.
- Schuster, Strathmann, Paige, Sejdinovic (2017). Kernel Sequential Monte Carlo.
  ECML-PKDD.
- Sejdinovic, Strathmann, Lomeli Garcia, Andrieu, Gretton (2014). Kernel Adaptive
  Metropolis-Hastings. ICML.
"""

from __future__ import annotations

import pickle
import uuid
import warnings
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from pymc.blocking import DictToArrayBijection
from pymc.model import modelcontext
from pymc.pytensorf import floatX
from pymc.smc.kernels import SMC_KERNEL, Pearson, SMCSettings, SMCStats

from .batch import BatchEvaluator, dumps
from .math.importance import kish_ess, mixture_log_weights, resample_indices
from .math.kamh import kamh_grams, kamh_proposals
from .math.kernels import median_heuristic
from .math.linalg import safe_cholesky
from .math.mixture import GaussianMixture
from .pseudo_marginal import reseed_estimators
from .run_settings import RunSettings

__all__ = ["KameleonSMC", "check_proper_priors", "vectorised_logp"]

#: Target acceptance rate of the scale adaptation (thesis Section 5.3).
TARGET_ACCEPT = 0.234
#: Most rounds of the recycling top-up, each of at least ``draws`` points from a mixture
#: refitted to the weighted pool (measured: docs/benchmarks/smc.md, "Against samplers
#: outside PyMC").
TOP_UP_ROUNDS = 8


def check_proper_priors(model=None) -> None:
    """Raise if a free variable has a flat (improper) prior, which SMC cannot start from.

    SMC draws its first particles from the prior and tempers from it; a ``pm.Flat`` or
    ``pm.HalfFlat`` prior has no draws and no normalising constant (PyMC fails later with
    "Cannot sample from flat variable").

    Raises
    ------
    ValueError
        Naming every such variable and what to give it instead.
    """
    model = modelcontext(model)
    flat = [
        rv.name for rv in model.free_RVs
        if type(rv.owner.op).__name__ in ("FlatRV", "HalfFlatRV")
    ]
    if flat:
        raise ValueError(
            f"KameleonSMC starts from the prior, but {', '.join(map(repr, flat))} "
            f"{'has' if len(flat) == 1 else 'have'} a flat (improper) prior, which cannot be "
            "sampled and has no evidence. Give each a proper prior that covers the plausible "
            "values (e.g. pm.Normal(name, 0, 10) instead of pm.Flat, pm.HalfNormal(name, 10) "
            "instead of pm.HalfFlat), or keep the flat prior and sample with pm.sample and a "
            "step method such as pymc_kameleon.KameleonStep (see docs/smc.md)."
        )


def _value_transforms(model) -> dict[str, str]:
    """The transform's name of every free variable, by its value variable's name."""
    out = {}
    for rv in model.free_RVs:
        transform = model.rvs_to_transforms.get(rv)
        out[model.rvs_to_values[rv].name] = (
            "none" if transform is None else type(transform).__name__.lower())
    return out


def _sortable_ordered(model) -> dict[str, tuple]:
    """Free variables under an ``ordered`` transform whose prior draws can simply be sorted.

    PyMC draws the prior without the ordering constraint, so the transformed draws are NaN.
    For a prior that is iid along the ordered axis (every parameter broadcast along it),
    drawn independently of the other free variables and on which none of them depends,
    sorted iid draws are exact draws of the ordered prior (the order statistics).
    """
    from pymc.distributions.transforms import Ordered

    try:
        from pytensor.graph.traversal import ancestors
    except ImportError:  # PyTensor < 2.32
        from pytensor.graph.basic import ancestors

    free = set(model.free_RVs)
    out = {}
    for rv in model.free_RVs:
        transform = model.rvs_to_transforms.get(rv)
        if not isinstance(transform, Ordered) or not hasattr(rv.owner.op, "dist_params"):
            continue
        params = rv.owner.op.dist_params(rv.owner)
        iid = all(p.type.ndim < rv.type.ndim or p.type.broadcastable[-1] for p in params)
        independent = not (set(ancestors(params)) & free)
        others = [o for o in model.free_RVs if o is not rv]
        no_children = rv not in set(ancestors([i for o in others for i in o.owner.inputs]))
        if iid and independent and no_children:
            out[model.rvs_to_values[rv].name] = (rv, transform)
    return out


def vectorised_logp(model, variables, compile_kwargs=None):
    """The prior and likelihood terms of a whole batch in one compiled call, or ``None``.

    Built with PyTensor's ``vectorize_graph`` where the log density is PyTensor throughout;
    ``None`` for discrete variables, likelihood estimators and black-box Ops (``as_op``,
    custom Ops), which are evaluated point by point, on the executor if there is one.
    """
    import pytensor.tensor as pt
    from pymc.pytensorf import compile as compile_fn
    from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
    from pymc.vartypes import discrete_types
    from pytensor.compile.ops import FromFunctionOp
    from pytensor.graph.replace import vectorize_graph
    from pytensor.tensor.blockwise import Blockwise

    try:
        from pytensor.graph.traversal import applys_between
    except ImportError:  # PyTensor < 2.32
        from pytensor.graph.basic import applys_between

    if any(v.dtype in discrete_types for v in variables):
        return None
    point = model.initial_point()
    shared = make_shared_replacements(point, variables, model)
    outs, vec = join_nonshared_inputs(point=point, outputs=[model.varlogp, model.datalogp],
                                      inputs=variables, shared_inputs=shared)
    try:
        mat = pt.matrix("particles", dtype=vec.dtype)
        batched = vectorize_graph(outs, {vec: mat})
    except Exception:  # an Op PyTensor cannot vectorise
        return None
    for node in applys_between([mat], batched):
        op = node.op.core_op if isinstance(node.op, Blockwise) else node.op
        if isinstance(op, FromFunctionOp) or not type(op).__module__.startswith(
                ("pytensor.", "pymc.")):
            return None  # a user's Op: one call per point, as it was written
    kwargs = {**(compile_kwargs or {}), "on_unused_input": "ignore"}
    return compile_fn([mat], pt.stack(batched, axis=1), **kwargs)


@dataclass
class _Chains:
    """The particles that move in a stage: whitened and raw positions, stored log densities
    (never re-evaluated: pseudo-marginal estimates stay with their point), the local
    proposals built at them and the independent mixture's log density there."""

    U: np.ndarray
    X: np.ndarray
    logp: np.ndarray
    prior: np.ndarray
    lik: np.ndarray
    q: Any
    g: np.ndarray

    @classmethod
    def start(cls, kernel: KameleonSMC, rows: np.ndarray, copy: bool) -> _Chains:
        """Chains at ``rows`` of the kernel's particles; without ``copy`` the kernel's own
        arrays, which the moves then update in place."""
        arrays = (kernel.tempered_posterior, kernel.tempered_posterior_logp, kernel.prior_logp,
                  kernel.likelihood_logp)
        X, logp, prior, lik = (a[rows] for a in arrays) if copy else arrays
        U = kernel._whiten(X)
        return cls(U, X, logp, prior, lik, kernel._proposals(U), kernel.q_ind.logpdf(U))

    def accept(self, accepted, U, X, q, g, logp, prior, lik) -> None:
        self.U[accepted] = U[accepted]
        self.q.replace(accepted, q)
        for mine, new in ((self.g, g), (self.X, X), (self.logp, logp), (self.prior, prior),
                          (self.lik, lik)):
            mine[accepted] = new[accepted]

    def states(self) -> tuple[np.ndarray, ...]:
        return self.X.copy(), self.logp.copy(), self.prior.copy(), self.lik.copy()


class _Recycled:
    """The evaluated draws of every stage's independent mixture, as one importance sample of
    the posterior with deterministic-mixture weights (Owen and Zhou, 2000):
    ``w(y) = prior(y) L(y) / sum_t (n_t / n) g_t(y)``, ``g_t`` the stage's mixture in the
    model's coordinates (whitened density over the whitening's determinant)."""

    def __init__(self):
        self.X, self.prior, self.lik = [], [], []
        self.stages: list[list] = []  # [mean, chol, mixture, n_t]

    @property
    def size(self) -> int:
        return sum(len(x) for x in self.X)

    def new_stage(self, mean: np.ndarray, chol: np.ndarray, mixture: GaussianMixture) -> None:
        self.stages.append([mean, chol, mixture, 0])

    def add(self, X: np.ndarray, prior: np.ndarray, lik: np.ndarray) -> None:
        self.X.append(np.array(X, dtype=float))
        self.prior.append(prior)
        self.lik.append(lik)
        self.stages[-1][3] += len(X)

    def weighted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Points, their prior and likelihood terms, and their log weights."""
        from scipy.linalg import solve_triangular

        X, prior, lik = (np.concatenate(a) for a in (self.X, self.prior, self.lik))
        log_g = [mix.logpdf(solve_triangular(L, (X - m).T, lower=True).T)
                 - np.sum(np.log(np.diag(L))) for m, L, mix, _ in self.stages]
        log_w = mixture_log_weights(prior + lik, log_g, [s[3] for s in self.stages])
        return X, prior, lik, log_w


def _defensive(mixture: GaussianMixture, share: float = 0.3,
               widen: float = 1.5) -> GaussianMixture:
    """The mixture with a ``share`` of its mass on copies ``widen`` times as wide: draws of a
    fitted mixture alone give a few huge weights where the posterior's tails are heavier."""
    return GaussianMixture(np.concatenate([(1 - share) * mixture.weights,
                                           share * mixture.weights]),
                           np.concatenate([mixture.means, mixture.means]),
                           np.concatenate([mixture.chols, widen * mixture.chols]))


def _finite_mean(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.mean(finite)) if len(finite) else np.nan


def _rise_se(logp: np.ndarray) -> float:
    """Standard error of a difference of two means of ``logp``'s finite values (``nan`` with
    fewer than two of them): the unit in which a stage's rise in log density is judged."""
    finite = logp[np.isfinite(logp)]
    return float(np.sqrt(2.0 / len(finite)) * np.std(finite)) if len(finite) >= 2 else np.nan


def _restore_kernel(cls, payload: bytes):
    kernel = cls.__new__(cls)
    kernel.__dict__.update(pickle.loads(payload))
    return kernel


class KameleonSMC(SMC_KERNEL):
    r"""Kernel adaptive SMC mutation kernel (KASMC) for :func:`pymc.sample_smc`.

    ``pm.sample_smc(kernel=KameleonSMC)`` keeps PyMC's tempering, resampling and evidence
    and replaces the mutation: every particle runs exact Metropolis-Hastings steps for the
    stage's tempered target, proposing from a Gaussian mixture fitted to the whitened
    particles (probability ``independent_weight``) or from the KAMH proposal built from a
    subsample of them.  Only the log density is used, once per proposal, and each particle's
    stored value is never re-evaluated (pseudo-marginal SMC).  How it works, what is exact
    and what it costs: ``docs/smc.md``.

    Parameters
    ----------
    gamma : float, default 0.1
        Isotropic part of the KAMH proposal, whitened units.
    n_subsample : int, default 500
        Particles in the KAMH subsample ``Z``.
    correlation_threshold : float, default 0.01
        PyMC's stopping rule for the MH steps of a stage.
    max_steps, min_steps : int, default 100 and 1
        Bounds on the MH steps of a stage.
    learning_rate : float, default 1.0
        Step of the ``log nu`` adaptation between stages.
    slowest_rule : bool, default False
        Also step while the slowest coordinate decorrelates.
    independent_weight : float, default 0.8
        Probability of a move from the fitted mixture (0: KAMH moves only).
    n_clusters, global_weight, em_iters : int, float, int, default 4, 0.1 and 30
        The mixture: k-means clusters refined by EM, plus the particles' Gaussian.
    refresh_fraction : float or None, default 0.9
        End a stage once this share of particles accepted a move from the mixture.
    stationarity : float or None, default 1.0
        Step while the particles' mean log density rose over the last three steps by more
        than this many standard errors (``None``: off).
    executor : concurrent.futures.Executor or dask.distributed.Client, optional
        Evaluate each batch of proposals on it (needs ``pm.sample_smc(cores=1)``).
    max_evals : int, optional
        Evaluation budget per chain; then straight to ``beta = 1``, with a warning.
    waste_free : bool or int, default False
        Waste-free stages with chains of ``P`` states (``True``: ``P`` chosen).
    recycle : int, optional
        Spend this many more evaluations on adaptive importance-sampling rounds after the
        last stage, and return this many draws resampled from the importance sample.
    vectorize : bool, default False
        One vectorised compiled call per batch where the model is PyTensor throughout.
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

    stats_dtypes_shapes: dict[str, tuple[type, list]] = {
        "log_marginal_likelihood": (float, []),
        "beta": (float, []),
        "accept_rate": (float, []),
        "n_steps": (int, []),
        "nu2": (float, []),
        "bandwidth": (float, []),
        "accept_local": (float, []),
        "accept_independent": (float, []),
        "n_nan": (int, []),
        "refreshed": (float, []),
        "n_evals": (int, []),
        "unique": (float, []),
        "drift": (float, []),
        "recycled_ess": (float, []),
        "log_evidence_recycled": (float, []),
    }

    def __init__(
        self,
        *args,
        gamma: float = 0.1,
        n_subsample: int = 500,
        correlation_threshold: float = 0.01,
        max_steps: int = 100,
        learning_rate: float = 1.0,
        slowest_rule: bool = False,
        independent_weight: float = 0.8,
        n_clusters: int = 4,
        global_weight: float = 0.1,
        refresh_fraction: float | None = 0.9,
        em_iters: int = 30,
        executor: Executor | None = None,
        max_evals: int | None = None,
        waste_free: bool | int = False,
        recycle: int | None = None,
        vectorize: bool = False,
        stationarity: float | None = 1.0,
        min_steps: int = 1,
        **kwargs,
    ):
        check_proper_priors(kwargs.get("model"))
        if gamma <= 0 or n_subsample < 2 or max_steps < 1 or not 0 <= independent_weight <= 1:
            raise ValueError("gamma must be > 0, n_subsample >= 2, max_steps >= 1 and "
                             "0 <= independent_weight <= 1")
        super().__init__(*args, **kwargs)
        if max_evals is not None and max_evals < 2 * self.draws:
            raise ValueError(
                f"max_evals={max_evals} cannot pay for the {self.draws} prior draws and one "
                f"stage's moves: give at least 2 * draws = {2 * self.draws}, or fewer draws")
        if waste_free is not True and waste_free is not False and (
                int(waste_free) < 2 or int(waste_free) > self.draws // 2):
            raise ValueError(f"waste_free must be True, False or a chain length P with "
                             f"2 <= P <= draws / 2, got {waste_free!r}")
        if recycle is not None and int(recycle) < 1:
            raise ValueError(f"recycle must be None or a number of draws >= 1, got {recycle!r}")
        self.recycle = None if recycle is None else int(recycle)
        self._pool: _Recycled | None = None
        self.recycled_ess = self.log_evidence_recycled = np.nan
        self.drift = np.nan
        self.executor = executor
        self.stationarity = None if stationarity is None else float(stationarity)
        self.min_steps = int(min_steps)
        self.max_evals = None if max_evals is None else int(max_evals)
        self.waste_free = waste_free
        self.n_evals = 0
        self.stage_evals = 0
        self._run = uuid.uuid4().hex  # travels with the kernel to every chain (RunSettings)
        self.unique = np.nan
        self._budget_warned = False
        model = modelcontext(kwargs.get("model"))
        self._transforms = _value_transforms(model)
        self._ordered = _sortable_ordered(model)
        self._start_from_prior(model)
        self._batched = (vectorised_logp(model, self.variables, kwargs.get("compile_kwargs"))
                         if vectorize else None)
        self.gamma = float(gamma)
        self.n_subsample = int(n_subsample)
        self.correlation_threshold = correlation_threshold
        self.max_steps = int(max_steps)
        self.learning_rate = float(learning_rate)
        self.slowest_rule = bool(slowest_rule)
        self.independent_weight = float(independent_weight)
        self.n_clusters = int(n_clusters)
        self.global_weight = float(global_weight)
        self.refresh_fraction = refresh_fraction
        self.em_iters = int(em_iters)
        self.log_nu = 0.0
        self.acc_local = np.nan
        self.acc_independent = np.nan
        self.n_nan = 0
        self._nan_warned = False
        self.acc_rate = np.nan
        self.n_steps = 0
        self.refreshed = np.nan
        self.nu2 = np.nan
        self.bandwidth = np.nan

    def _start_from_prior(self, model) -> None:
        """Every particle starts as a prior draw, also for variables with an ``initval``.

        PyMC's SMC starts all particles of such a variable at the initval, which the first
        reweighting treats as prior draws: the particles stay one point (sd 0) and look
        converged.  SMC's weights and evidence need prior draws.
        """
        given = [rv.name for rv, v in model.rvs_to_initial_values.items()
                 if v is not None and not isinstance(v, str)]
        if not given:
            return
        from pymc.initial_point import make_initial_point_expression

        self._prior_expression = make_initial_point_expression(
            free_rvs=model.free_RVs, rvs_to_transforms=model.rvs_to_transforms,
            initval_strategies={}, default_strategy="prior", return_transformed=True)
        warnings.warn(
            f"KameleonSMC starts every particle from the prior: the initval of "
            f"{', '.join(map(repr, given))} is not used (SMC's weights and evidence need prior "
            "draws; pass start= to choose the particles yourself).", UserWarning, stacklevel=3)

    # ------------------------------------------------------------------ PyMC hooks
    def set_rng(self, rng: np.random.Generator) -> None:
        """PyMC's per-chain generator swap, plus fresh seeds for likelihood estimators."""
        super().set_rng(rng)
        reseed_estimators(self.likelihood_logp_func, rng)

    def initialize_population(self) -> dict[str, np.ndarray]:
        """PyMC's prior draws, with iid ``ordered`` variables drawn and sorted (exact; see
        ``docs/smc.md``) instead of left unordered, whose transformed values are NaN."""
        import pymc as pm
        import pytensor.tensor as pt

        population = super().initialize_population()
        for name, (rv, transform) in self._ordered.items():
            x = np.sort(pm.draw(rv, draws=self.draws, random_seed=self.rng), axis=-1)
            if not getattr(transform, "ascending", True):
                x = x[..., ::-1]
            population[name] = transform.forward(pt.as_tensor(x)).eval()
        return population

    def _initialize_kernel(self) -> None:
        """PyMC's start (prior draws, or ``start``), its evaluations made as one batch on the
        executor.  PyMC's own version evaluates one point after the other in this process."""
        self._evaluator = BatchEvaluator((self.prior_logp_func, self.likelihood_logp_func),
                                         self.executor, batched=self._batched)
        init = self.start if self.start else self.initialize_population()
        population = [DictToArrayBijection.map({v.name: init[v.name][i]
                                                for v in self.variables}).data
                      for i in range(self.draws)]
        self.tempered_posterior = np.array(floatX(population))
        self.n_evals = self.stage_evals = 0
        self.prior_logp, self.likelihood_logp = self._evaluate_raw(self.tempered_posterior)

    def setup_kernel(self) -> None:
        """Reset the adaptation at the start of a chain; a NaN log density of a prior draw
        becomes ``-inf`` (zero weight at the first reweighting) with a warning, where
        PyMC's own kernels stop with "cannot convert float NaN to integer".  If most prior
        draws have no finite log density, stop with an error that names the variables."""
        self.log_nu = 0.0
        self.acc_rate = np.nan
        self.acc_local = np.nan
        self._nan_warned = False
        self._budget_warned = False
        self.n_nan = 0
        self._pool = None if self.recycle is None else _Recycled()
        self.recycled_ess = self.log_evidence_recycled = np.nan
        self._check_prior_draws()
        pl, ll = self._finite_or_reject(self.tempered_posterior, np.atleast_1d(self.prior_logp),
                                        np.atleast_1d(self.likelihood_logp), "prior draws")
        self.prior_logp, self.likelihood_logp = pl, ll

    def _check_prior_draws(self) -> None:
        """Stop when most starting particles have no finite log density: tempering would
        start from a handful of particles, or none, and return them looking converged."""
        finite = np.isfinite(self.prior_logp) & np.isfinite(self.likelihood_logp)
        if finite.mean() >= 0.5:
            return
        culprits, offset = [], 0
        for v in self.variables:
            size = self.var_info[v.name][1]
            bad = ~np.isfinite(self.tempered_posterior[:, offset:offset + size]).all(axis=1)
            offset += size
            if bad.mean() > 0.5:
                culprits.append(f"{v.name!r} (transform {self._transforms.get(v.name)}: "
                                f"{bad.mean():.0%} of its draws are not finite)")
        where = ("the starting points given as start=" if self.start else "PyMC's prior draws")
        hint = (
            "PyMC draws a prior without its transform's constraint (an `ordered` prior's draws "
            "are not ordered): give the variable a prior whose draws satisfy it (e.g. an iid "
            "prior with transform=ordered, which KameleonSMC sorts; or the cumulative sum of "
            "positive increments)" if culprits else
            "the prior puts most of its mass where the likelihood is not finite: make the "
            "prior narrower, or the likelihood return finite values there")
        raise ValueError(
            f"KameleonSMC: the log density is not finite at {np.sum(~finite)} of "
            f"{len(finite)} of {where}"
            + (f", because of {', '.join(culprits)}" if culprits else "")
            + f". SMC cannot start from them: {hint}.")

    def update_beta_and_weights(self) -> None:
        """PyMC's next temperature; once the evaluation budget cannot pay for another stage,
        straight to ``beta = 1`` by importance weights, with a warning."""
        if self._budget_left() >= self.draws:
            return super().update_beta_and_weights()
        from scipy.special import logsumexp

        self.iteration += 1
        log_w_un = (1.0 - self.beta) * self.likelihood_logp
        log_w = log_w_un - logsumexp(log_w_un)
        self.weights = np.exp(log_w) / np.exp(log_w).sum()
        self.log_marginal_likelihood += logsumexp(log_w_un) - np.log(self.draws)
        if not self._budget_warned:
            self._budget_warned = True
            warnings.warn(
                f"KameleonSMC: the evaluation budget max_evals={self.max_evals} is spent at "
                f"beta={self.beta:.3g}; the last stage reweights the particles straight to the "
                f"posterior (importance ESS {1 / np.sum(self.weights**2):.0f} of "
                f"{self.draws}) without moving them. The draws and the evidence are then "
                "rough: raise max_evals, or use fewer draws.", RuntimeWarning, stacklevel=2)
        self.beta = 1.0

    def tune(self) -> None:
        """Whitening, subsample ``Z``, bandwidth and ``nu^2`` of the stage; adapt ``log nu``."""
        if np.isfinite(self.acc_local):
            self.log_nu += self.learning_rate * (self.acc_local - TARGET_ACCEPT)
        X = self.tempered_posterior
        self._set_whitening(X)
        U = self._whiten(X)
        n = min(self.n_subsample, len(U))
        self.Z = U[self.rng.choice(len(U), size=n, replace=False)]
        s = median_heuristic(self.Z)
        self.bandwidth = s if s > 0 else 1.0
        # base so that the kernel part's mean trace is 2.38^2 at (a subset of) the particles
        grams = kamh_grams(U[: min(len(U), 100)], self.Z, self.bandwidth)
        trace = float(np.mean(np.trace(grams, axis1=1, axis2=2)))
        base = 2.38**2 / trace if trace > 0 else 1.0
        self.nu2 = base * np.exp(2.0 * self.log_nu)
        self.q_ind = self._fit_mixture(U)
        if self._pool is not None:
            self._pool.new_stage(self.mean, self.chol, self.q_ind)

    def mutate(self) -> None:
        """Exact MH steps for every particle with the stage's mixture proposal (vectorised).

        Waste-free (``waste_free``): ``M = draws / P`` of the resampled particles run ``P - 1``
        steps each and all ``M P`` states are kept (Dau and Chopin, 2022).
        """
        P = self._chain_length()
        N = self.draws
        rows = np.arange(N) if P is None else self.rng.choice(N, -(-N // P), replace=False)
        chains = _Chains.start(self, rows, copy=P is not None)
        kept = [chains.states()]
        corr = Pearson(self.tempered_posterior) if P is None else None
        old_corr = np.full(self.tempered_posterior.shape[1], 2.0)
        acc_probs, is_global = [], []
        refreshed = np.zeros(len(rows), dtype=bool)  # accepted an independent proposal
        levels = [_finite_mean(chains.logp)]
        self.n_steps = 0
        while self.n_steps < self.max_steps and self._budget_left() >= len(rows):
            acc, glob, accepted = self._mh_step(chains)
            acc_probs.append(acc)
            is_global.append(glob)
            refreshed |= accepted & glob
            self.n_steps += 1
            levels.append(_finite_mean(chains.logp))
            if P is not None:
                kept.append(chains.states())
                if len(kept) * len(rows) >= N:
                    break
                continue
            pearson_r = np.nan_to_num(corr.get(self.tempered_posterior))
            done = not self._keep_going(old_corr, pearson_r) or self._refreshed(refreshed)
            # keep moving a collapsed system, or one whose mean log density still rises
            # (the particles have not reached the stage's target; docs/smc.md)
            done = done and self.n_steps >= self.min_steps
            if done and self._unique_fraction() >= 0.5 and not self._rising(chains.logp, levels):
                break
            old_corr = pearson_r
        if P is not None:
            self._keep_states(kept)
        self.drift = self._drift(levels, chains.logp)
        self.unique = self._unique_fraction()
        self.refreshed = float(np.mean(refreshed))
        acc = np.concatenate(acc_probs) if acc_probs else np.array([])
        glob = np.concatenate(is_global) if is_global else np.array([], dtype=bool)
        self.acc_rate = float(np.mean(acc)) if acc.size else np.nan
        self.acc_local = float(np.mean(acc[~glob])) if np.any(~glob) else np.nan
        self.acc_independent = float(np.mean(acc[glob])) if np.any(glob) else np.nan
        if self.beta >= 1 and self.drift > 3:
            warnings.warn(
                f"KameleonSMC: the particles were still moving toward the posterior when the "
                f"last stage ended: their mean log density rose by {self.drift:.1f} standard "
                f"errors after the first of its {self.n_steps} MH steps. The draws are not yet "
                "from the posterior (typical of strongly correlated posteriors): give every "
                "stage more MH steps (min_steps=25) and check R-hat across chains.",
                RuntimeWarning, stacklevel=2)
        if self.beta >= 1 and self._pool is not None:
            self._output_recycled()
        elif self.beta >= 1 and self.unique < 0.5:
            warnings.warn(
                f"KameleonSMC: only {self.unique:.0%} of the final particles are distinct "
                f"after {self.n_steps} MH steps (acceptance {self.acc_rate:.2g}): the "
                "particle system has collapsed and its draws understate the posterior's "
                "spread. Raise max_steps or draws, or check the model.",
                RuntimeWarning, stacklevel=2)

    def _mh_step(self, chains: _Chains) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One MH step of every chain; returns acceptance probabilities, which proposals
        came from the independent mixture, and which were accepted."""
        n = len(chains.U)
        glob = self.rng.random(n) < self.independent_weight
        U_prop = chains.q.sample(self.rng)
        U_prop[glob] = self.q_ind.sample(int(glob.sum()), self.rng)
        q_prop = self._proposals(U_prop)
        g_prop = self.q_ind.logpdf(U_prop)
        X_prop = floatX(self._unwhiten(U_prop))
        pl, ll = self._evaluate(X_prop)
        if self._pool is not None:
            self._pool.add(X_prop[glob], pl[glob], ll[glob])
        prop_logp = pl + ll * self.beta
        log_ratio = self._log_ratio(prop_logp, chains.logp, chains.U, U_prop, chains.q, q_prop,
                                    chains.g, g_prop)
        accepted = np.log(self.rng.random(n)) < log_ratio
        chains.accept(accepted, U_prop, X_prop, q_prop, g_prop, prop_logp, pl, ll)
        return np.exp(np.minimum(log_ratio, 0.0)), glob, accepted

    def _keep_states(self, kept: list[tuple]) -> None:
        """The waste-free particle system: every chain's states, step after step, the first
        ``draws`` of them (each is a state of an MH chain for the stage's target)."""
        X, logp, pl, ll = (np.concatenate(a)[: self.draws] for a in zip(*kept, strict=True))
        self.tempered_posterior = X
        self.tempered_posterior_logp, self.prior_logp, self.likelihood_logp = logp, pl, ll

    def _output_recycled(self) -> None:
        """The posterior as ``recycle`` draws resampled from the importance sample of every
        stage's independent proposals, topped up in rounds from refitted mixtures."""
        pool = self._pool
        # R new evaluations whatever the stages' pool holds: a stage pool's Kish ESS is a
        # small share of its size, a round's nearly all of it (docs/benchmarks/smc.md)
        extra = int(min(self.recycle, self._budget_left()))
        # adaptive importance sampling: each round refits the mixture to the weighted pool
        rounds = int(np.clip(extra // max(self.draws, 1), 1, TOP_UP_ROUNDS))
        for k in range(rounds if extra > 0 else 0):
            if k > 0:
                X, _, _, log_w = pool.weighted()
                self._refit(X, log_w)
            top_up = _defensive(self.q_ind)
            pool.new_stage(self.mean, self.chol, top_up)
            n = extra // rounds + (k < extra % rounds)
            X = floatX(self._unwhiten(top_up.sample(n, self.rng)))
            pool.add(X, *self._evaluate(X))
        X, prior, lik, log_w = pool.weighted()
        if not np.isfinite(log_w).any():
            warnings.warn("KameleonSMC: no recycled draw has a finite weight; the particles "
                          "are returned instead", RuntimeWarning, stacklevel=3)
            return
        from scipy.special import logsumexp

        self.recycled_ess = kish_ess(log_w)
        self.log_evidence_recycled = float(logsumexp(log_w) - np.log(len(log_w)))
        idx = resample_indices(log_w, self.recycle, self.rng)
        self.tempered_posterior = X[idx]
        self.prior_logp, self.likelihood_logp = prior[idx], lik[idx]
        self.tempered_posterior_logp = self.prior_logp + self.likelihood_logp

    def _refit(self, X: np.ndarray, log_w: np.ndarray) -> None:
        """Whitening and independent mixture refitted to ``draws`` points resampled from the
        weighted pool; kept as they are while the pool's Kish ESS is below ``10 d`` (a fit to
        fewer distinct points would be too narrow)."""
        if not np.isfinite(log_w).any() or kish_ess(log_w) < 10 * X.shape[1]:
            return
        Xr = X[resample_indices(log_w, self.draws, self.rng)]
        self._set_whitening(Xr)
        self.q_ind = self._fit_mixture(self._whiten(Xr))

    def _set_whitening(self, X: np.ndarray) -> None:
        """Mean and Cholesky factor of the covariance of ``X`` (the whitening)."""
        self.mean = X.mean(axis=0)
        cov = np.atleast_2d(np.cov(X, rowvar=False, ddof=0))
        if not np.all(np.isfinite(cov)):
            raise ValueError('Sample covariances not valid! Likely "draws" is too small!')
        self.chol = safe_cholesky(cov + 1e-10 * np.mean(np.diag(cov)) * np.eye(len(cov)))[0]

    def _fit_mixture(self, U: np.ndarray) -> GaussianMixture:
        """The independent proposal: a Gaussian mixture fitted to whitened points ``U``."""
        return GaussianMixture.fit_clusters(U, self.n_clusters, self.rng, self.global_weight,
                                            self.em_iters)

    def _chain_length(self) -> int | None:
        """``P`` of waste-free SMC (``None``: off).  ``True`` gives chains of about 20 steps
        while keeping ``M = draws / P`` at least ``max(100, 10 d)`` (the mixture's fit)."""
        if self.waste_free is False:
            return None
        if self.waste_free is True:
            d = len(self.tempered_posterior[0]) if len(self.tempered_posterior) else 1
            return int(np.clip(self.draws // max(100, 10 * d), 2, 20))
        return int(self.waste_free)

    def _rising(self, logp: np.ndarray, levels: list[float]) -> bool:
        """The particles' mean tempered log density rose over the last (up to) three steps
        by more than ``stationarity`` standard errors of such a difference: the particles
        are still on their way to the stage's target (measured: docs/benchmarks/smc.md)."""
        if self.stationarity is None or len(levels) < 2:
            return False
        rise = levels[-1] - levels[max(0, len(levels) - 4)]
        return bool(rise > self.stationarity * _rise_se(logp))

    @staticmethod
    def _drift(levels: list[float], logp: np.ndarray) -> float:
        """Rise of the particles' mean log density after the stage's first MH step, in
        standard errors of such a difference (about 0 once the particles have reached the
        stage's target)."""
        se = _rise_se(logp)
        if len(levels) < 3 or not se > 0:
            return 0.0
        return float((levels[-1] - levels[1]) / se)

    def _unique_fraction(self) -> float:
        return len(np.unique(self.tempered_posterior, axis=0)) / len(self.tempered_posterior)

    def _budget_left(self) -> float:
        return np.inf if self.max_evals is None else self.max_evals - self.n_evals

    def sample_stats(self) -> SMCStats:
        # per stage; the first also counts the prior draws
        n_nan, self.n_nan = self.n_nan, 0
        n_evals, self.stage_evals = self.stage_evals, 0
        return {
            "log_marginal_likelihood": self.log_marginal_likelihood if self.beta == 1 else np.nan,
            "beta": self.beta,
            "accept_rate": self.acc_rate,
            "n_steps": self.n_steps,
            "nu2": self.nu2,
            "bandwidth": self.bandwidth,
            "accept_local": self.acc_local,
            "accept_independent": self.acc_independent,
            "n_nan": n_nan,
            "refreshed": self.refreshed,
            "n_evals": n_evals,
            "unique": self.unique,
            "drift": self.drift,
            "recycled_ess": self.recycled_ess,
            "log_evidence_recycled": self.log_evidence_recycled,
        }

    @staticmethod
    def _progressbar_config(n_chains: int = 1):
        """PyMC's SMC progress bar columns, plus the chain's evaluations so far."""
        from rich.progress import TextColumn
        from rich.table import Column

        columns = [
            TextColumn("{task.fields[beta]:.4f}", table_column=Column("Beta", ratio=1)),
            TextColumn("{task.fields[evals]}", table_column=Column("Evals", ratio=1)),
        ]
        return columns, {"beta": [0.0] * n_chains, "evals": ["-"] * n_chains}

    def _make_progressbar_update_functions(self):
        """The evaluations are known where the chain runs in this process (``cores=1``, the
        way to use an executor); chains in PyMC's worker processes show "-"."""

        def update_stats(stats):
            evals = f"{self.n_evals:,}" if hasattr(self, "_evaluator") else "-"
            return {"beta": stats.get("beta", 0.0), "evals": evals}

        return (update_stats,)

    def sample_settings(self) -> SMCSettings:
        # attrs of sample_stats; n_evals_total: every chain's evaluations (RunSettings)
        return RunSettings(self._run, self.n_evals, {
            "_n_draws": self.draws,
            "threshold": self.threshold,
            "_n_tune": self.n_steps,
            "correlation_threshold": self.correlation_threshold,
            "gamma": self.gamma,
            "n_subsample": self.n_subsample,
            "max_steps": self.max_steps,
            "independent_weight": self.independent_weight,
            # attrs of sample_stats: NaN, not None, so InferenceData saves to netCDF
            "refresh_fraction": (np.nan if self.refresh_fraction is None
                                 else self.refresh_fraction),
            "max_evals": np.nan if self.max_evals is None else self.max_evals,
            "waste_free": self._chain_length() or 0,
            "recycle": 0 if self.recycle is None else self.recycle,
            "executor": "none" if self.executor is None else type(self.executor).__name__,
        })

    def __reduce__(self):
        if self.executor is not None:  # an executor does not travel to another process
            raise TypeError(
                "KameleonSMC(executor=...) evaluates each chain's particles on the executor and "
                "cannot be sent to pm.sample_smc's chain processes: pass cores=1 (the chains "
                "then run one after the other, each on every worker of the executor)")
        # pm.sample_smc(cores > 1) cloudpickles the kernel with its compiled functions;
        # as_op/wrap_py Ops defined in __main__ travel by value (docs/smc.md)
        return _restore_kernel, (type(self), dumps(self.__dict__))

    # ------------------------------------------------------------------ helpers
    def _keep_going(self, old_corr: np.ndarray, corr: np.ndarray) -> bool:
        """PyMC's rule (90 % of the coordinates' correlations with the stage's start fell by
        more than ``correlation_threshold`` in the last step), or the slowest coordinate's
        still falls that much: PyMC's rule alone stops once the easy coordinates have
        decorrelated, with the curved ones still stuck (measured in docs/benchmarks/smc.md)."""
        thr = self.correlation_threshold
        if np.mean((old_corr - corr) > thr) > 0.9:
            return True
        return self.slowest_rule and bool(np.max(old_corr) - np.max(corr) > thr)

    def _refreshed(self, refreshed: np.ndarray) -> bool:
        """At least ``refresh_fraction`` of the particles have accepted an independent
        proposal in this stage (each such particle is a new draw from the fitted mixture)."""
        f = self.refresh_fraction
        return f is not None and bool(np.mean(refreshed) >= f)

    def _log_ratio(self, prop_logp, cur_logp, U, U_prop, q_cur, q_prop, g_cur=None,
                   g_prop=None):
        """Full MH log ratio per particle with the mixture proposal's density both ways:
        ``w q_global(u*) + (1 - w) q_Z(u* | u)`` forward, the same with ``u`` and ``u*``
        swapped in reverse (``q_Z(u | u*)`` built at the proposal).  The linear whitening's
        Jacobian cancels; NaN counts as a rejection."""
        log_fwd, log_rev = q_cur.logpdf(U_prop), q_prop.logpdf(U)
        w = self.independent_weight
        if w > 0:
            with np.errstate(divide="ignore"):
                lw, l1w = np.log(w), np.log1p(-w)
            log_fwd = np.logaddexp(lw + g_prop, l1w + log_fwd)
            log_rev = np.logaddexp(lw + g_cur, l1w + log_rev)
        log_ratio = prop_logp - cur_logp + log_rev - log_fwd
        return np.where(np.isnan(log_ratio), -np.inf, log_ratio)

    def _whiten(self, X: np.ndarray) -> np.ndarray:
        from scipy.linalg import solve_triangular

        return solve_triangular(self.chol, (X - self.mean).T, lower=True).T

    def _unwhiten(self, U: np.ndarray) -> np.ndarray:
        return self.mean + U @ self.chol.T

    def _proposals(self, U: np.ndarray):
        return kamh_proposals(U, self.Z, self.bandwidth, self.gamma, self.nu2)

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One prior and one likelihood evaluation per point, NaN turned into ``-inf``."""
        return self._finite_or_reject(X, *self._evaluate_raw(X), "proposals")

    def _evaluate_raw(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The prior and likelihood terms at the rows of ``X`` (PyMC compiles them apart),
        as one batch on the executor; the likelihood estimators' seeds are drawn here."""
        seeds = (self.rng.integers(2**63, size=len(X)) if self._evaluator.has_estimators
                 else None)
        values = self._evaluator(X, seeds)
        self.n_evals += len(X)
        self.stage_evals += len(X)
        return values[:, 0], values[:, 1]

    def _finite_or_reject(self, X, pl, ll, what: str) -> tuple[np.ndarray, np.ndarray]:
        """NaN prior or likelihood terms become ``-inf`` (a rejection, or zero weight),
        counted in ``n_nan`` and reported once per chain (as the steps report NaN)."""
        bad = np.isnan(pl) | np.isnan(ll)
        if bad.any():
            self.n_nan += int(bad.sum())
            if not self._nan_warned:
                self._nan_warned = True
                warnings.warn(
                    f"KameleonSMC: the log density gave NaN at {int(bad.sum())} of "
                    f"{len(X)} {what} (beta={self.beta:.3g}; the first at {X[bad][0]!r}). "
                    "Each counts as log density -inf, so the particles sample the posterior "
                    "restricted to where the log density is finite (return -inf where the "
                    "density is zero).  Counts per stage: sample stat n_nan.",
                    RuntimeWarning, stacklevel=3)
        return np.where(bad, -np.inf, pl), np.where(bad, -np.inf, ll)
