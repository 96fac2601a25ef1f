"""KameleonSMC's tails against a long NUTS run: tail quantiles and sds, pooled over chains.

Usage::

    python -m benchmarks.research.smc_tails [--model eight-schools-nc] [--seeds 1 2 3 4 5 6]
        [--chains 6] [--draws 1000] [--kameleon '{}'] [--sampler kameleon]
        [--nuts benchmarks/results/<model>_nuts.json]

The reference is NUTS (4 chains of 50 000 draws, ``target_accept=0.95``), run once and
kept at ``--nuts`` (not in git): for a posterior NUTS samples well its tail quantiles have
ESS above 10^5, where the importance-sampling reference of :mod:`benchmarks.smc_reference`
has a Kish ESS of about 9 000.  Per seed (``--chains`` chains of
:func:`benchmarks.smc_compare.run_smc` with ``--sampler`` and ``--kameleon``): evaluations
per chain, the six-chain spread ESS (the smallest over coordinates), the largest 5 %/95 %
quantile error against both references (reference sds), the range of sd ratios against
NUTS.  Then, over every chain of every seed: each coordinate's quantile errors (a bias
common to the chains shows here, where one seed's errors are noise) and the spread ESS per
chain.  Results: ``docs/benchmarks/smc.md``, "smc-cross-fitted".
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pymc as pm

from ..common import quiet_pymc
from ..smc_compare import QUANTILES, Reference, _run, model_factory
from ..suite.metrics import spread_ess, stack_posterior
from ..suite.models import free_var_labels

__all__ = ["main", "nuts_reference"]


def nuts_reference(model_name: str, path: Path, seed: int = 11) -> dict:
    """Quantiles, means and sds of 200 000 NUTS draws of the model (kept at ``path``)."""
    if path.exists():
        return json.loads(path.read_text())
    model = model_factory(model_name)()
    with model:
        idata = pm.sample(draws=50_000, tune=2000, chains=4, cores=1, random_seed=seed,
                          target_accept=0.95, progressbar=False,
                          compute_convergence_checks=False)
    names = free_var_labels(model)[0]
    X = stack_posterior(idata.posterior, names).reshape(-1, len(names))
    ref = {"quantiles": np.quantile(X, QUANTILES, axis=0).tolist(),
           "mean": X.mean(0).tolist(), "sd": X.std(0).tolist(),
           "divergences": int(idata.sample_stats.diverging.sum()), "seed": seed}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ref))
    return ref


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="eight-schools-nc")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    parser.add_argument("--chains", type=int, default=6)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--kameleon", default="{}")
    parser.add_argument("--sampler", default="kameleon", choices=["kameleon", "imh"])
    parser.add_argument("--nuts", type=Path)
    args = parser.parse_args(argv)
    quiet_pymc()
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    ref = Reference(args.model)
    nuts = nuts_reference(args.model, args.nuts or Path(
        f"benchmarks/results/{args.model}_nuts.json"))
    q_nuts, sd_nuts = np.array(nuts["quantiles"]), np.array(nuts["sd"])
    run_args = SimpleNamespace(kameleon=args.kameleon, budget=0, draws=args.draws,
                               chains=args.chains)
    print(f"{args.model}, {args.sampler} {args.kameleon}; NUTS divergences "
          f"{nuts['divergences']}")
    print("| seed | evaluations per chain | spread ESS | largest quantile error "
          "(importance-sampling reference / NUTS) | sd ratios (NUTS) |")
    print("|---|---|---|---|---|")
    chains = []
    for seed in args.seeds:
        start = time.perf_counter()
        r = _run(args.sampler, args.model, ref, seed, run_args)
        X = r["draws"].reshape(args.chains, args.draws, -1)
        chains.append(X)
        q = np.quantile(r["draws"], QUANTILES, axis=0)
        err_is = float(np.max(np.abs(q - ref.quantiles) / ref.sd))
        err_nuts = float(np.max(np.abs(q - q_nuts) / ref.sd))
        ratio = r["draws"].std(0) / sd_nuts
        print(f"| {seed} | {r['evals']:.0f} | {r['ess']:.0f} | {err_is:.3f} / {err_nuts:.3f} "
              f"| {ratio.min():.3f}-{ratio.max():.3f} |  ({time.perf_counter() - start:.0f} s)",
              flush=True)
    X = np.concatenate(chains)
    q = np.quantile(X.reshape(-1, X.shape[-1]), QUANTILES, axis=0)
    err = (q - q_nuts) / ref.sd
    print(f"\nover {len(X)} chains (coordinates 0-{X.shape[-1] - 1}):")
    print("5 % quantile errors (NUTS sds):", np.array2string(err[0], precision=3))
    print("95 % quantile errors (NUTS sds):", np.array2string(err[1], precision=3))
    print("spread ESS per chain:", np.array2string(spread_ess(X.mean(1), ref.sd),
                                                     precision=0))


if __name__ == "__main__":
    main()
