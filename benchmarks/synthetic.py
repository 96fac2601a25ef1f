"""Synthetic benchmark: all samplers side by side on the banana and flower targets.

Usage::

    python -m benchmarks.synthetic --target {banana-moderate,banana-strong,flower}
                                   [--quick] [--chains N] [--jobs J] [--out DIR]
    python -m benchmarks.synthetic --replot docs/benchmarks/full

Full mode uses the paper's settings (Sejdinovic et al., 2014, Section 5.2; d = 8):
B(0.03, 100) 40k iterations with 20k burn-in, B(0.1, 100) 80k / 40k, F(10, 6, 6, 1) 120k /
60k; burn-in is PyMC's ``tune``.  ``--quick`` runs 2k + 2k iterations.  Every chain is its
own ``pm.sample(chains=1, cores=1)`` call (seed ``--seed + c`` for chain ``c``, the same seeds
for every sampler); chains are run seed by seed, all samplers per seed, so that load changes
of the machine hit all samplers alike.  ``--jobs 2`` runs two chains at a time in separate
processes (faster, but two processes compete for the memory bus: timings are less clean).

Writes to ``--out`` (default ``docs/benchmarks/full`` or ``docs/benchmarks/quick``):
``<target>.md`` (table), ``<target>.json`` (per-chain metrics), ``<target>_metrics.png`` and
``<target>_traces.png``.  ``--replot FOLDER`` redraws every ``<target>_metrics.png`` in the
folder from its ``<target>.json`` instead (:func:`benchmarks.plots.replot`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from .common import (
    METRICS,
    SAMPLERS,
    TARGETS,
    ChainResult,
    Target,
    fmt_mean_sd,
    run_chain,
    summarize,
)
from .plots import plot_metrics, plot_traces, replot

__all__ = ["QUICK", "main", "run_benchmark", "write_table"]

#: ``(tune, draws)`` of the quick mode.
QUICK = (2000, 2000)
#: Default number of chains per sampler in full mode (each target well under an hour on
#: 2 cores with ``--jobs 1``; see docs/benchmarks/README.md for the measured times).
FULL_CHAINS = {"banana-moderate": 3, "banana-strong": 2, "flower": 2}
QUICK_CHAINS = 3
#: The PyMC gradient-free samplers (for the issue #3 comparison).
PYMC_GRADIENT_FREE = ("metropolis", "demz", "slice")


def _machine_load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not available on every platform
        return "load average n/a"


def issue3_check(summary: dict) -> str:
    """Issue #3 criterion: FastKameleonStep ESS/s >= 3x the best PyMC gradient-free
    sampler's, with a coverage error no worse than Slice's (a sentence, or "" if a sampler
    is missing)."""
    if "fkamh" not in summary or not all(k in summary for k in PYMC_GRADIENT_FREE):
        return ""
    best = max(PYMC_GRADIENT_FREE, key=lambda k: summary[k]["ess_per_second"][0])
    fk_ess, best_ess = summary["fkamh"]["ess_per_second"][0], summary[best]["ess_per_second"][0]
    fk_cov, sl_cov = summary["fkamh"]["coverage"][0], summary["slice"]["coverage"][0]
    ratio = fk_ess / best_ess
    met = ratio >= 3.0 and fk_cov <= sl_cov
    return (f"Issue #3 criterion: FastKameleonStep ESS/s {fk_ess:.3g} vs best PyMC "
            f"gradient-free {SAMPLERS[best].label} {best_ess:.3g} (ratio {ratio:.2f}, "
            f"needs >= 3); coverage error {fk_cov:.3g} vs Slice {sl_cov:.3g} "
            f"(needs <=): **{'met' if met else 'not met'}**.")


def write_table(results: list[ChainResult], target: Target, path: Path, header: dict,
                mode_tune: int | None = None) -> str:
    """Write the markdown table of mean ± sd over chains (with a header) to ``path``.

    Samplers run with fewer tuning iterations than ``mode_tune`` are marked †.
    """
    summary = summarize(results)
    cols = ["sampler", "iterations"] + [title for _, title in METRICS]
    lines = [f"# {target.title}", ""]
    lines += [f"- {k}: {v}" for k, v in header.items()]
    lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for key, stats in summary.items():
        run = next(r for r in results if r.sampler == key)
        spec = SAMPLERS[key]
        name = spec.label + (" ‡" if spec.gradient else "")
        short = mode_tune is not None and run.tune < mode_tune
        iters = f"{run.tune:,} + {run.draws:,}" + (" †" if short else "")
        cells = [name, iters] + [fmt_mean_sd(*stats[m]) for m, _ in METRICS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Mean ± sd over chains; every chain is one `pm.sample(chains=1, cores=1)` call. "
        "Iterations are tune + draws. *min ESS*: ArviZ bulk ESS of the draws, minimum over "
        "dimensions. *ESS/s*: min ESS / wall time of the `pm.sample` call (tuning "
        "included). *ESS/1000 evals*: min ESS per 1000 log-density evaluations over the whole "
        "call (tuning included), counted exactly by `counted_model`. *coverage error*: mean "
        "|coverage - q| of the quantile regions q = 0.1..0.9 (banana: exact regions; flower: "
        "quantiles of |x|² from 200k exact i.i.d. draws of `flower_sample`). *acceptance*: "
        "mean of the `accepted` stat (Slice: none).",
        "",
        "‡ NUTS uses the gradient (PyTensor model): its *evals* are gradient evaluations "
        "(sum of `n_steps`) and its acceptance is the mean `acceptance_rate`.",
    ]
    if any("†" in line for line in lines):
        lines.append("† run with fewer iterations than the mode's setting (too slow).")
    check = issue3_check(summary)
    if check:
        lines += ["", check]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def _task(args) -> ChainResult:
    target, sampler, seed, tune, draws, keep = args
    with threadpool_limits(limits=1):
        return run_chain(target, sampler, seed, tune, draws, keep_trace=keep)


def run_benchmark(target: Target, tune: int, draws: int, chains: int, out: Path,
                  samplers: list[str] | None = None, jobs: int = 1, seed: int = 1,
                  mode: str = "custom", full: bool = False) -> list[ChainResult]:
    """Run every sampler for ``chains`` chains on ``target`` and write the outputs to ``out``.

    With ``full=True`` a sampler's ``full_fraction`` shortens its run (marked †).  Returns the
    per-chain results.
    """
    out.mkdir(parents=True, exist_ok=True)
    samplers = list(samplers or SAMPLERS)
    tasks = []
    for c in range(chains):
        for key in samplers:
            frac = SAMPLERS[key].full_fraction if full else 1.0
            tasks.append((target, key, seed + c, int(tune * frac), int(draws * frac), c == 0))
    started = datetime.datetime.now().astimezone()
    load_start = _machine_load()
    t0 = time.perf_counter()
    results: list[ChainResult] = []

    def report(r: ChainResult) -> None:
        results.append(r)
        print(f"  {SAMPLERS[r.sampler].label:22s} seed {r.seed:3d}: {r.wall:8.1f} s, "
              f"min ESS {r.ess:8.1f}, coverage error {r.coverage:.3f}, "
              f"‖mean‖ {r.mean_norm:.2f}", flush=True)

    if jobs <= 1:
        for task in tasks:
            report(_task(task))
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            for r in pool.map(_task, tasks):
                report(r)
    total = time.perf_counter() - t0
    header = {
        "mode": f"{mode}: tune {tune:,} + draws {draws:,} iterations, {chains} chain(s) per "
                f"sampler, seeds {seed}..{seed + chains - 1}, {jobs} job(s) in parallel",
        "run": f"{started:%Y-%m-%d %H:%M %Z}, total {total / 60:.1f} min; machine "
               f"{load_start} at start, {_machine_load()} at end",
        "versions": _versions(),
    }
    table = write_table(results, target, out / f"{target.key}.md", header, mode_tune=tune)
    (out / f"{target.key}.json").write_text(json.dumps(
        {"target": target.key, "title": target.title, **header,
         "chains": [r.to_dict() for r in results]}, indent=1))
    subtitle = f"\n{mode}: {tune:,} + {draws:,} iterations, {chains} chain(s)"
    plot_metrics(results, target, out / f"{target.key}_metrics.png", subtitle=subtitle,
                 full_iterations=tune + draws)
    plot_traces(results, target, out / f"{target.key}_traces.png")
    print(table)
    return results


def _versions() -> str:
    import arviz
    import pymc
    import pytensor

    return (f"python {platform.python_version()}, pymc {pymc.__version__}, pytensor "
            f"{pytensor.__version__}, numpy {np.__version__}, arviz {arviz.__version__}")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=sorted(TARGETS))
    parser.add_argument("--replot", type=Path, metavar="FOLDER",
                        help="redraw the metric figures in FOLDER from their JSON instead")
    parser.add_argument("--quick", action="store_true", help=f"tune + draws = {QUICK}")
    parser.add_argument("--chains", type=int, help="chains per sampler (default: per mode)")
    parser.add_argument("--jobs", type=int, default=1, help="chains run in parallel")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first chain")
    parser.add_argument("--samplers", help="comma-separated subset of " + ",".join(SAMPLERS))
    parser.add_argument("--dim", type=int, help="override the dimension (default 8)")
    parser.add_argument("--tune", type=int, help="override tune")
    parser.add_argument("--draws", type=int, help="override draws")
    parser.add_argument("--out", type=Path, help="output directory")
    args = parser.parse_args(argv)
    if args.replot is not None:
        for path in replot(args.replot):
            print(path)
        return
    if args.target is None:
        parser.error("--target is required unless --replot is given")

    target = TARGETS[args.target]
    if args.dim:
        target = target.with_dim(args.dim)
    mode = "quick" if args.quick else "full"
    tune, draws = QUICK if args.quick else (target.tune, target.draws)
    tune = args.tune if args.tune is not None else tune
    draws = args.draws if args.draws is not None else draws
    if (tune, draws) not in (QUICK, (target.tune, target.draws)):
        mode = "custom"
    chains = args.chains or (QUICK_CHAINS if args.quick else FULL_CHAINS[target.key])
    out = args.out or Path("docs/benchmarks") / ("quick" if args.quick else "full")
    samplers = args.samplers.split(",") if args.samplers else None
    unknown = set(samplers or ()) - set(SAMPLERS)
    if unknown:
        parser.error(f"unknown samplers {sorted(unknown)}; choose from {list(SAMPLERS)}")
    print(f"{target.title}: {mode}, tune {tune} + draws {draws}, {chains} chain(s)", flush=True)
    with threadpool_limits(limits=1):
        run_benchmark(target, tune, draws, chains, out, samplers=samplers, jobs=args.jobs,
                      seed=args.seed, mode=mode, full=(mode == "full"))


if __name__ == "__main__":
    main()
