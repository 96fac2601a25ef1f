"""Which log-density surrogate screens best for delayed acceptance, measured offline.

Usage::

    python -m benchmarks.research.surrogate_screen [--models pk,hare-lynx] [--seeds 1] [--tune 1000]
                                          [--draws 1000] [--chains 4] [--scales 1,2,3]
                                          [--adapt product:0.05,stage2:0.6]

Per model of the suite and seed: each chain is a ``RandomWalkStep`` run through its tuning
phase by ``pm.sample`` (the suite's counting potential counts every evaluation), recording
every iteration's :class:`~pymc_kameleon.StepInfo` through ``callback=`` and the compiled log
density through ``logp_wrapper=``.  From the tuning only (nothing of the step's internals):

* the whitening map ``x = m + L u`` (``step.preconditioner``), the iterations per draw
  (``step.n_steps``) and the tuned scale, read off the last 200 tuning proposals as
  ``sqrt(mean |L^-1 (x* - x)|^2 / d)``;
* the surrogates, all in the whitened coordinates ``u``, fitted on the second half of the
  tuning iterations:

  - ``gauss``: the warm-up's Gaussian itself, ``-|u|^2 / 2``;
  - ``kef``: the kernel exponential family of ``KernelHMCStep``'s finite surrogate
    (:class:`~pymc_kameleon.math.score_matching.FiniteScoreEstimator`, 200 random Fourier
    features, bandwidth and ``lambda`` by blocked cross-validation on the chain's distinct
    states, as the step does);
  - ``krr``: kernel ridge regression of the evaluated points' log densities
    (:class:`~pymc_kameleon.math.surrogate_regression.KernelRidgeSurrogate`, at most 1000
    points, values floored ``d + 10`` below the maximum, leave-one-out selection);
  - ``krr+gauss``: the same with the Gaussian as its mean function;
  - ``screen``: :class:`~pymc_kameleon.adaptation.screen.SurrogateScreen` with its defaults,
    fed every evaluated point of the tuning in order (model coordinates, its own whitening)
    with ``update_draw`` after every ``n_steps`` of them, then frozen: the screen a step
    would carry out of tuning; where its held-out criterion left it inactive, the plain walk.

Then, from each chain's last tuning state, the delayed-acceptance walk
(:func:`~pymc_kameleon.math.delayed_acceptance.delayed_acceptance_walk`) runs ``draws * k *
n_steps`` iterations with proposals ``y = x + f * scale * L e`` at ``f`` in ``--scales``,
kept every ``k * n_steps``-th iteration (the ``draws`` a step would store; ``k`` is
``--steps-factor``: screened iterations are cheap, so a step may take more of them per
draw); ``rw`` is the plain walk (a constant surrogate: stage 1 passes everything).  With
``--adapt rule:target`` (rows after those of ``--scales``) the scale is adapted first, from
``f = 1``, by Robbins-Monro (:func:`~pymc_kameleon.adaptation.robbins_monro.log_scale_step`,
gain ``t^-0.6``) over ``--adapt-draws`` draws of the screened walk, one step per draw on that
draw's rate: ``product`` the fraction of iterations that moved (both stages), ``stage2`` the
fraction of stage-1 passes that stage 2 accepted; the adaptation's evaluations count as
tuning, and the scale column shows the adapted factor (mean over chains).  Columns:
first- and second-stage acceptance, moves per iteration (their product), evaluations per
iteration, min bulk ESS, ESS per 1000
evaluations counting the tuning's and per 1000 of the sampling phase's, max R-hat, the worst
mean error in reference sds and the sd ratio farthest from 1 (constrained values against the
suite's reference), and whether the four criteria of the suite hold. Results:
``docs/benchmarks/surrogate_screen.md``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import pymc as pm
from scipy.linalg import solve_triangular

from pymc_kameleon import RandomWalkStep
from pymc_kameleon.adaptation.robbins_monro import log_scale_step
from pymc_kameleon.adaptation.screen import SurrogateScreen
from pymc_kameleon.math.delayed_acceptance import delayed_acceptance_walk
from pymc_kameleon.math.kernels import distinct_rows, median_heuristic
from pymc_kameleon.math.rff import RandomFourierFeatures
from pymc_kameleon.math.score_matching import FiniteScoreEstimator, cross_validate
from pymc_kameleon.math.surrogate_regression import KernelRidgeSurrogate
from pymc_kameleon.models.counting import add_counter

from ..common import quiet_pymc
from ..suite.metrics import accuracy, diagnostics
from ..suite.models import MODELS, free_var_labels
from ..suite.reference import load_reference

__all__ = ["TunedChain", "fit_surrogates", "main", "tune_chain"]

SURROGATES = ("rw", "gauss", "kef", "krr", "krr+gauss", "screen")


@dataclass
class TunedChain:
    """What one tuned random-walk chain leaves: its state, map, scale, points and cost."""

    x: np.ndarray
    logp: float
    mean: np.ndarray
    chol: np.ndarray
    scale: float
    n_steps: int
    states: np.ndarray  # second half of the tuning: the chain's states
    points: np.ndarray  # ... and the evaluated proposals
    values: np.ndarray  # ... with their log densities
    tuning_points: np.ndarray  # every evaluated proposal of the tuning, in order
    tuning_values: np.ndarray
    evals: int
    logp_fn: object
    to_constrained: object


def tune_chain(name: str, tune: int, seed: int) -> TunedChain:
    """Tune one ``RandomWalkStep`` chain on suite model ``name`` (``pm.sample``, 1 chain)."""
    model = MODELS[name].factory()
    counter = add_counter(model)
    infos, captured = [], {}

    def capture(logp):
        captured["logp"] = logp
        return logp

    with model:
        step = RandomWalkStep(callback=infos.append, logp_wrapper=capture)
        counter.reset()
        pm.sample(draws=1, tune=tune, chains=1, cores=1, step=step, random_seed=seed,
                  progressbar=False, compute_convergence_checks=False)
    evals = counter.count
    tuning = [i for i in infos if i.tune]
    last = tuning[-1]
    pre = step.preconditioner
    # the tuned scale, from the last proposals' whitened jumps
    jumps = []
    for prev, cur in zip(tuning[-201:-1], tuning[-200:], strict=True):
        if cur.proposal is not None and not cur.probe:
            jumps.append(solve_triangular(pre.chol, cur.proposal - prev.position, lower=True))
    jumps = np.array(jumps)
    scale = float(np.sqrt(np.mean(np.sum(jumps**2, axis=1)) / jumps.shape[1]))
    half = tuning[len(tuning) // 2 :]
    evaluated = [i for i in half if i.proposal is not None]
    every = [i for i in tuning if i.proposal is not None]
    # constrained values of the reference, from the step's raveled (unconstrained) ones
    point = model.initial_point()
    sizes = [(v.name, point[v.name].shape) for v in step.vars]
    constrained = model.compile_fn(model.replace_rvs_by_values(model.free_RVs),
                                   inputs=model.value_vars,
                                   on_unused_input="ignore", point_fn=True)

    def to_constrained(x):
        out, start = {}, 0
        for var, shape in sizes:
            size = int(np.prod(shape))
            out[var] = x[start : start + size].reshape(shape)
            start += size
        return np.concatenate([np.ravel(v) for v in constrained(out)])

    logp = captured["logp"]

    def counted_logp(x):  # the compiled density, evaluated through the counted model
        counted_logp.n += 1
        return float(logp(x))

    counted_logp.n = 0
    return TunedChain(
        x=last.position.copy(), logp=float(logp(last.position)), mean=pre.mean, chol=pre.chol,
        scale=scale, n_steps=int(step.n_steps),
        states=np.array([i.position for i in half]),
        points=np.array([i.proposal for i in evaluated]),
        values=np.array([i.logp_proposal for i in evaluated]),
        tuning_points=np.array([i.proposal for i in every]),
        tuning_values=np.array([i.logp_proposal for i in every]),
        evals=int(evals), logp_fn=counted_logp, to_constrained=to_constrained)


def fit_surrogates(chain: TunedChain, rng: np.random.Generator) -> dict:
    """The screens of the module docstring, as batch log densities of model coordinates."""
    d = chain.x.size

    def whiten(X):
        return solve_triangular(chain.chol, (np.atleast_2d(X) - chain.mean).T, lower=True).T

    def gauss_u(U):
        return -0.5 * np.sum(U**2, axis=1)

    U_states = distinct_rows(whiten(chain.states))
    s_med = median_heuristic(U_states)
    base = RandomFourierFeatures.draw(d, 200, 1.0, rng, "phase")
    cv = cross_validate(U_states, s_med * 2.0 ** np.arange(-1.0, 2.25, 0.5),
                        s_med**-2 * 10.0 ** np.arange(-5.0, 2.0),
                        lambda s, lam: FiniteScoreEstimator(base.with_bandwidth(s), lam),
                        n_folds=5, shuffle=False)
    kef = FiniteScoreEstimator(base.with_bandwidth(cv.best_bandwidth), cv.best_lam)
    kef.fit(U_states)
    ok = np.isfinite(chain.values)
    pts, vals = chain.points[ok], chain.values[ok]
    if pts.shape[0] > 1000:
        keep = rng.choice(pts.shape[0], 1000, replace=False)
        pts, vals = pts[keep], vals[keep]
    U_pts = whiten(pts)
    krr = KernelRidgeSurrogate.fit(U_pts, vals, floor_gap=d + 10.0)
    krr_g = KernelRidgeSurrogate.fit(U_pts, vals, floor_gap=d + 10.0, mean_function=gauss_u)
    screen = SurrogateScreen()
    state = screen.init(d)
    for start in range(0, len(chain.tuning_values), chain.n_steps):
        for x, v in zip(chain.tuning_points[start : start + chain.n_steps],
                        chain.tuning_values[start : start + chain.n_steps], strict=True):
            screen.update(state, x, v)
        screen.update_draw(state)
    screen.final(state)

    def rw(X):
        return np.zeros(np.atleast_2d(X).shape[0])

    return {
        "rw": rw,
        "gauss": lambda X: gauss_u(whiten(X)),
        "kef": lambda X: np.atleast_1d(kef.log_density(whiten(X))),
        "krr": lambda X: krr.log_density(whiten(X)),
        "krr+gauss": lambda X: krr_g.log_density(whiten(X)),
        "screen": (lambda X: screen.log_density(state, X)) if state.active else rw,
        "screen_state": state,
    }


def adapt_factor(chain: TunedChain, surrogate, rule: str, target: float, draws: int,
                 n_steps: int, rng: np.random.Generator) -> tuple[float, np.ndarray, float, int]:
    """Robbins-Monro on the log of the scale factor (from 1), one step per draw of
    ``n_steps`` screened iterations on that draw's ``rule`` rate (module docstring).

    Returns the factor, the chain's point and stored log density, and the evaluations."""
    log_f, x, lp, evals = 0.0, chain.x, chain.logp, 0
    for t in range(1, draws + 1):
        res = delayed_acceptance_walk(chain.logp_fn, surrogate, x[None], np.exp(log_f)
                                      * chain.scale * chain.chol, n_steps, rng,
                                      logp0=np.array([lp]))
        x, lp, evals = res.samples[0, -1], float(res.logp[0]), evals + int(res.n_evals[0])
        rate = res.stage1_accept * res.stage2_accept if rule == "product" else res.stage2_accept
        if rule == "product" or np.isfinite(rate):  # stage 2 unseen: no information
            log_f = log_scale_step(log_f, t, 0.6, rate, target)
    return float(np.exp(log_f)), x, lp, evals


