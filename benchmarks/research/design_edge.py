"""What the design's edge rule (``max_edge``) changes where a design would end too early.

Usage::

    python -m benchmarks.research.design_edge [--seeds 1 20] [--draws 400] \
        [--settle 100] [--min-rounds 1] [--max-edge 0.05] [--twist 0.1]

Runs :class:`~pymc_kameleon.emulator.EmulatorRun` (free of PyMC) on the banana
``B(0.1, 100)`` (``--twist``: its ``b``) in 2 dimensions (Sejdinovic et al., 2014) under
a ``N(0, 30^2 I)`` prior, with a ``settle`` so loose that the design may end after one
round (``--settle 0.05 --min-rounds 3``: the defaults), once without the rule
(``max_edge=1``) and once with it.  Per run it prints the design's rounds and points, the
share of the emulator's posterior past the design's edge (its sd above a nat) when the
design ended, the evaluations, Kish's ESS, Pareto's k-hat and the weighted sample's
largest errors against exact draws of the banana: means and 5 % / 95 % quantiles in sds,
sds as a ratio.  Results: ``docs/benchmarks/emulator.md`` ("emulator-design-edge",
"emulator-banana-arms").
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.research.engine_problems import under_normal_prior
from pymc_kameleon.emulator import EmulatorProblem, EmulatorRun, EmulatorSettings
from pymc_kameleon.models.targets import banana_logp, banana_sample

B, V, PRIOR_SD = 0.1, 100.0, 30.0


def problem(rng: np.random.Generator, b: float = B) -> EmulatorProblem:
    """The banana ``B(b, 100)`` as the posterior under the prior."""
    return under_normal_prior(lambda X: banana_logp(X, b, V), 2, PRIOR_SD, rng)


def _weighted_quantile(x: np.ndarray, w: np.ndarray, p: float) -> float:
    order = np.argsort(x)
    return float(x[order][np.searchsorted(np.cumsum(w[order]), p)])


def errors(X: np.ndarray, log_w: np.ndarray, exact: np.ndarray) -> tuple[float, float, float]:
    """The largest error of a mean and of a 5 % / 95 % quantile (in exact sds) and of an
    sd (as a ratio's distance from 1) of the weighted sample ``X``."""
    w = np.exp(log_w - np.max(log_w))
    w /= w.sum()
    mean = w @ X
    sd = np.sqrt(w @ (X - mean) ** 2)
    ref_mean, ref_sd = exact.mean(0), exact.std(0)
    q = max(abs(_weighted_quantile(X[:, i], w, p) - np.quantile(exact[:, i], p)) / ref_sd[i]
            for i in range(X.shape[1]) for p in (0.05, 0.95))
    return (float(np.max(np.abs(mean - ref_mean) / ref_sd)),
            float(np.max(np.abs(sd / ref_sd - 1))), float(q))


def run_one(seed: int, settings: EmulatorSettings, draws: int, exact: np.ndarray,
            b: float = B) -> dict:
    rng = np.random.default_rng(seed)
    run = EmulatorRun(problem(rng, b), settings, draws, rng)
    while run.phase in ("start", "design"):
        run.step()
    row = {"seed": seed, "rounds": run.design_rounds, "design": sum(len(x) for x in run.X),
           "edge": run.edge}
    while run.phase not in ("done", "fallback"):
        run.step()
    row.update(phase=run.phase, evals=run.spent, kish=run.summary[0], khat=run.summary[1])
    if run.phase == "done":
        X, _, _, log_w = run.correction.weighted()
        row["mean"], row["sd"], row["q"] = errors(X, log_w, exact)
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs=2, default=[1, 20], metavar=("FIRST", "LAST"))
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--settle", type=float, default=100.0)
    parser.add_argument("--max-edge", type=float, default=0.05)
    parser.add_argument("--min-rounds", type=int, default=1)
    parser.add_argument("--twist", type=float, default=B)
    args = parser.parse_args(argv)
    exact = banana_sample(200_000, 2, args.twist, V, rng=0)
    rows = []
    for max_edge in (1.0, args.max_edge):
        settings = EmulatorSettings(settle=args.settle, min_rounds=args.min_rounds,
                                    max_edge=max_edge)
        for seed in range(args.seeds[0], args.seeds[1] + 1):
            row = {"max_edge": max_edge,
                   **run_one(seed, settings, args.draws, exact, args.twist)}
            rows.append(row)
            print("max_edge {max_edge:g} seed {seed}: {rounds} rounds, {design} points, "
                  "edge {edge:.3f}; {phase}, {evals} evaluations, Kish {kish:.0f}, "
                  "k-hat {khat:.2f}".format(**row)
                  + (", errors: mean {mean:.3f} sd, sd {sd:.3f}, quantile {q:.3f} sd"
                     .format(**row) if "q" in row else ""), flush=True)
        mine = [r for r in rows if r["max_edge"] == max_edge]
        done = [r for r in mine if "q" in r]
        print(f"max_edge {max_edge:g}: edge above 0.05 in "
              f"{sum(r['edge'] > 0.05 for r in mine)} of {len(mine)}; design points "
              f"{np.mean([r['design'] for r in mine]):.0f}, evaluations "
              f"{np.mean([r['evals'] for r in mine]):.0f} on average; largest errors over "
              f"{len(done)} finished runs: mean "
              f"{max((r['mean'] for r in done), default=np.nan):.3f} sd, sd "
              f"{max((r['sd'] for r in done), default=np.nan):.3f}, quantile "
              f"{max((r['q'] for r in done), default=np.nan):.3f} sd", flush=True)
    return rows


if __name__ == "__main__":
    main()
