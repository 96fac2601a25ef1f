"""KameleonSMC, our steps and the black-box samplers outside PyMC, per log-density evaluation.

Every sampler runs on the same compiled PyMC log density and every call of it at one point is
one evaluation (prior draws, tuning, training and evidence computations included):

* ``kameleon``: ``pm.sample_smc(kernel=KameleonSMC, chains=C, cores=1)`` with ``--kameleon``
  settings; ``imh``: the same with PyMC's default kernel.  Counted by the suite's counting Op.
  ESS per chain from the spread of the chains' means (independent runs: reference variance /
  variance of the chain means), the honest measure for particle output.
* ``kamh-emu``, ``fkamh-emu``, ``rw-screen`` (``KameleonStep(emulator=True)``,
  ``FastKameleonStep(emulator=True)``, ``RandomWalkStep(screen=True)``) and the suite's
  samplers (``kamh``, ``fkamh``, ``rw``, ``metropolis``, ``nuts``, ...): ``pm.sample`` with
  ``--step-chains`` chains (PyMC's defaults: 4, tune 1000, draws 1000), one after the other.
  ESS: ArviZ's bulk ESS of all chains; the chains' means also enter the spread over seeds.
* ``nautilus``, ``dynesty``, ``pocomc``: nested and preconditioned SMC samplers on the unit
  cube, mapped to the model's space by the priors' inverse CDFs (models whose free variables
  have independent priors); ``emcee``: 32 walkers on the unconstrained space, started from
  prior draws, ``--emcee-steps`` steps, the first half discarded.  ESS: Kish's of the weights
  (nested, pocoMC), the draws over emcee's integrated autocorrelation time.
* ``pyvbmc``: variational Bayesian Monte Carlo on the unconstrained space (plausible bounds
  from the priors' 5 % and 95 % quantiles, PyMC's initial point), 4000 draws of its
  variational posterior, its ELBO as the log evidence; no per-run ESS (the draws are of an
  approximation): the spread of the runs' means over seeds measures them.

Models: the suite's (:data:`benchmarks.suite.models.MODELS`: ``pk``, ``hare-lynx`` (the
predator-prey ODE), ``eight-schools-nc``, ``regression`` (6-d, exact reference), ...) and
``mixture``, the separated 4-d mixture of :func:`benchmarks.smc.mixture_target`.

Per run: evaluations, ESS per 1000 evaluations (first), ESS per second, the largest mean and
0.05/0.95-quantile errors (reference sds), the sd ratios, the log evidence and wall time.  A
run that raises (e.g. PyVBMC at a non-finite log density, or a sampler not installed) is a
row ``failed: <error>`` with the evaluations made up to then, and the script goes on.  Per
model and sampler over seeds: R-hat across the runs' resampled draws and the ESS from the
spread of the runs' means (SMC's and the steps' chains are independent replicates).

Usage (issue 71's list: seeds 1-3, six SMC chains a seed; ``--json`` keeps every row)::

    python -m benchmarks.smc_compare \
        --models pk hare-lynx eight-schools-nc mixture regression \
        --samplers kameleon nautilus pocomc dynesty pyvbmc kamh kamh-emu fkamh-emu rw-screen \
        --seeds 1 2 3 --draws 1000 --chains 6 --kameleon '{"emulator": true}' \
        --json results.json

then the same with ``--samplers kameleon --kameleon '{"recycle": 20000}'`` for the stages
with recycling, and ``python -m benchmarks.emulator_workers`` for the speed-up of 1 to 8
workers on a model that waits 10 ms per evaluation.

Needs ``pip install nautilus-sampler dynesty emcee pocomc pyvbmc`` (pocoMC: a CPU torch
first).  Results: ``docs/benchmarks/smc.md`` (section "Against samplers outside PyMC") and
``docs/benchmarks/emulator.md``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.pytensorf import compile as compile_pymc
from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
from pytensor.graph.traversal import ancestors
from scipy.special import logsumexp

from pymc_kameleon import FastKameleonStep, KameleonSMC, KameleonStep, RandomWalkStep
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.compat import smc_stat_per_chain as per_chain
from pymc_kameleon.math.importance import kish_ess, resample_indices
from pymc_kameleon.models.counting import add_counter, find_counter

from .common import quiet_pymc
from .smc import SMC_REFERENCES, mixture_target
from .smc_reference import weighted_quantiles
from .suite.analytic import regression_posterior
from .suite.metrics import diagnostics, spread_ess, stack_posterior
from .suite.models import MODELS, free_var_labels
from .suite.reference import load_reference
from .suite.runner import SAMPLERS as RUNNER_SAMPLERS
from .suite.runner import warm_up

CRITERIA = {"rhat": 1.01, "ess": 400, "mean": 0.15, "sd": 0.15}
QUANTILES = (0.05, 0.95)


def model_factory(model_name: str) -> Callable[[], pm.Model]:
    """The factory of a model of this script: the suite's, or the separated mixture of
    :func:`benchmarks.smc.mixture_target` for ``"mixture"``."""
    return (lambda: mixture_target()[0]) if model_name == "mixture" else \
        MODELS[model_name].factory


class Reference:
    """Means, sds, tail quantiles and log evidence of a model's posterior: the suite's
    reference means and sds; quantiles and evidence from the importance-sampling reference of
    :mod:`benchmarks.smc_reference` (the suite keeps only 500 thinned draws, whose
    quantiles are too rough to judge a tail); for the mixture and the regression, exact."""

    def __init__(self, model_name: str):
        self.model = model_factory(model_name)()
        self.evaluations = Evaluations(self.model)
        if model_name == "regression":
            post = regression_posterior()
            self.mean, self.sd = post.moments()
            self.quantiles, self.log_z = post.quantiles(QUANTILES), post.log_z
            return
        if model_name == "mixture":
            rng = np.random.default_rng(0)
            comp = rng.random(10**6) < 0.3  # the exact mixture: 0.3 at -4, 0.7 at +4
            draws = rng.normal(size=(10**6, 4))
            draws[:, 0] += np.where(comp, -4.0, 4.0)
            self.mean, self.sd = draws.mean(0), draws.std(0)
            self.quantiles, self.log_z = np.quantile(draws, QUANTILES, axis=0), 0.0
            return
        ref, smc_ref = load_reference(model_name), SMC_REFERENCES.get(model_name, {})
        self.mean, self.sd = ref.mean, ref.sd
        self.log_z = smc_ref.get("log_z", np.nan)
        if smc_ref.get("quantile_levels") == list(QUANTILES):
            # elementwise monotone transforms: quantiles map through them
            self.quantiles = self.evaluations.x_from_y(np.array(smc_ref["quantiles"]))
        else:
            self.quantiles = np.quantile(ref.sample.reshape(-1, ref.sample.shape[-1]),
                                         QUANTILES, axis=0)


def _icdf(rv, u):
    """The prior's inverse CDF at ``u`` (PyMC's where it has one; the truncated normal's
    written out: PyMC does not implement it)."""
    if "truncated_normal" in str(rv.owner.op):
        mu, sigma, lower, upper = rv.owner.op.dist_params(rv.owner)
        phi = lambda z: 0.5 * (1 + pt.erf(z / np.sqrt(2.0)))  # noqa: E731
        a, b = phi((lower - mu) / sigma), phi((upper - mu) / sigma)
        return mu + sigma * np.sqrt(2.0) * pt.erfinv(2 * (a + u * (b - a)) - 1)
    return pm.icdf(rv, u)


class Evaluations:
    """The model's log density on the unit cube (nested samplers, pocoMC) and on the
    unconstrained space (emcee), counting every call at one point."""

    def __init__(self, model: pm.Model):
        point = model.initial_point()
        values = model.value_vars
        self.shapes = [point[v.name].shape for v in values]
        self.dim = int(sum(point[v.name].size for v in values))
        self.initial_y = np.concatenate([np.ravel(point[v.name]) for v in values])
        shared = make_shared_replacements(point, values, model)
        outs, y = join_nonshared_inputs(point, [model.datalogp, model.logp()], values, shared)
        self._lik = compile_pymc([y], outs[0])
        self._post = compile_pymc([y], outs[1])
        u, y2 = pt.dvector("u"), pt.dvector("y")
        to_y, to_x, back = [], [], []
        for v, ui, yi in zip(values, self._split(pt.clip(u, 1e-12, 1 - 1e-12)),
                             self._split(y2), strict=True):
            rv = model.values_to_rvs[v]
            if set(ancestors(rv.owner.inputs)) & set(model.free_RVs):
                raise NotImplementedError(f"{rv.name}'s prior depends on another variable: "
                                          "no unit-cube transform")
            x = _icdf(rv, ui)
            tr = model.rvs_to_transforms.get(rv)
            to_y.append((tr.forward(x, *rv.owner.inputs) if tr else x).ravel())
            to_x.append(x.ravel())
            back.append((tr.backward(yi, *rv.owner.inputs) if tr else yi).ravel())
        self._cube = pytensor.function([u], [pt.concatenate(to_y), pt.concatenate(to_x)])
        self._to_x = pytensor.function([y2], pt.concatenate(back))
        self.count = 0

    def _split(self, vec):
        out, i = [], 0
        for shape in self.shapes:
            n = int(np.prod(shape))
            out.append(vec[i:i + n].reshape(shape))
            i += n
        return out

    def loglike_cube(self, u: np.ndarray) -> float:
        self.count += 1
        value = float(self._lik(self._cube(np.asarray(u, float))[0]))
        return value if np.isfinite(value) else -1e300

    def logpost(self, y: np.ndarray) -> float:
        self.count += 1
        value = float(self._post(np.asarray(y, float)))
        return value if np.isfinite(value) else -np.inf

    def x_from_cube(self, U: np.ndarray) -> np.ndarray:
        return np.array([self._cube(u)[1] for u in U])

    def x_from_y(self, Y: np.ndarray) -> np.ndarray:
        return np.array([self._to_x(y) for y in Y])

    def y_from_cube(self, U: np.ndarray) -> np.ndarray:
        return np.array([self._cube(u)[0] for u in U])

    def prior_y(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.y_from_cube(rng.random((n, self.dim)))


def _weighted(X, log_w, log_z, n_evals, rng) -> dict:
    """Moments of a weighted sample, its Kish ESS and 4000 resampled draws."""
    log_w = np.where(np.isfinite(log_w), log_w, -np.inf)
    w = np.exp(log_w - logsumexp(log_w))
    mean = w @ X
    return {"mean": mean, "sd": np.sqrt(w @ (X - mean) ** 2), "ess": kish_ess(log_w),
            "quantiles": weighted_quantiles(X, w, QUANTILES),
            "draws": X[resample_indices(log_w, 4000, rng)], "log_z": log_z, "evals": n_evals,
            "ess_kind": "Kish"}


def run_external(name: str, ev: Evaluations, seed: int, args) -> dict:
    rng = np.random.default_rng(seed)
    ev.count = 0
    if name == "nautilus":
        from nautilus import Sampler

        sampler = Sampler(lambda u: u, ev.loglike_cube, n_dim=ev.dim, seed=seed)
        sampler.run(verbose=False, n_like_max=args.budget or np.inf)
        U, log_w, _ = sampler.posterior()
        return _weighted(ev.x_from_cube(U), log_w, sampler.log_z, ev.count, rng)
    if name == "dynesty":
        import dynesty

        sampler = dynesty.NestedSampler(ev.loglike_cube, lambda u: u, ev.dim, rstate=rng)
        sampler.run_nested(print_progress=False, maxcall=args.budget or args.dynesty_maxcall)
        res = sampler.results
        return _weighted(ev.x_from_cube(res.samples), res.logwt - res.logz[-1],
                         float(res.logz[-1]), ev.count, rng)
    if name == "pocomc":
        if args.budget:
            raise NotImplementedError("pocoMC takes no evaluation budget")
        import pocomc
        import torch
        from scipy.stats import uniform

        torch.manual_seed(seed)
        prior = pocomc.Prior([uniform(0, 1)] * ev.dim)
        sampler = pocomc.Sampler(prior, ev.loglike_cube, random_state=seed)
        sampler.run(progress=False)
        U, w, _, _ = sampler.posterior()
        log_z, _ = sampler.evidence()
        return _weighted(ev.x_from_cube(U), np.log(w), log_z, ev.count, rng)
    if name == "pyvbmc":
        return run_pyvbmc(ev, seed, args)
    if name == "emcee":
        import emcee

        walkers = max(32, 2 * ev.dim + 2)
        steps = args.budget // walkers if args.budget else args.emcee_steps
        sampler = emcee.EnsembleSampler(walkers, ev.dim, ev.logpost)
        sampler.random_state = np.random.RandomState(seed).get_state()
        sampler.run_mcmc(ev.prior_y(walkers, rng), steps, progress=False)
        chain = sampler.get_chain(discard=steps // 2)  # (steps, walkers, d)
        tau = float(np.nanmax(sampler.get_autocorr_time(discard=steps // 2, quiet=True)))
        X = ev.x_from_y(chain.reshape(-1, ev.dim))
        return {"mean": X.mean(0), "sd": X.std(0), "ess": chain.shape[0] * walkers / tau,
                "draws": X[rng.choice(len(X), 4000)], "log_z": np.nan, "evals": ev.count,
                "ess_kind": "autocorr"}
    raise ValueError(name)


def run_pyvbmc(ev: Evaluations, seed: int, args) -> dict:
    """PyVBMC on the unconstrained space: unbounded, plausible bounds from the priors'
    5 % and 95 % quantiles, started at PyMC's initial point; 4000 draws of the variational
    posterior and its ELBO as the log evidence.  A non-finite log density is passed on as
    it is: PyVBMC then stops with an error, which :func:`main` records in the row."""
    from pyvbmc import VBMC

    np.random.seed(seed)  # noqa: NPY002 (PyVBMC draws from NumPy's global generator)
    plb, pub = ev.y_from_cube(np.array([[0.05] * ev.dim, [0.95] * ev.dim]))
    # the start must lie strictly inside the plausible box
    margin = 0.01 * (pub - plb)
    x0 = np.clip(ev.initial_y, plb + margin, pub - margin)
    options = {"display": "off"}
    if args.budget:
        options["max_fun_evals"] = args.budget
    inf = np.full((1, ev.dim), np.inf)
    vbmc = VBMC(ev.logpost, x0[None], -inf, inf, plb[None], pub[None], options=options)
    vp, results = vbmc.optimize()
    Y, _ = vp.sample(4000)
    X = ev.x_from_y(Y)
    # the draws are independent but of an approximation: no per-run ESS; the spread of the
    # runs' means (over seeds) measures what they are worth
    return {"mean": X.mean(0), "sd": X.std(0), "ess": np.nan, "draws": X,
            "log_z": float(results["elbo"]), "evals": ev.count,
            "ess_kind": f"none: variational ({results['convergence_status']})"}


#: Our steps through ``pm.sample`` beside the suite's (:data:`benchmarks.suite.runner.SAMPLERS`
#: but its ``smc``: here ``kameleon`` and ``imh``).
STEPS: dict[str, Callable[[], object]] = {
    "kamh-emu": lambda: KameleonStep(emulator=True),
    "fkamh-emu": lambda: FastKameleonStep(emulator=True),
    "rw-screen": lambda: RandomWalkStep(screen=True),
}
#: Samplers that see the model only through :class:`Evaluations`.
EXTERNAL = ("nautilus", "dynesty", "pocomc", "emcee", "pyvbmc")


def run_steps(name: str, model: pm.Model, seed: int, args) -> dict:
    """``pm.sample(step=...)`` with ``--step-draws``, ``--step-tune`` and ``--step-chains``
    (default PyMC's: 1000, 1000, 4), chains one after the other (the counter sees them
    all); a suite sampler without a step (NUTS) lets PyMC choose.  ESS: ArviZ's bulk ESS of
    all chains (the smallest over scalars); the chains' means also enter the spread over
    seeds."""
    if name in STEPS:
        make = STEPS[name]
    elif name in RUNNER_SAMPLERS and not RUNNER_SAMPLERS[name].smc:
        make = RUNNER_SAMPLERS[name].make_step
    else:
        raise ValueError(f"unknown sampler {name!r}")
    warm_up()  # the first compilation of the process is not the sampler's cost
    counter = find_counter(model)
    counter.reset()
    with model:
        step = make() if make else None
        idata = pm.sample(args.step_draws, tune=args.step_tune, chains=args.step_chains,
                          cores=1, step=step, random_seed=seed,
                          progressbar=False, compute_convergence_checks=False)
    X = stack_posterior(idata.posterior, free_var_labels(model)[0])  # (chains, draws, k)
    flat = X.reshape(-1, X.shape[-1])
    return {"mean": flat.mean(0), "sd": flat.std(0),
            "ess": float(np.min(diagnostics(X).ess_bulk)), "draws": flat, "log_z": np.nan,
            "evals": counter.count, "replicate_evals": counter.count / args.step_chains,
            "ess_kind": f"ArviZ bulk, {args.step_chains} chains", "chain_means": X.mean(axis=1)}


def last_stage(stats, name: str, chains: int) -> np.ndarray:
    """Each chain's stat ``name`` at its last stage (NaN where the run has no such stat)."""
    if name not in stats:
        return np.full(chains, np.nan)
    stages = getattr(stats, "attrs", {}).get("chain_stages")  # where the chains' lengths differ
    return np.array([c[-1] for c in per_chain(stats[name].values, chains, stages)], dtype=float)


