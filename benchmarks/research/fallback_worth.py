"""What a fallen-back KameleonSMC run's recycled pool is worth, coordinate by coordinate.

Usage::

    python -m benchmarks.research.fallback_worth --seeds 4 5 6 7 8 9 [--rounds 2]

Runs ``pm.sample_smc(kernel=KameleonSMC, emulator=True)`` on eight schools (where the
emulator falls back to the stages) as :func:`benchmarks.smc_compare.run_smc` does, six
chains a seed, and keeps every chain's weighted pool, the one its draws are resampled
from.  Per coordinate, over the chains: the ESS of the pool's weighted mean from the
delta method (:func:`~benchmarks.research.returned_worth.pool_stats`: what one run can see
of its own error, ignoring the stages' dependence on each other) and its ratio to Kish's
ESS; then, for ``draws`` points resampled from each pool four ways, ArviZ's bulk ESS of
a chain's draws, the ESS per chain from the spread of the chains' means (the pools' mean
variance over the means' variance) and the ratio of the two, all on the model's scale
(``tau``, not its log):

* ``curve``: systematic resampling along the pool's Hilbert curve (what the run returned
  before ``capped``);
* ``multinomial``: with each point's copies next to each other (the noise ``1 / draws``
  on every coordinate);
* ``even``: :func:`resample_evenly`, systematic resampling along the coordinate the pool
  is worth least on, where that brings the draws' worth closer to their number on every
  coordinate;
* ``capped``: :func:`~pymc_kameleon.math.draw_worth.resample_draws` (what the run returns
  now): along the curve but for the smallest share, resampled along the weakest
  coordinate, that keeps every coordinate's predicted worth per draw (``draws_worth``) at
  most ``WORTH_CAP``, so that ArviZ's one count per draw errs low by at most that much.

Per coordinate the table also gives that prediction for the curve and for ``capped``,
from each pool alone (in the sampler's coordinates, ``log tau``): the mean over the
chains, and the mean over the chains of each chain's weakest coordinate.

``--rounds K`` is the other design tried for the weak coordinate: after the last stage,
``K`` importance rounds of ``draws`` points each from the emulator correction's proposal
(a Gaussian mixture and a Student-t, fitted to points resampled from the pool), which
cover heavier tails than the stages' Gaussian mixtures.  Results:
``docs/benchmarks/emulator.md`` ("emulator-fallback-coordinates").
"""

from __future__ import annotations

import argparse
import json
import warnings
from types import SimpleNamespace

import numpy as np

from pymc_kameleon.emulator import EmulatorSettings
from pymc_kameleon.emulator.correction import correction_proposal
from pymc_kameleon.math.draw_worth import capped_plan, draws_worth, resample_draws
from pymc_kameleon.math.importance import kish_ess, resample_indices
from pymc_kameleon.math.space_filling import hilbert_order

from ..common import quiet_pymc
from ..smc_compare import Reference, _run
from ..suite.metrics import spread_ess
from ..suite.models import free_var_labels
from .returned_worth import arviz_ess_per_chain, noise_per_draw, pool_stats

__all__ = ["PoolKeeper", "SCHEMES", "main", "multinomial_adjacent", "resample_evenly"]

MODEL = "eight-schools-nc"


