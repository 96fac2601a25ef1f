"""FastKameleonStep: sampling efficiency and cost as functions of the number of features D.

Usage::

    python -m benchmarks.research.n_features [--target banana-moderate] [--features 50,100,200,400]
                                    [--chains 3] [--tune 20000] [--draws 20000]

Runs ``FastKameleonStep(n_features=D)`` for each D on the same seeds with the single-chain
runner of :mod:`benchmarks.common` and writes ``docs/benchmarks/n_features.md``: min ESS,
ESS/s, coverage error and µs per iteration (mean ± sd over chains).  It is the evidence for
the default ``n_features=200`` together with the dissertation's Section 5.1 (D < 50 gives poor
proposals, D > 350 adds cost without better proposals).
"""

from __future__ import annotations

import argparse
import datetime
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from pymc_kameleon import FastKameleonStep

from ..common import SAMPLERS, TARGETS, SamplerSpec, fmt_mean_sd, mean_sd, run_chain

__all__ = ["main"]


def _register(n_features: int) -> str:
    key = f"fkamh-D{n_features}"
    SAMPLERS[key] = SamplerSpec(key, f"FastKameleonStep D={n_features}",
                                lambda: FastKameleonStep(n_features=n_features), ours=True)
    return key


def _fmt(values: list[float], digits: str = ".3g") -> str:
    return fmt_mean_sd(*mean_sd(values), digits)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="banana-moderate", choices=sorted(TARGETS))
    parser.add_argument("--features", default="50,100,200,400")
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--tune", type=int, default=20000)
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/n_features.md"))
    args = parser.parse_args(argv)
    target = TARGETS[args.target]
    features = [int(f) for f in args.features.split(",")]
    keys = [_register(m) for m in features]
    started = datetime.datetime.now().astimezone()
    t0 = time.perf_counter()
    results = {k: [] for k in keys}
    with threadpool_limits(limits=1):
        for c in range(args.chains):
            for key in keys:
                r = run_chain(target, key, seed=1 + c, tune=args.tune, draws=args.draws)
                results[key].append(r)
                print(f"{key} seed {1 + c}: {r.wall:.1f} s, min ESS {r.ess:.1f}, "
                      f"coverage {r.coverage:.3f}", flush=True)
    lines = [
        f"# FastKameleonStep: number of random Fourier features D ({target.title})",
        "",
        f"- command: `python -m benchmarks.research.n_features --target {args.target} --features "
        f"{args.features} --chains {args.chains} --tune {args.tune} --draws {args.draws}`",
        f"- run: {started:%Y-%m-%d %H:%M %Z}, {(time.perf_counter() - t0) / 60:.1f} min",
        "",
        "| D | acceptance | min ESS | ESS/s | coverage error | ‖mean‖ | µs / iteration |",
        "|---|---|---|---|---|---|---|",
    ]
    for m, key in zip(features, keys, strict=True):
        rs = results[key]
        lines.append(
            f"| {m} | {_fmt([r.accept for r in rs], '.2f')} | {_fmt([r.ess for r in rs])} | "
            f"{_fmt([r.ess_per_second for r in rs])} | {_fmt([r.coverage for r in rs])} | "
            f"{_fmt([r.mean_norm for r in rs])} | "
            f"{_fmt([1e6 * r.wall / (r.tune + r.draws) for r in rs], '.0f')} |"
        )
    lines += ["", "Mean ± sd over chains (seeds 1..N, the same for every D); metrics as in the "
              "synthetic benchmark tables."]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