def chain_evidence(stats, chains: int) -> tuple[np.ndarray, np.ndarray]:
    """Each chain's log evidence and Kish's ESS from its last stage: of the recycled
    importance sample where the chain has one (``recycle=``, or an emulator run that fell
    back), else of the emulator's correction (``emulator=``), else the stages' evidence
    and NaN (PyMC's own kernel).  Chains of one emulator run may differ: some fall back."""
    def last(name: str) -> np.ndarray:
        return last_stage(stats, name, chains)

    log_z, kish = last("log_marginal_likelihood"), last("kish_ess")
    recycled = last("log_evidence_recycled")
    own = np.isfinite(recycled)
    return np.where(own, recycled, log_z), np.where(own, last("recycled_ess"), kish)


def run_smc(name: str, model: pm.Model, ref: Reference, seed: int, args) -> dict:
    kwargs = {"kernel": KameleonSMC, **json.loads(args.kameleon)} if name == "kameleon" else {}
    if args.budget and name == "imh":
        raise NotImplementedError("PyMC's IMH kernel takes no evaluation budget")
    if args.budget:  # the budget per chain, spent on recycled draws once tempering ends
        kwargs.update(max_evals=args.budget, recycle=args.budget)
    counter = find_counter(model)
    counter.reset()
    with model:
        idata = pm.sample_smc(args.draws, chains=args.chains, cores=1, progressbar=False,
                              random_seed=seed, compute_convergence_checks=False, **kwargs)
    names, _ = free_var_labels(model)
    X = stack_posterior(group_dataset(idata, "posterior"), names)  # (chains, draws, k)
    stats = group_dataset(idata, "sample_stats")
    ess = ref.sd**2 / X.mean(axis=1).var(axis=0, ddof=1)  # per chain and scalar
    log_z, kish_chains = chain_evidence(stats, args.chains)
    kish = np.mean(kish_chains)
    flat = X.reshape(-1, X.shape[-1])
    return {"mean": flat.mean(0), "sd": flat.std(0), "ess": float(ess.min()),
            "draws": flat, "log_z": float(np.mean(log_z)), "evals": counter.count / args.chains,
            "ess_kind": f"spread of {args.chains} chains (Kish {kish:.0f})", "per_chain": True,
            "chain_means": X.mean(axis=1), "kish": float(kish),
            "kish_chains": np.atleast_1d(kish_chains).tolist(),
            # the emulator's last check past the sample's edge and whether the budget
            # ended it, per chain (NaN where the chain has none)
            **{f"{stat}_chains": last_stage(stats, stat, args.chains).tolist()
               for stat in ("past_edge", "budget_spent")}}


