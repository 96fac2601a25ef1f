"""Cost per step of the kameleon samplers as the chain grows, and where the time goes.

Usage::

    python -m benchmarks.cost_per_step [--checkpoints 2000,20000] [--block 1000]
                                       [--out docs/benchmarks/cost_per_step.md]

On the 8-d banana B(0.1, 100) (the PyTensor model of :func:`pymc_kameleon.models.banana_model`):

1. For KameleonStep with ``n_history`` in {250, 1000, 4000} and FastKameleonStep with
   ``n_features`` in {100, 200, 500}: the step is driven by ``step.step(point)`` in a loop,
   kept in tuning mode; at each checkpoint (number of steps taken so far) a block of
   ``--block`` steps is timed (they count as steps of the chain).  After the last checkpoint
   ``stop_tuning()`` is called and one more block is timed (the cost of a draw).  Reference
   rows (our KernelHMCStep, PyMC's samplers) are timed at the first checkpoint only.
2. A cProfile of ``pm.sample`` with FastKameleonStep (defaults): the time is split into the
   log density (the compiled PyTensor function, call overhead included), our numerics
   (proposal and adaptation), our step bookkeeping (Metropolis-Hastings decision, stats) and
   PyMC's plumbing (point dict <-> raveled array, trace recording, the sampling loop).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import os
import pstats
import time
from pathlib import Path

import numpy as np
import pymc as pm
from threadpoolctl import threadpool_limits

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep
from pymc_kameleon.compat import start_chain
from pymc_kameleon.models import banana_model

from .common import quiet_pymc

__all__ = ["main", "profile_sample", "time_steps"]

DIM, B = 8, 0.1

#: (label, factory) of the configurations followed over the whole chain.
CONFIGS = [
    *[(f"KameleonStep n_history={n}", lambda n=n: KameleonStep(n_history=n))
      for n in (250, 1000, 4000)],
    *[(f"FastKameleonStep n_features={m}", lambda m=m: FastKameleonStep(n_features=m))
      for m in (100, 200, 500)],
]
#: Reference samplers, timed at the first checkpoint only.
REFERENCES = [
    ("KernelHMCStep finite (L ~ U{10..50})", lambda: KernelHMCStep(surrogate="finite")),
    ("KernelHMCStep lite (L ~ U{10..50})", lambda: KernelHMCStep(surrogate="lite")),
    ("pm.Metropolis (element-wise, 8 updates)", lambda: pm.Metropolis()),
    ("pm.Metropolis(blocked=True)", lambda: pm.Metropolis(blocked=True)),
    ("pm.DEMetropolisZ", lambda: pm.DEMetropolisZ()),
]


def time_steps(make_step, checkpoints: list[int], block: int, seed: int = 0) -> dict:
    """Microseconds per ``step.step`` call at each checkpoint and after ``stop_tuning``.

    Returns ``{checkpoint: us_per_step, ..., "draws": us_per_step}``.
    """
    model = banana_model(DIM, b=B)
    with model:
        step = make_step()
    start_chain(step, np.random.default_rng(seed))
    point = model.initial_point()
    taken, out = 0, {}

    def run(n: int) -> float:
        nonlocal point, taken
        start = time.perf_counter()
        for _ in range(n):
            point, _ = step.step(point)
        taken += n
        return 1e6 * (time.perf_counter() - start) / n

    for c in checkpoints:
        if c > taken:
            run(c - taken)
        out[c] = run(block)
    step.stop_tuning()
    out["draws"] = run(block)
    return out


def _find(stats: pstats.Stats, file_end: str, name: str) -> float:
    """Cumulative time of the function ``name`` defined in a file ending with ``file_end``."""
    total = 0.0
    for (filename, _, func), (_, _, _, ct, _) in stats.stats.items():
        if func == name and filename.replace(os.sep, "/").endswith(file_end):
            total += ct
    return total


def profile_sample(tune: int = 2000, draws: int = 20000, seed: int = 1) -> dict:
    """cProfile of ``pm.sample`` with FastKameleonStep on the 8-d banana.

    Returns the wall time with and without the profiler, the time shares and the top
    functions by own time (a text block).
    """
    model = banana_model(DIM, b=B)
    kwargs = dict(draws=draws, tune=tune, chains=1, cores=1, random_seed=seed,
                  progressbar=False, compute_convergence_checks=False)
    with model:
        start = time.perf_counter()
        pm.sample(step=FastKameleonStep(), **kwargs)
        plain = time.perf_counter() - start
        step = FastKameleonStep()
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        pm.sample(step=step, **kwargs)
        profiler.disable()
        profiled = time.perf_counter() - start
    stats = pstats.Stats(profiler)
    total = stats.total_tt
    step_call = _find(stats, "pymc/step_methods/arraystep.py", "step")
    astep = _find(stats, "pymc_kameleon/step_base.py", "astep")
    logp = _find(stats, "pymc_kameleon/step_base.py", "_logp")
    propose = _find(stats, "pymc_kameleon/local_gaussian.py", "_propose")
    adapt = (_find(stats, "pymc_kameleon/local_gaussian.py", "_adapt_step")
             + _find(stats, "pymc_kameleon/local_gaussian.py", "_on_stop_tuning"))
    sync = _find(stats, "pymc_kameleon/step_base.py", "_sync_state")
    shares = {
        "log density (compiled PyTensor function, call overhead included)": logp,
        "our numerics: proposal (Jacobian, J^T C J, Cholesky, sampling, densities)": propose,
        "our numerics: adaptation while tuning (Welford, reservoir, refresh)": adapt,
        "our step bookkeeping (MH decision, stats dict, state sync)": astep - logp - propose
        - adapt,
        "PyMC: ArrayStepShared.step (point dict <-> raveled array)": step_call - astep,
        "PyMC: pm.sample loop, trace recording, setup, InferenceData": total - step_call,
    }
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(15)
    top = [line for line in buf.getvalue().splitlines() if line.strip()]
    start = next(i for i, line in enumerate(top) if line.lstrip().startswith("ncalls"))
    return {"plain": plain, "profiled": profiled, "total": total, "shares": shares,
            "sync": sync, "top": "\n".join(top[start:]), "tune": tune, "draws": draws}


def _table(rows: list[tuple[str, dict]], checkpoints: list[int]) -> list[str]:
    cols = [f"after {c:,} steps" for c in checkpoints] + ["draws (after stop_tuning)"]
    lines = ["| step | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for label, res in rows:
        cells = [f"{res[c]:.0f}" if c in res else "" for c in checkpoints]
        lines.append(f"| {label} | " + " | ".join(cells + [f"{res['draws']:.0f}"]) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", default="2000,20000",
                        help="comma-separated step counts at which to time a block")
    parser.add_argument("--block", type=int, default=1000, help="steps per timed block")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile part")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/cost_per_step.md"))
    args = parser.parse_args(argv)
    checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
    quiet_pymc()
    started = datetime.datetime.now().astimezone()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    rows = []
    with threadpool_limits(limits=1):
        for label, make in CONFIGS:
            rows.append((label, time_steps(make, checkpoints, args.block)))
            print(f"{label:45s}", {k: round(v) for k, v in rows[-1][1].items()}, flush=True)
        refs = []
        for label, make in REFERENCES:
            refs.append((label, time_steps(make, checkpoints[:1], args.block)))
            print(f"{label:45s}", {k: round(v) for k, v in refs[-1][1].items()}, flush=True)
        prof = None if args.no_profile else profile_sample()
    lines = [
        "# Cost per step on the 8-d banana B(0.1, 100)",
        "",
        f"- run: {started:%Y-%m-%d %H:%M %Z}, {(time.perf_counter() - t0) / 60:.1f} min, load "
        f"average at start {load}, at end "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        f"- command: `python -m benchmarks.cost_per_step --checkpoints {args.checkpoints} "
        f"--block {args.block}`",
        "",
        f"Microseconds per `step.step(point)` call (mean over a block of {args.block} steps), "
        "model `banana_model(8, b=0.1)` (PyTensor log density). The step stays in tuning mode "
        "up to the last checkpoint (adaptation included); the last column is timed after "
        "`stop_tuning()`, i.e. the cost of a draw.",
        "",
        *_table(rows, checkpoints),
        "",
        "Reference samplers (first checkpoint only; one *iteration* each, e.g. 8 coordinate "
        "updates and 16 log-density evaluations for the element-wise `pm.Metropolis`):",
        "",
        *_table(refs, checkpoints[:1]),
    ]
    if prof is not None:
        total = prof["total"]
        lines += [
            "",
            "## Where the time goes: FastKameleonStep (defaults, 200 features) in `pm.sample`",
            "",
            f"cProfile of `pm.sample(tune={prof['tune']:,}, draws={prof['draws']:,}, "
            f"chains=1, cores=1)`: {prof['profiled']:.1f} s under the profiler, "
            f"{prof['plain']:.1f} s without "
            f"({1e6 * prof['plain'] / (prof['tune'] + prof['draws']):.0f} µs per iteration). "
            "The profiler adds a roughly constant cost per Python call, so it inflates the "
            "plumbing (many small calls) more than the numerics (few NumPy calls).",
            "",
            "| part | seconds | share |",
            "|---|---|---|",
            *[f"| {k} | {v:.2f} | {100 * v / total:.0f}% |" for k, v in prof["shares"].items()],
            "",
            "Top 15 functions by own time:",
            "",
            "```",
            prof["top"],
            "```",
        ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