def _row(name, seed, label, factor, chains, surrogates, draws, ref, labels, steps_factor=1,
         adapt=None, adapt_draws=200):
    """One table row; ``adapt`` ``(rule, target)`` adapts the factor first (``factor`` is
    then the row's label only)."""
    tuning_evals = sum(c.evals for c in chains)
    kept, evals, s1, s2, moves, factors = [], 0, [], [], [], []
    for c, surr in zip(chains, surrogates, strict=True):
        n_steps = steps_factor * c.n_steps
        c.logp_fn.n = 0
        rng = np.random.default_rng([seed, int(10 * factor), SURROGATES.index(label)])
        x, lp, f = c.x, c.logp, factor
        if adapt is not None:
            f, x, lp, spent = adapt_factor(c, surr[label], *adapt, adapt_draws, n_steps, rng)
            tuning_evals += spent
            c.logp_fn.n = 0
        factors.append(f)
        res = delayed_acceptance_walk(c.logp_fn, surr[label], x[None], f * c.scale * c.chol,
                                      draws * n_steps, rng, logp0=np.array([lp]))
        assert c.logp_fn.n == res.n_evals.sum()
        evals += int(res.n_evals.sum())
        s1.append(res.stage1_accept)
        s2.append(res.stage2_accept)
        moves.append(res.stage1_accept * np.nan_to_num(res.stage2_accept))
        thinned = res.samples[0, n_steps - 1 :: n_steps]
        kept.append(np.array([c.to_constrained(x) for x in thinned]))
    diag = diagnostics(np.array(kept))
    acc = accuracy(diag, ref.mean, ref.sd, labels)
    total = tuning_evals + evals
    return {"model": name, "seed": seed, "screen": label, "scale": float(np.mean(factors)),
            "adapt": "fixed" if adapt is None else f"{adapt[0]} {adapt[1]:g}",
            "stage1": float(np.mean(s1)), "stage2": float(np.nanmean(s2)),
            "moves": float(np.mean(moves)),
            "evals_per_iter": evals / (draws * steps_factor * sum(c.n_steps for c in chains)),
            "steps_factor": steps_factor,
            "ess": acc.min_ess_bulk, "ess_per_1k": 1000.0 * acc.min_ess_bulk / total,
            "ess_per_1k_sampling": 1000.0 * acc.min_ess_bulk / evals,
            "rhat": acc.max_rhat, "mean_err": acc.mean_err, "sd_ratio": acc.sd_ratio,
            "ok": acc.all_ok, "tuning_evals": tuning_evals, "evals": evals}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="pk,hare-lynx")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--scales", default="1,2,3")
    parser.add_argument("--screens", default=",".join(SURROGATES))
    parser.add_argument("--steps-factor", type=int, default=1,
                        help="iterations per draw: this many times the tuned step's n_steps")
    parser.add_argument("--adapt", default="",
                        help="rule:target pairs (rule product or stage2), rows whose scale "
                             "is adapted, after those of --scales (empty: none)")
    parser.add_argument("--adapt-draws", type=int, default=200)
    args = parser.parse_args(argv)
    quiet_pymc()
    rows = []
    settings = [(float(f), None) for f in args.scales.split(",") if f]
    settings += [(1.0, (r, float(t))) for r, t in
                 (a.split(":") for a in args.adapt.split(",") if a)]
    print("| model | seed | screen | scale | adapted on | iters / draw | stage-1 acc | "
          "stage-2 acc | moves / iter | evals / iter | min bulk ESS | "
          "ESS / 1k evals (tuning incl.) | ESS / 1k sampling evals | "
          "max R-hat | mean err (sd) | sd ratio | criteria |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        ref = load_reference(name)
        labels = free_var_labels(MODELS[name].factory())[1]
        for seed in (int(s) for s in args.seeds.split(",")):
            t0 = time.time()
            chains = [tune_chain(name, args.tune, 1000 * seed + c) for c in range(args.chains)]
            rng = np.random.default_rng(seed)
            surrogates = [fit_surrogates(c, rng) for c in chains]
            screens = [s["screen_state"] for s in surrogates]
            print(f"<!-- {name} seed {seed}: tuning {sum(c.evals for c in chains)} evals, "
                  f"n_steps {[c.n_steps for c in chains]}, scales "
                  f"{[round(c.scale, 3) for c in chains]}, screen active "
                  f"{[s.active for s in screens]}, held-out error "
                  f"{[round(s.error, 2) for s in screens]}, {time.time() - t0:.0f} s -->",
                  flush=True)
            for label in args.screens.split(","):
                for factor, adapt in settings:
                    r = _row(name, seed, label, factor, chains, surrogates, args.draws, ref,
                             labels, args.steps_factor, adapt, args.adapt_draws)
                    rows.append(r)
                    print(f"| {name} | {seed} | {label} | {r['scale']:.2f}x | {r['adapt']} | "
                          f"{args.steps_factor} n_steps | {r['stage1']:.2f} | "
                          f"{r['stage2']:.2f} | {r['moves']:.3f} | {r['evals_per_iter']:.2f} | "
                          f"{r['ess']:.0f} | "
                          f"{r['ess_per_1k']:.1f} | {r['ess_per_1k_sampling']:.1f} | "
                          f"{r['rhat']:.3f} | {r['mean_err']:.2f} | {r['sd_ratio']:.2f} | "
                          f"{'✓' if r['ok'] else '✗'} |", flush=True)
    return rows


if __name__ == "__main__":
    main()