def summarise(r: dict, ref: Reference) -> dict:
    q = r.get("quantiles")
    q = np.quantile(r["draws"], QUANTILES, axis=0) if q is None else q
    return {
        "evals": float(r["evals"]), "ess": float(r["ess"]), "ess_kind": r["ess_kind"],
        "per_1k": 1000.0 * r["ess"] / r["evals"], "per_s": r["ess"] / r["wall"],
        "mean_err": float(np.max(np.abs(r["mean"] - ref.mean) / ref.sd)),
        "q_err": float(np.max(np.abs(q - ref.quantiles) / ref.sd)),
        "sd_ratio": (float(np.min(r["sd"] / ref.sd)), float(np.max(r["sd"] / ref.sd))),
        "log_z": float(r["log_z"]), "log_z_err": float(r["log_z"] - ref.log_z),
        "wall": r["wall"],
        **{k: v for k, v in r.items() if k.endswith("_chains")},  # per chain, as recorded
    }


HEADER = (f"{'model':<17} {'sampler':<9} {'seed':>4} {'evals':>8} {'ESS':>8} {'/1k ev':>7} "
          f"{'/s':>7} {'mean e':>6} {'q err':>6} {'sd ratio':<11} {'log Z':>8} {'err':>6} "
          f"{'wall s':>6}  ESS from")


