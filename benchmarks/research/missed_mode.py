"""How often the emulator's correction recovers a mode its mode search missed.

Usage::

    python -m benchmarks.research.missed_mode [--seeds 200 229] [--draws 2000] \
        [--starts 1] [--settings '{"defensive_df": 3.0}']

Runs :class:`~pymc_kameleon.emulator.EmulatorRun` (free of PyMC) on the separated mixture
``0.3 N(-4 e_1, I) + 0.7 N(4 e_1, I)`` in 4 dimensions under a ``N(0, 20^2 I)`` prior, with
a mode search of ``--starts`` climbs (one: it finds one mode only), and prints per run the
small mode's share of the final weights, the evaluations, Kish's ESS and the climbs from
the correction; then how many runs end within 0.05 of 0.3.  Results:
``docs/benchmarks/emulator.md`` ("emulator-mixture-fresh-seeds").
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks.research.engine_problems import under_normal_prior
from pymc_kameleon.emulator import EmulatorProblem, EmulatorRun, EmulatorSettings
from pymc_kameleon.models.targets import mixture_logp

D, PRIOR_SD = 4, 20.0
WEIGHTS = np.array([0.3, 0.7])
MEANS = np.zeros((2, D))  # the modes at -4 e_1 and 4 e_1
MEANS[:, 0] = [-4.0, 4.0]


def log_target(X: np.ndarray) -> np.ndarray:
    """The mixture's normalised log density."""
    return mixture_logp(np.atleast_2d(X), MEANS, np.ones(2), WEIGHTS)


def problem(rng: np.random.Generator) -> EmulatorProblem:
    return under_normal_prior(log_target, D, PRIOR_SD, rng)


def main(argv: list[str] | None = None) -> list[tuple]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs=2, default=[200, 229], metavar=("FIRST", "LAST"))
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--starts", type=int, default=1, help="climbs of the mode search")
    parser.add_argument("--settings", default="{}", help="more EmulatorSettings (JSON)")
    args = parser.parse_args(argv)
    settings = EmulatorSettings(search_starts=args.starts, **json.loads(args.settings))
    rows = []
    for seed in range(args.seeds[0], args.seeds[1] + 1):
        rng = np.random.default_rng(seed)
        run = EmulatorRun(problem(rng), settings, args.draws, rng)
        while run.phase not in ("done", "fallback"):
            run.step()
        X, _, _, log_w = run.correction.weighted()
        w = np.exp(log_w - np.max(log_w))
        share = float(w[X[:, 0] < 0].sum() / w.sum())
        rows.append((seed, run.phase, round(share, 3), run.spent, round(run.summary[0]),
                     run.climbs))
        print("seed {} {}: small-mode share {}, {} evaluations, Kish {}, climbs {}"
              .format(*rows[-1]), flush=True)
    ok = sum(abs(r[2] - 0.3) < 0.05 for r in rows)
    spent = np.mean([r[3] for r in rows])
    print(f"within 0.05 of 0.3: {ok} of {len(rows)}; evaluations {spent:.0f} on average")
    return rows


if __name__ == "__main__":
    main()