def multinomial_adjacent(log_w: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` indices drawn with probabilities ``exp(log_w)``, each point's copies next to
    each other and the points in random order."""
    w = np.exp(log_w - np.max(log_w))
    chosen, copies = np.unique(rng.choice(len(w), size, p=w / w.sum()), return_counts=True)
    order = rng.permutation(len(chosen))
    return np.repeat(chosen[order], copies[order])


def resample_evenly(X: np.ndarray, log_w: np.ndarray, size: int, rng: np.random.Generator,
                    reps: int = 20) -> np.ndarray:
    """``size`` indices resampled along the Hilbert curve or along the coordinate the pool
    is worth least on (delta method), whichever brings the draws' worth per coordinate,
    ``1 / (1 / worth + noise / size)`` with the noise of ``reps`` trial resamplings,
    closest to ``size`` on its worst coordinate.  Along one coordinate that coordinate
    keeps its worth and the others give up what they had to spare."""
    pool = pool_stats(X, log_w)
    worth = np.array(pool["ess"])

    def along(order):  # systematic resampling visiting the points in ``order``
        return order[resample_indices(log_w[order], size, rng)]

    best, best_miss = None, np.inf
    for order in (hilbert_order(X, log_w), np.argsort(X[:, np.argmin(worth)], kind="stable")):
        noise = noise_per_draw(X, pool, size, lambda order=order: along(order), reps)
        miss = np.max(np.abs(np.log(size * (1 / worth + noise / size))))
        if miss < best_miss:
            best, best_miss = order, miss
    return along(best)


def log_columns(model) -> np.ndarray:
    """Which scalars of the sampler's coordinates are the logs of the model's variables
    (a ``log`` transform): their draws are compared on the model's own scale, as ArviZ and
    the reference see them."""
    shapes = model.eval_rv_shapes()
    return np.concatenate([
        np.full(int(np.prod(shapes[rv.name])), type(model.rvs_to_transforms.get(rv)).__name__
                == "LogTransform") for rv in model.free_RVs])


def _curve(X, log_w, size, rng):
    return resample_indices(log_w, size, rng, points=X)


def _multinomial(X, log_w, size, rng):
    return multinomial_adjacent(log_w, size, rng)


#: The four ways of resampling a pool to ``draws`` equally weighted points.
SCHEMES = {"curve": _curve, "multinomial": _multinomial, "even": resample_evenly,
           "capped": resample_draws}


class PoolKeeper:
    """While active, the points and log weights of every pool a fallen-back chain resamples
    its draws from (``recycle``'s call of ``resample_draws``), and with
    ``rounds`` that many importance rounds from the correction's proposal before it."""

    def __init__(self, rounds: int = 0):
        self.rounds = rounds
        self.pools: list[tuple[np.ndarray, np.ndarray]] = []

    def __enter__(self) -> PoolKeeper:
        from pymc_kameleon.particles import recycling
        from pymc_kameleon.smc import emulated

        self._saved = [(recycling, "resample_draws", recycling.resample_draws),
                       (emulated, "recycle", emulated.recycle)]
        original_resample, original_recycle = recycling.resample_draws, emulated.recycle

        def resample(X, log_w, size, rng, **kw):
            self.pools.append((np.array(X, float), np.array(log_w, float)))
            return original_resample(X, log_w, size, rng, **kw)

        def recycle(pool, proposal, extra, draws, size, evaluate, rng, to_float, options,
                    target_ess=None):
            if target_ess is not None:  # the fallback (recycle=... passes no target)
                for _ in range(self.rounds):
                    X, _, _, log_w = pool.weighted()
                    whitening, g = correction_proposal(
                        X[resample_indices(log_w, draws, rng)], rng, EmulatorSettings())
                    pool.new_stage(whitening, g)
                    Y = to_float(whitening.rows_to_x(g.sample(draws, rng)))
                    pool.add(Y, *evaluate(Y))
            return original_recycle(pool, proposal, extra, draws, size, evaluate, rng,
                                    to_float, options, target_ess)

        recycling.resample_draws, emulated.recycle = resample, recycle
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, value in self._saved:
            setattr(owner, name, value)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[4, 5, 6, 7, 8, 9])
    parser.add_argument("--chains", type=int, default=6)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--json", help="write the chains' rows here after each seed")
    parser.add_argument("--tables", nargs="+", metavar="JSON",
                        help="no runs: pool the chains of these --json files")
    parser.add_argument("--rounds", type=int, default=0,
                        help="importance rounds from the correction's proposal after the "
                             "last stage")
    args = parser.parse_args(argv)
    quiet_pymc()
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    ref = Reference(MODEL)
    labels = free_var_labels(ref.model)[1]
    run_args = SimpleNamespace(draws=args.draws, chains=args.chains,
                               kameleon='{"emulator": true}', budget=0)
    if args.tables:
        rows = [row for path in args.tables for row in json.load(open(path))]
        print_table(rows, labels)
        return rows
    rng = np.random.default_rng(0)
    logged = log_columns(ref.model)
    rows = []
    for seed in args.seeds:
        with PoolKeeper(args.rounds) as keeper:
            r = _run("kameleon", MODEL, ref, seed, run_args)
        for X, log_w in keeper.pools:
            # resampled in the sampler's coordinates, judged on the model's scale
            shown = np.where(logged, np.exp(X), X)
            draws = {name: shown[how(X, log_w, args.draws, rng)]
                     for name, how in SCHEMES.items()}
            ess = arviz_ess_per_chain(np.stack(list(draws.values())))
            pool = pool_stats(shown, log_w)
            how, share, _ = capped_plan(X, log_w, args.draws)
            rows.append({"seed": seed, "evals": r["evals"], "kish": kish_ess(log_w),
                         "delta": np.array(pool["ess"]), "var": np.array(pool["var"]),
                         "predicted": {"curve": draws_worth(X, log_w, args.draws),
                                       "capped": draws_worth(X, log_w, args.draws,
                                                             (how, share))},
                         "share": share,
                         **{name: (x.mean(axis=0), e)
                            for (name, x), e in zip(draws.items(), ess, strict=True)}})
        seed_rows = [row for row in rows if row["seed"] == seed]
        kish = np.mean([row["kish"] for row in seed_rows])
        delta = np.mean([row["delta"] for row in seed_rows], axis=0)
        print(f"seed {seed}: {len(seed_rows)} chains fell back, {r['evals']:.0f} evaluations "
              f"a chain, Kish {kish:.0f}; delta-method ESS over Kish's by coordinate "
              f"{np.round(delta / kish, 2).tolist()}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, default=lambda a: np.asarray(a).tolist())
    print_table(rows, labels)
    return rows


def print_table(rows: list[dict], labels: list[str]) -> None:
    """Per coordinate, pooled over the chains of ``rows``: the delta-method ESS, and each
    scheme's ArviZ ESS, spread ESS and their ratio; then the predicted worth per draw of
    ``curve`` and ``capped``; in Markdown."""
    kish = np.mean([row["kish"] for row in rows])
    delta = np.mean([row["delta"] for row in rows], axis=0)
    schemes = [name for name in SCHEMES if name in rows[0]]
    print(f"{len(rows)} chains; Kish's ESS {kish:.0f} a chain (means over the chains)")
    print("| coordinate | delta-method ESS (over Kish's) | "
          + " | ".join(f"{name}: ArviZ / spread (ratio)" for name in schemes) + " |")
    print("|---|---|" + "---|" * len(schemes))
    sd = np.sqrt(np.mean([row["var"] for row in rows], axis=0))  # the pools' own
    spread = {name: spread_ess(np.array([row[name][0] for row in rows]), sd)
              for name in schemes}
    for j, label in enumerate(labels):
        cells = []
        for name in schemes:
            arviz = np.mean([row[name][1][j] for row in rows])
            cells.append(f"{arviz:.0f} / {spread[name][j]:.0f} ({arviz / spread[name][j]:.2f})")
        print(f"| {label} | {delta[j]:.0f} ({delta[j] / kish:.2f}) | " + " | ".join(cells)
              + " |")
    if "predicted" not in rows[0]:
        return
    share = np.mean([row["share"] for row in rows])
    print(f"\nPredicted worth per draw (capped: {share:.0f} of the draws off the curve on "
          "average); mean over the chains, and of each chain's weakest coordinate")
    print("| scheme | " + " | ".join(labels) + " | weakest |")
    print("|---|" + "---|" * (len(labels) + 1))
    for name in ("curve", "capped"):
        worth = np.array([row["predicted"][name] for row in rows])
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in worth.mean(axis=0))
              + f" | {worth.min(axis=1).mean():.2f} |")


if __name__ == "__main__":
    main()
