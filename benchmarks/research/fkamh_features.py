"""FastKameleonStep against KameleonStep: ESS per iteration for feature-count and frequency choices.

Usage::

    python -m benchmarks.research.fkamh_features [--target banana-moderate] [--seeds 1,2,3]
                                        [--variants kamh,fkamh-d200-gaussian,fkamh]
                                        [--tune N] [--draws N] [--jsonl FILE]

Every variant runs one chain per seed with the single-chain runner of
:mod:`benchmarks.common` (the same seeds for every variant), by default with the paper's
iterations of the target.  Prints one line per chain and a table of min bulk ESS per
post-burn-in iteration (mean ± sd over seeds), coverage error, acceptance and µs per
iteration; ``--jsonl`` appends the per-chain metrics to a file.  Variants:

* ``kamh``: ``KameleonStep()``;
* ``fkamh``: ``FastKameleonStep()`` (current defaults);
* ``fkamh-d<D>-<frequencies>``: ``FastKameleonStep(n_features=D, frequencies=...)``, e.g.
  ``fkamh-d400-halton`` (the defaults for d = 8);
* ``...-restart`` appended: the feature moments restart at every bandwidth refresh
  (``bandwidth_tolerance = 0``, the rule before the fix); ``fkamh-d200-gaussian-restart``
  is ``FastKameleonStep`` as it was before the fix;
* ``...-tt<x>`` appended: ``trace_tolerance=x`` (e.g. ``fkamh-d400-halton-tt0``: the whole
  feature covariance, no truncation).

The results are on ``docs/benchmarks/fkamh_features.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from pymc_kameleon import FastKameleonStep, KameleonStep
from pymc_kameleon.adaptation.local_gaussian import FastKameleonAdaptation

from ..common import SAMPLERS, TARGETS, SamplerSpec, fmt_mean_sd, mean_sd, run_chain

__all__ = ["main", "register"]


class _Restarting(FastKameleonAdaptation):
    """The moments restart at every refresh that changes the bandwidth (before the fix)."""

    bandwidth_tolerance = 0.0


def register(key: str) -> str:
    """Add the variant ``key`` (see the module docstring) to :data:`benchmarks.common.SAMPLERS`."""
    if key == "kamh":
        factory = KameleonStep
    elif key == "fkamh":
        factory = FastKameleonStep
    elif key.startswith("fkamh-d"):
        n_features, frequencies, *rest = key[len("fkamh-d"):].split("-")
        kernel = _Restarting if "restart" in rest else FastKameleonAdaptation
        tolerances = [r for r in rest if r.startswith("tt")]
        if set(rest) - {"restart", *tolerances} or len(tolerances) > 1:
            raise ValueError(f"unknown variant {key!r}")
        kwargs = {"trace_tolerance": float(tolerances[0][2:])} if tolerances else {}

        def factory(n=int(n_features), f=frequencies, kernel=kernel, kwargs=kwargs):
            return FastKameleonStep(n_features=n, frequencies=f, adaptation_class=kernel,
                                    **kwargs)
    else:
        raise ValueError(f"unknown variant {key!r}")
    SAMPLERS[key] = SamplerSpec(key, key, factory, ours=True)
    return key


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="banana-moderate", choices=sorted(TARGETS))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--variants", default="kamh,fkamh-d200-gaussian,fkamh")
    parser.add_argument("--tune", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--jsonl", type=Path, default=None)
    args = parser.parse_args(argv)
    target = TARGETS[args.target]
    tune = target.tune if args.tune is None else args.tune
    draws = target.draws if args.draws is None else args.draws
    keys = [register(k) for k in args.variants.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    results: dict[str, list] = {k: [] for k in keys}
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        for seed in seeds:
            for key in keys:
                r = run_chain(target, key, seed=seed, tune=tune, draws=draws)
                results[key].append(r)
                print(f"{key} seed {seed}: ESS/iteration {r.ess / r.draws:.4f}, "
                      f"coverage {r.coverage:.3f}, acceptance {r.accept:.3f}, "
                      f"{r.wall:.1f} s", flush=True)
                if args.jsonl is not None:
                    with args.jsonl.open("a") as fh:
                        fh.write(json.dumps(r.to_dict()) + "\n")
    print(f"\n{target.title}, {tune} + {draws} iterations, seeds {args.seeds}, "
          f"{(time.perf_counter() - t0) / 60:.1f} min\n")
    print("| variant | ESS / iteration | coverage error | acceptance | µs / iteration |")
    print("|---|---|---|---|---|")
    for key in keys:
        rs = results[key]
        ess = mean_sd([1e3 * r.ess / r.draws for r in rs])
        print(f"| {key} | {fmt_mean_sd(*ess)} e-3 | "
              f"{fmt_mean_sd(*mean_sd([r.coverage for r in rs]))} | "
              f"{fmt_mean_sd(*mean_sd([r.accept for r in rs]), '.2f')} | "
              f"{fmt_mean_sd(*mean_sd([1e6 * r.wall / (tune + draws) for r in rs]), '.0f')} |")


if __name__ == "__main__":
    main()
