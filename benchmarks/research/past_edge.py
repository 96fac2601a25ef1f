"""What the check past the weighted sample's edge (``edge_weight``) changes on a curved ridge.

Usage::

    python -m benchmarks.research.past_edge [--seeds 1 10] [--draws 400] [--twist 0.1] \
        [--shape banana] [--dim 2]
    python -m benchmarks.research.past_edge --shape funnel --dim 3 [--seeds 1 6]
    python -m benchmarks.research.past_edge --controls [--seeds 1 4]

Runs :class:`~pymc_kameleon.emulator.EmulatorRun` (free of PyMC) at its defaults on the
banana of :mod:`benchmarks.research.design_edge` (``--twist``: its ``b``) in ``--dim``
dimensions, or on Neal's funnel (``--shape funnel``: ``v ~ N(0, 3^2)``, each further
coordinate ``N(0, exp(v))`` given ``v``), either under a ``N(0, 30^2 I)`` prior, once
without the check (``edge_weight=inf``) and once with it (the default), and prints per run
how it ended (with the reason of a fallback), the corrections handed back to the design,
the last check's largest weight over the sample's (``past_edge``, in nats), the
evaluations, Kish's ESS, Pareto's k-hat and the weighted sample's largest errors against
exact draws; on the funnel also those of ``v`` alone (the funnel's further coordinates are
so heavy-tailed that even the exact draws' sd of them is off by tens of percent).
With ``--controls`` it runs the defaults on targets whose proposals are heavier-tailed than
the posterior (a correlated Gaussian in 2, 4 and 8 dimensions, a Student-t with 5 degrees
of freedom in 4) and prints the same per run, with the check's false alarms (restarts).
Results: ``docs/benchmarks/emulator.md`` ("emulator-past-edge").
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial

import numpy as np
from scipy import stats

from benchmarks.research.design_edge import PRIOR_SD, B, V, errors
from benchmarks.research.engine_problems import under_normal_prior
from pymc_kameleon.emulator import EmulatorProblem, EmulatorRun, EmulatorSettings
from pymc_kameleon.models.targets import banana_logp, banana_sample

#: Exact draws the errors are measured against.
EXACT = 200_000
#: The sd of the funnel's neck coordinate ``v``.
FUNNEL_SD = 3.0
#: An error (mean or quantile in sds, sd as a ratio's distance from 1) counted as wrong.
WRONG = 0.15


def funnel_logp(X: np.ndarray) -> np.ndarray:
    """Normalised log density of Neal's funnel at each row of ``X`` (``d >= 2``): ``v = X[:, 0]
    ~ N(0, 3^2)`` and, given ``v``, each further coordinate ``N(0, exp(v/2)^2)``."""
    X = np.atleast_2d(X)
    v, rest = X[:, 0], X[:, 1:]
    log_v = -0.5 * (v / FUNNEL_SD) ** 2 - np.log(FUNNEL_SD * np.sqrt(2 * np.pi))
    return log_v + np.sum(-0.5 * rest**2 * np.exp(-v[:, None]) - 0.5 * v[:, None]
                          - 0.5 * np.log(2 * np.pi), axis=1)


def funnel_sample(n: int, dim: int, rng: int | np.random.Generator | None = None) -> np.ndarray:
    """``n`` exact draws of the funnel of :func:`funnel_logp` in ``dim`` dimensions."""
    rng = np.random.default_rng(rng)
    v = rng.normal(0.0, FUNNEL_SD, n)
    return np.column_stack([v, rng.normal(size=(n, dim - 1)) * np.exp(v / 2)[:, None]])


def curved_problem(shape: str, dim: int, twist: float
                   ) -> tuple[Callable[[np.random.Generator], EmulatorProblem], np.ndarray]:
    """The ``shape`` (``"banana"`` ``B(twist, 100)`` or ``"funnel"``) in ``dim`` dimensions:
    its problem under a ``N(0, 30^2 I)`` prior for a run's generator, and exact draws."""
    if shape == "funnel":
        log_target, exact = funnel_logp, funnel_sample(EXACT, dim, 0)
    else:
        log_target = partial(banana_logp, b=twist, v=V)
        exact = banana_sample(EXACT, dim, twist, V, rng=0)
    return partial(under_normal_prior, log_target, dim, PRIOR_SD), exact


def finish(run: EmulatorRun, exact: np.ndarray, **row) -> dict:
    """``row`` with how ``run``, stepped to its end, ended, and (if it returned draws) its
    weighted sample's largest errors against ``exact`` draws, and those of its first
    coordinate alone (``first``)."""
    while run.phase not in ("done", "fallback"):
        run.step()
    row.update(phase=run.phase, reason=run.reason, restarts=run.restarts,
               past=run.past_edge, evals=run.spent, kish=run.summary[0],
               khat=run.summary[1])
    if run.phase == "done":
        X, _, _, log_w = run.correction.weighted()
        row["mean"], row["sd"], row["q"] = errors(X, log_w, exact)
        row["first"] = errors(X[:, :1], log_w, exact[:, :1])
    return row


