"""What the batch past the weighted sample's edge (``edge_weight``) changes on a curved ridge.

Usage::

    python -m benchmarks.research.past_edge [--seeds 1 10] [--draws 400] [--twist 0.1]
    python -m benchmarks.research.past_edge --controls [--seeds 1 4]

Runs :class:`~pymc_kameleon.emulator.EmulatorRun` (free of PyMC) at its defaults on the
banana of :mod:`benchmarks.research.design_edge` (``--twist``: its ``b``), once without
the batch (``edge_weight=inf``) and once with it (the default), and prints per run how it
ended (with the reason of a fallback), the corrections handed back to the design, the
last batch's largest weight over the sample's (``past_edge``, in nats), the evaluations,
Kish's ESS, Pareto's k-hat and the weighted sample's largest errors against exact draws.
With ``--controls`` it runs the defaults on targets whose proposals are heavier-tailed than
the posterior (a correlated Gaussian in 2, 4 and 8 dimensions, a Student-t with 5 degrees
of freedom in 4) and prints the same per run, with the check's false alarms (restarts).
Results: ``docs/benchmarks/emulator.md`` ("emulator-past-edge").
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from benchmarks.research.design_edge import B, V, errors, problem
from benchmarks.research.engine_problems import under_normal_prior
from pymc_kameleon.emulator import EmulatorRun, EmulatorSettings
from pymc_kameleon.models.targets import banana_sample


def finish(run: EmulatorRun, exact: np.ndarray, **row) -> dict:
    """``row`` with how ``run``, stepped to its end, ended, and (if it returned draws) its
    weighted sample's largest errors against ``exact`` draws."""
    while run.phase not in ("done", "fallback"):
        run.step()
    row.update(phase=run.phase, reason=run.reason, restarts=run.restarts,
               past=run.past_edge, evals=run.spent, kish=run.summary[0],
               khat=run.summary[1])
    if run.phase == "done":
        X, _, _, log_w = run.correction.weighted()
        row["mean"], row["sd"], row["q"] = errors(X, log_w, exact)
    return row


def run_one(seed: int, edge_weight: float, draws: int, exact: np.ndarray, b: float) -> dict:
    rng = np.random.default_rng(seed)
    run = EmulatorRun(problem(rng, b), EmulatorSettings(edge_weight=edge_weight), draws, rng)
    return finish(run, exact, edge_weight=edge_weight, seed=seed)


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
            exact = target.rvs(200_000, random_state=0)
            run = EmulatorRun(under_normal_prior(target.logpdf, d, 20.0, rng),
                              EmulatorSettings(), draws, rng)
            row = finish(run, exact, target=f"{name} {d}-d", seed=seed)
            rows.append(row)
            print(f"{row['target']} seed {seed}: {row['phase']}, {row['restarts']} restarts, "
                  f"past_edge {row['past']:.2f} nats, {row['evals']} evaluations"
                  + (", errors: mean {mean:.3f} sd, sd {sd:.3f}, quantile {q:.3f} sd"
                     .format(**row) if "q" in row else f" ({row['reason']})"), flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs=2, default=[1, 10], metavar=("FIRST", "LAST"))
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--twist", type=float, default=B)
    parser.add_argument("--controls", action="store_true")
    args = parser.parse_args(argv)
    if args.controls:
        return controls(range(args.seeds[0], args.seeds[1] + 1), args.draws)
    exact = banana_sample(200_000, 2, args.twist, V, rng=0)
    rows = []
    for edge_weight in (np.inf, EmulatorSettings().edge_weight):
        for seed in range(args.seeds[0], args.seeds[1] + 1):
            row = run_one(seed, edge_weight, args.draws, exact, args.twist)
            rows.append(row)
            text = (f"edge_weight {edge_weight:g} seed {seed}: {row['phase']}, "
                    f"{row['restarts']} restarts, past_edge {row['past']:.2f} nats, "
                    f"{row['evals']} evaluations")
            if "q" in row:
                text += (f", Kish {row['kish']:.0f}, k-hat {row['khat']:.2f}, errors: mean "
                         f"{row['mean']:.3f} sd, sd {row['sd']:.3f}, quantile {row['q']:.3f} sd")
            else:
                text += f" ({row['reason']})"
            print(text, flush=True)
        done = [r for r in rows if r["edge_weight"] == edge_weight and "q" in r]
        wrong = [r for r in done if r["sd"] > 0.15 or r["q"] > 0.15 or r["mean"] > 0.15]
        print(f"edge_weight {edge_weight:g}: {len(done)} of {args.seeds[1] - args.seeds[0] + 1} "
              f"returned draws, {len(wrong)} of them with an error above 0.15 (sd: 15 %)",
              flush=True)
    return rows


if __name__ == "__main__":
    main()