def row(model: str, sampler: str, seed, s: dict) -> str:
    return (f"{model:<17} {sampler:<9} {seed:>4} {s['evals']:>8.0f} {s['ess']:>8.0f} "
            f"{s['per_1k']:>7.1f} {s['per_s']:>7.2f} {s['mean_err']:>6.3f} {s['q_err']:>6.3f} "
            f"{s['sd_ratio'][0]:>5.3f}-{s['sd_ratio'][1]:<5.3f} {s['log_z']:>8.2f} "
            f"{s['log_z_err']:>6.2f} {s['wall']:>6.0f}  {s['ess_kind']}")


def over_seeds(runs: list[dict], ref: Reference) -> str:
    """R-hat across the runs' draws (equal numbers per run) and the ESS per run from the
    spread of the runs' means; 'meets' applies the four criteria to every run."""
    n = min(len(r["draws"]) for r in runs)
    draws = np.stack([r["draws"][:n] for r in runs])
    rhat = float(np.max(az.rhat(az.convert_to_dataset(draws))["x"].values))
    # SMC: ESS per chain from all runs' chains; otherwise per run.  The minimum over the
    # scalars is biased low with few replicates (a minimum of noisy estimates): the median too
    means = np.concatenate([r.get("chain_means", r["mean"][None]) for r in runs])
    ess = spread_ess(means, ref.sd)
    per_1k = 1000 / np.mean([r.get("replicate_evals", r["evals"]) for r in runs])
    spread = (f"{np.min(ess):.0f} min, {np.median(ess):.0f} median over scalars "
              f"({len(means)} replicates; {np.min(ess) * per_1k:.1f}, "
              f"{np.median(ess) * per_1k:.1f} per 1000 evals)")
    meets = all(s["ess"] >= CRITERIA["ess"] and s["mean_err"] <= CRITERIA["mean"]
                and abs(s["sd_ratio"][0] - 1) <= CRITERIA["sd"]
                and abs(s["sd_ratio"][1] - 1) <= CRITERIA["sd"] for s in
                (r["summary"] for r in runs)) and rhat <= CRITERIA["rhat"]
    kind = "chain" if "chain_means" in runs[0] else "run"
    return (f"   over {len(runs)} seeds: R-hat {rhat:.3f}, ESS per replicate (one {kind}) "
            f"from the spread of their means {spread}, meets all four: "
            f"{'yes' if meets else 'no'}")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["eight-schools-nc"])
    parser.add_argument("--samplers", nargs="+", default=["kameleon", "nautilus"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--draws", type=int, default=1000, help="SMC particles")
    parser.add_argument("--chains", type=int, default=8, help="SMC chains per run")
    parser.add_argument("--kameleon", default="{}", help="KameleonSMC settings (JSON)")
    parser.add_argument("--step-chains", type=int, default=4, help="pm.sample's chains")
    parser.add_argument("--step-tune", type=int, default=1000, help="pm.sample's tune")
    parser.add_argument("--step-draws", type=int, default=1000, help="pm.sample's draws")
    parser.add_argument("--emcee-steps", type=int, default=4000)
    parser.add_argument("--dynesty-maxcall", type=int, default=500_000)
    parser.add_argument("--budget", type=int, default=0,
                        help="equal evaluations: this many per run (per chain for SMC)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    quiet_pymc()
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    print(HEADER, flush=True)
    rows = []
    for model_name in args.models:
        ref = Reference(model_name)
        for sampler in args.samplers:
            runs = []
            for seed in args.seeds:
                start = time.perf_counter()
                try:
                    r = _run(sampler, model_name, ref, seed, args)
                except NotImplementedError as err:
                    print(f"{model_name:<17} {sampler:<9} skipped: {err}", flush=True)
                    break
                except Exception as err:  # a failed run is a result: record it, go on
                    rows.append(_failed(model_name, sampler, seed, err, ref))
                    _write(rows, args.json)
                    continue
                r["wall"] = (time.perf_counter() - start) / (args.chains if r.get("per_chain")
                                                             else 1)
                r["summary"] = summarise(r, ref)
                runs.append(r)
                print(row(model_name, sampler, seed, r["summary"]), flush=True)
                rows.append({"model": model_name, "sampler": sampler, "seed": seed,
                             "settings": args.kameleon if sampler == "kameleon" else None,
                             "means": r.get("chain_means", r["mean"][None]).tolist(),
                             **r["summary"]})
                _write(rows, args.json)
            if runs:
                print(over_seeds(runs, ref), flush=True)
    return rows


def _write(rows: list[dict], path: str | None) -> None:
    if path:  # after every run: long runs can be stopped
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


def _failed(model: str, sampler: str, seed: int, err: Exception, ref: Reference) -> dict:
    """Print and return the row of a run that raised; an external sampler's evaluations up
    to the failure are known (its counter), the others' not."""
    evals = ref.evaluations.count if sampler in EXTERNAL else float("nan")
    message = " ".join(f"{type(err).__name__}: {err}".split())[:160]
    print(f"{model:<17} {sampler:<9} {seed:>4} {evals:>8.0f} failed: {message}", flush=True)
    return {"model": model, "sampler": sampler, "seed": seed, "evals": float(evals),
            "error": message}


def _run(sampler: str, model_name: str, ref: Reference, seed: int, args) -> dict:
    if sampler in EXTERNAL:
        return run_external(sampler, ref.evaluations, seed, args)
    model = model_factory(model_name)()  # a fresh model with its own counter
    add_counter(model)
    if sampler in ("kameleon", "imh"):
        return run_smc(sampler, model, ref, seed, args)
    return run_steps(sampler, model, seed, args)


if __name__ == "__main__":
    main()
