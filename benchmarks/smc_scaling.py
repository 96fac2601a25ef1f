"""KameleonSMC's wall time against the number of workers, on a model that waits.

The model's likelihood is an ``as_op`` Op that sleeps a fixed time (standing in for an
external program: an ODE solver, a simulator) and then returns a Gaussian log density.  One
chain of ``pm.sample_smc(kernel=KameleonSMC, executor=...)`` per number of workers, with a
``ThreadPoolExecutor`` (the sleep releases the GIL, as a subprocess call does) or a
``ProcessPoolExecutor``; it prints the wall time, the speedup over one worker beside the
ideal, the evaluations, and whether the draws equal the one-worker run's.

Usage::

    python -m benchmarks.smc_scaling --wait 0.01 --workers 1 2 4 8 16 32 --draws 200

Results: ``docs/benchmarks/smc.md`` (section "Parallel evaluation").
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.compile.ops import as_op

from pymc_kameleon import KameleonSMC
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.compat import smc_stat_per_chain as per_chain

from .common import quiet_pymc

WAIT = {"seconds": 0.01}


@as_op(itypes=[pt.dvector], otypes=[pt.dscalar])
def waiting_loglik(x):
    """log N(1 | x, 0.5^2) per coordinate, after waiting ``WAIT["seconds"]``."""
    time.sleep(WAIT["seconds"])
    return np.asarray(-0.5 * np.sum((x - 1.0) ** 2 / 0.25))


def waiting_model(dim: int = 2) -> pm.Model:
    with pm.Model() as model:
        x = pm.Normal("x", 0, 3, shape=dim)
        pm.Potential("lik", waiting_loglik(x))
    return model


def run(model: pm.Model, workers: int, draws: int, kind: str, seed: int):
    pool = (ThreadPoolExecutor if kind == "threads" else ProcessPoolExecutor)(workers)
    with pool, model:
        start = time.perf_counter()
        idata = pm.sample_smc(draws, kernel=KameleonSMC, chains=1, cores=1, progressbar=False,
                              random_seed=seed, compute_convergence_checks=False,
                              executor=pool)
        wall = time.perf_counter() - start
    evals = per_chain(group_dataset(idata, "sample_stats")["n_evals"].values, 1)[0].sum()
    return group_dataset(idata, "posterior")["x"].values, wall, int(evals)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wait", type=float, default=0.01, help="seconds per evaluation")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--kind", choices=["threads", "processes"], default="threads")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    quiet_pymc()
    WAIT["seconds"] = args.wait
    model = waiting_model()
    run(model, 1, 20, args.kind, args.seed)  # compile once before timing
    print(f"{'workers':>7} {'wall s':>8} {'speedup':>8} {'ideal':>6} {'evals':>7} identical")
    rows, first = [], None
    for w in args.workers:
        draws, wall, evals = run(model, w, args.draws, args.kind, args.seed)
        first = first or (draws, wall)
        rows.append({"workers": w, "wall": wall, "speedup": first[1] / wall, "evals": evals,
                     "identical": bool(np.array_equal(draws, first[0]))})
        r = rows[-1]
        print(f"{w:>7} {wall:>8.2f} {r['speedup']:>8.2f} {w:>6} {evals:>7} {r['identical']}",
              flush=True)
    return rows


if __name__ == "__main__":
    main()
