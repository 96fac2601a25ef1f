"""KameleonSMC's cost settings on the suite's posteriors: evaluations and honest ESS.

One ``pm.sample_smc(kernel=KameleonSMC, chains=C, cores=1)`` call per setting and seed on a
suite model with a reference posterior (:mod:`benchmarks.suite.reference`).  Per run it
prints the evaluations per chain (the ``n_evals`` stats: prior draws, every MH step and the
recycling top-up), the ESS per chain measured from the spread of the chains' means (every
chain is an independent run, so ``ESS = reference variance / variance of the chain means``;
with ``C`` chains that estimate has a relative error of about ``sqrt(2 / (C - 1))``), ESS per
1000 evaluations (minimum and median over the scalars), the largest mean error (reference
sds), the range of the sd ratios, and the log evidence of SMC and of the recycled importance
sample beside the reference where one exists (``benchmarks/data/smc_references.json``).

Usage::

    python -m benchmarks.smc_settings --model eight-schools-nc --draws 500 --chains 16 \\
        --settings '{}' '{"recycle": 4000}' --seeds 1

Results: ``docs/benchmarks/smc.md`` (section "Cost settings").
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pymc as pm

from pymc_kameleon import KameleonSMC
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.compat import smc_stat_per_chain as per_chain

from .common import quiet_pymc
from .smc import SMC_REFERENCES
from .suite.metrics import stack_posterior
from .suite.models import MODELS, free_var_labels
from .suite.reference import load_reference


def run(model_name: str, draws: int, chains: int, seed: int, settings: dict) -> dict:
    """One ``pm.sample_smc`` call; the row of numbers this script prints."""
    spec = MODELS[model_name]
    model, ref = spec.factory(), load_reference(model_name)
    names, _ = free_var_labels(model)
    start = time.perf_counter()
    with model:
        idata = pm.sample_smc(draws, kernel=KameleonSMC, chains=chains, cores=1,
                              progressbar=False, random_seed=seed,
                              compute_convergence_checks=False, **settings)
    wall = time.perf_counter() - start
    stats = group_dataset(idata, "sample_stats")

    stages = stats.attrs.get("chain_stages")  # where the chains' stage counts differ

    def last(name):
        return np.array([c[-1] for c in per_chain(stats[name].values, chains, stages)])

    z = (stack_posterior(group_dataset(idata, "posterior"), names) - ref.mean) / ref.sd
    evals = np.array([c.sum() for c in per_chain(stats["n_evals"].values, chains, stages)])
    ess = 1.0 / z.mean(axis=1).var(axis=0, ddof=1)  # per chain and scalar
    return {
        "model": model_name, "settings": settings, "seed": seed, "draws": draws,
        "chains": chains, "evals": float(evals.mean()),
        "stages": float(np.mean([len(c) for c in per_chain(stats["beta"].values, chains, stages)])),
        "ess_min": float(ess.min()), "ess_median": float(np.median(ess)),
        "mean_err": float(np.abs(z.mean(axis=(0, 1))).max()),
        "sd_ratio": (float(z.std(axis=(0, 1)).min()), float(z.std(axis=(0, 1)).max())),
        "log_z": last("log_marginal_likelihood").tolist(),
        "log_z_recycled": last("log_evidence_recycled").tolist(),
        "recycled_ess": last("recycled_ess").tolist(),
        "drift": last("drift").tolist(), "wall": wall,
    }


def row(r: dict) -> str:
    per_k = 1000.0 / r["evals"]
    ref = SMC_REFERENCES.get(r["model"], {}).get("log_z", np.nan)
    lz, lzr = np.array(r["log_z"]), np.array(r["log_z_recycled"])
    return (f"{r['model']:<17} {json.dumps(r['settings']):<40} {r['seed']:>4} {r['evals']:>9.0f} "
            f"{r['stages']:>6.1f} {r['ess_min']:>7.0f} {r['ess_median']:>7.0f} "
            f"{r['ess_min'] * per_k:>7.1f} {r['ess_median'] * per_k:>7.1f} "
            f"{r['mean_err']:>6.3f} {r['sd_ratio'][0]:>5.3f}-{r['sd_ratio'][1]:<5.3f} "
            f"{np.mean(lz):>8.2f}±{np.std(lz):<5.2f} {np.mean(lzr):>8.2f}±{np.std(lzr):<5.2f} "
            f"{ref:>8.2f} {max(r['drift']):>6.1f} {r['wall']:>6.0f}")


HEADER = (f"{'model':<17} {'settings':<40} {'seed':>4} {'evals':>9} {'stages':>6} "
          f"{'ESS min':>7} {'median':>7} {'/1k min':>7} {'median':>7} {'mean e':>6} "
          f"{'sd ratio':<11} {'log Z (SMC)':>14} {'log Z (recyc.)':>14} {'ref':>8} "
          f"{'drift':>6} {'wall s':>6}")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="eight-schools-nc", choices=sorted(MODELS))
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--settings", nargs="+", default=["{}"],
                        help="KameleonSMC keyword arguments, one JSON object per setting")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    quiet_pymc()
    print(HEADER)
    rows = []
    for settings in map(json.loads, args.settings):
        for seed in args.seeds:
            rows.append(run(args.model, args.draws, args.chains, seed, settings))
            print(row(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