def run_one(seed: int, edge_weight: float, draws: int, exact: np.ndarray,
            problem: Callable[[np.random.Generator], EmulatorProblem]) -> dict:
    """One run at the defaults but ``edge_weight`` on ``problem`` (of the run's generator,
    seeded by ``seed``), ended by :func:`finish`."""
    rng = np.random.default_rng(seed)
    run = EmulatorRun(problem(rng), EmulatorSettings(edge_weight=edge_weight), draws, rng)
    return finish(run, exact, edge_weight=edge_weight, seed=seed)


def wrong(errs: tuple[float, ...]) -> bool:
    """Whether any of the errors of :func:`~benchmarks.research.design_edge.errors` is
    above ``WRONG``."""
    return max(errs) > WRONG


def controls(seeds: range, draws: int) -> list[dict]:
    """The defaults on the control targets (see the module), under a ``N(0, 20^2 I)``
    prior; errors against 200 000 exact draws."""
    rows = []
    for name, d in (("gaussian", 2), ("gaussian", 4), ("gaussian", 8), ("student-t5", 4)):
        for seed in seeds:
            rng = np.random.default_rng(seed)
            if name == "gaussian":
                A = rng.normal(size=(d, d))
                target = stats.multivariate_normal(np.ones(d), A @ A.T / d + 0.2 * np.eye(d))
            else:
                target = stats.multivariate_t(np.zeros(d), np.eye(d), df=5)
            exact = target.rvs(EXACT, random_state=0)
            run = EmulatorRun(under_normal_prior(target.logpdf, d, 20.0, rng),
                              EmulatorSettings(), draws, rng)
            row = finish(run, exact, target=f"{name} {d}-d", seed=seed)
            rows.append(row)
            print(f"{row['target']} seed {seed}: {row['phase']}, {row['restarts']} restarts, "
                  f"past_edge {row['past']:.2f} nats, {row['evals']} evaluations"
                  + (", errors: mean {mean:.3f} sd, sd {sd:.3f}, quantile {q:.3f} sd"
                     .format(**row) if "q" in row else f" ({row['reason']})"), flush=True)
    return rows


def variants(seeds: range, draws: int, shape: str, dim: int, twist: float) -> list[dict]:
    """Runs without the check past the edge and with it (the default) on the ``shape`` of
    :func:`curved_problem`; prints each run and, per variant, how many returned wrong
    draws (on the funnel also counting ``v`` alone)."""
    problem, exact = curved_problem(shape, dim, twist)
    rows = []
    for edge_weight in (np.inf, EmulatorSettings().edge_weight):
        for seed in seeds:
            row = run_one(seed, edge_weight, draws, exact, problem)
            rows.append(row)
            text = (f"edge_weight {edge_weight:g} seed {seed}: {row['phase']}, "
                    f"{row['restarts']} restarts, past_edge {row['past']:.2f} nats, "
                    f"{row['evals']} evaluations")
            if "q" in row:
                text += (f", Kish {row['kish']:.0f}, k-hat {row['khat']:.2f}, errors: mean "
                         f"{row['mean']:.3f} sd, sd {row['sd']:.3f}, quantile {row['q']:.3f} sd")
                if shape == "funnel":
                    text += ("; v: mean {:.3f} sd, sd {:.3f}, quantile {:.3f} sd"
                             .format(*row["first"]))
            else:
                text += f" ({row['reason']})"
            print(text, flush=True)
        done = [r for r in rows if r["edge_weight"] == edge_weight and "q" in r]
        bad = [r for r in done if wrong((r["mean"], r["sd"], r["q"]))]
        print(f"edge_weight {edge_weight:g}: {len(done)} of {len(seeds)} returned draws, "
              f"{len(bad)} of them with an error above {WRONG} (sd: {WRONG * 100:g} %)"
              + (f", {sum(wrong(r['first']) for r in done)} in v"
                 if shape == "funnel" else ""), flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs=2, default=[1, 10], metavar=("FIRST", "LAST"))
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--twist", type=float, default=B)
    parser.add_argument("--shape", choices=("banana", "funnel"), default="banana")
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--controls", action="store_true")
    args = parser.parse_args(argv)
    seeds = range(args.seeds[0], args.seeds[1] + 1)
    if args.controls:
        return controls(seeds, args.draws)
    return variants(seeds, args.draws, args.shape, args.dim, args.twist)


if __name__ == "__main__":
    main()
