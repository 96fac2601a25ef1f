"""Cost per Metropolis-Hastings iteration of every step method, and where the time goes.

Usage::

    python -m benchmarks.cost_per_step [--dims 2,8,10,32,100] [--iters 2000]
                                       [--out docs/benchmarks/cost_per_step.md]
                                       [--sample-dim 10] [--sample-budget 1000,1000]
                                       [--sample-repeats 3] [--sample-steps LABELS]

For each dimension ``d`` the model is the banana B(0.1, 100) of
:func:`pymc_kameleon.models.banana_model` (a cheap PyTensor log density).  Each step is driven
by ``step.step(point)`` in a loop, as ``pm.sample`` does, after one untimed block (Numba and
PyTensor compilation, warm-up of the caches):

* our steps (``warmup_draws=20``, so the kernel adaptation starts early) are timed in two
  blocks while tuning (early and late: the cost must not grow with the chain) and one block
  after ``stop_tuning()``.  A PyMC draw holds ``n_steps`` MH iterations; the cost per
  iteration is the time per draw divided by ``n_steps``;
* PyMC's ``Metropolis``, ``DEMetropolisZ`` and ``Slice``: one block while tuning and one
  after; their cost is per ``step.step`` call (one "iteration" each; Metropolis and Slice
  update every coordinate in it, Slice with a variable number of evaluations).

Then, end to end, every step samples ``banana_model(d)`` for each ``d`` of ``--sample-dim``
(one or several, comma-separated) with ``pm.sample`` (one chain, tuning included, our steps
at their defaults, PyMC's with ``d`` times the tune and draws, i.e. as many MH iterations):
PyMC's ``sampling_time`` per chain and per MH iteration, as a ratio to DEMetropolisZ's.
``--sample-steps`` restricts this part to some steps (labels as in the tables, e.g.
``KameleonStep,RandomWalkStep``: PyMC's Slice at ``d = 100`` would take minutes), and
``--dims ""`` skips the per-iteration part.

The time is split into the log density (the compiled PyTensor function, measured per call and
multiplied by the evaluations made, from the ``n_evals`` stat for our steps), the step's own
numerics and bookkeeping (its ``astep`` minus the log density) and PyMC's loop
(``ArrayStepShared.step``: point dict <-> raveled array).  The time ``pm.sample`` adds around
``step.step`` (trace recording, progress) is not included.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pymc as pm
from threadpoolctl import threadpool_limits

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep
from pymc_kameleon.compat import group_dataset, start_chain
from pymc_kameleon.math.compiled import HAVE_NUMBA
from pymc_kameleon.models import banana_model

from .common import quiet_pymc

__all__ = ["main", "time_step"]

B = 0.1
_WARMUP = 20
#: (label, step class, ours) of the compared steps; ``pm.sample`` makes them at their defaults
STEPS = [
    ("KameleonStep", KameleonStep, True),
    ("FastKameleonStep", FastKameleonStep, True),
    ("KernelHMCStep", KernelHMCStep, True),
    ("RandomWalkStep", RandomWalkStep, True),
    ("pm.Metropolis", pm.Metropolis, False),
    ("pm.DEMetropolisZ", pm.DEMetropolisZ, False),
    ("pm.Slice", pm.Slice, False),
]
#: steps whose kernel phase the timed blocks reach early (``warmup_draws=_WARMUP``)
_KERNEL_PHASE = (KameleonStep, FastKameleonStep, KernelHMCStep)


def _timed_factory(cls):
    """The factory of the timed blocks: a short warm-up where there is a kernel phase."""
    if cls in _KERNEL_PHASE:
        return lambda: cls(warmup_draws=_WARMUP)
    return cls


class _Timer:
    """Wall time spent in a step's ``astep`` (wrapped on the instance)."""

    def __init__(self, step):
        self.total = 0.0
        inner = step.astep

        def astep(q0):
            start = time.perf_counter()
            try:
                return inner(q0)
            finally:
                self.total += time.perf_counter() - start

        step.astep = astep


def _logp_cost(step, point, n: int = 2000) -> float:
    """Seconds per call of the block's compiled log density (ours only)."""
    x = np.concatenate([np.ravel(point[v.name]) for v in step.vars]).astype(float)
    fn = step.compiled_logp
    fn(x)
    start = time.perf_counter()
    for _ in range(n):
        fn(x)
    return (time.perf_counter() - start) / n


def time_step(make, dim: int, iters: int, ours: bool, seed: int = 0) -> dict:
    """Microseconds per MH iteration in each phase, split as described in the module doc.

    Returns ``{phase: {"total", "logp", "numerics", "pymc"}}`` and ``"n_steps"``, ``"rank"``.
    """
    model = banana_model(dim, b=B)
    with model:
        step = make()
    n_steps = getattr(step, "n_steps", 1) if ours else 1
    draws = max(iters // n_steps, 5)
    start_chain(step, np.random.default_rng(seed), tune=10**6, draws=0)
    timer = _Timer(step)
    point = model.initial_point()
    logp = _logp_cost(step, point) if ours else float("nan")

    def block(n: int) -> dict:
        nonlocal point
        timer.total, evals = 0.0, 0
        start = time.perf_counter()
        for _ in range(n):
            point, stats = step.step(point)
            evals += int(stats[0].get("n_evals", 0)) if ours else 0
        wall = time.perf_counter() - start
        per = 1e6 / (n * n_steps)
        logp_s = evals * logp if ours else 0.0
        return {"total": wall * per, "logp": logp_s * per if ours else float("nan"),
                "numerics": (timer.total - logp_s) * per, "pymc": (wall - timer.total) * per}

    block(_WARMUP + max(draws, 60) if ours else draws)  # warm-up, compilation, first refresh
    out = {"tune early": block(draws)}
    if ours:
        block(2 * draws)
        out["tune late"] = block(draws)
    step.stop_tuning()
    block(max(draws // 10, 5))  # untimed: the frozen path may compile on its first call
    out["draws"] = block(draws)
    out["n_steps"] = n_steps
    adapt = getattr(step, "_adapt", None)
    out["rank"] = getattr(adapt, "rank", None)
    return out


def time_sample(make, dim: int, tune: int, draws: int, ours: bool, seed: int = 0,
                repeats: int = 3, model: pm.Model | None = None) -> dict:
    """End to end: ``pm.sample`` (one chain, tuning included) on ``banana_model(dim)``
    (or on ``model``, when given), the median of ``repeats`` runs (seeds
    ``seed, seed + 1, ...``).

    The step is built before the clock starts (it compiles the log density); the time is
    PyMC's own ``sampling_time`` attribute.  MH iterations are the log-density evaluations
    (the ``n_evals`` stat, tuning included) for our steps and one per draw for PyMC's.
    """
    if model is None:
        model = banana_model(dim, b=B)
    runs = []
    for rep in range(repeats):
        with model:
            step = make()
            idata = pm.sample(draws=draws, tune=tune, chains=1, cores=1, step=step,
                              random_seed=seed + rep, progressbar=False,
                              compute_convergence_checks=False, discard_tuned_samples=False)
        seconds = float(group_dataset(idata, "posterior").attrs["sampling_time"])
        if ours:  # one evaluation per MH iteration (a rejected non-finite proposal has none)
            iterations = sum(int(group_dataset(idata, g)["n_evals"].sum())
                             for g in ("warmup_sample_stats", "sample_stats"))
        else:
            iterations = tune + draws
        runs.append({"seconds": seconds, "iterations": iterations,
                     "us": 1e6 * seconds / iterations})
    return sorted(runs, key=lambda r: r["us"])[len(runs) // 2]


def _cell(res: dict) -> str:
    total, logp, num, loop = (res[k] for k in ("total", "logp", "numerics", "pymc"))
    logp_s = "-" if np.isnan(logp) else f"{logp:.1f}"
    return f"{total:.0f} ({logp_s} / {num:.1f} / {loop:.1f})"


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="2,8,10,32,100")
    parser.add_argument("--iters", type=int, default=2000,
                        help="MH iterations per timed block (at least 5 draws)")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/cost_per_step.md"))
    parser.add_argument("--sample-dim", default="10",
                        help="dimensions of the end-to-end pm.sample comparison, "
                             "comma-separated (0 or empty: skip it)")
    parser.add_argument("--sample-budget", default="1000,1000", help="tune,draws of it")
    parser.add_argument("--sample-repeats", type=int, default=3,
                        help="runs per step of it (the median is reported)")
    parser.add_argument("--sample-steps", default=None,
                        help="labels of the steps of it, comma-separated (default: all)")
    args = parser.parse_args(argv)
    dims = [int(d) for d in args.dims.split(",") if d.strip()]
    sample_dims = [int(d) for d in args.sample_dim.split(",") if d.strip() and int(d) > 0]
    labels = [label for label, _, _ in STEPS]
    sample_steps = labels if args.sample_steps is None else [
        v.strip() for v in args.sample_steps.split(",") if v.strip()]
    unknown = sorted(set(sample_steps) - set(labels))
    if unknown:
        parser.error(f"unknown --sample-steps {unknown}; choose from {labels}")
    quiet_pymc()
    started = datetime.datetime.now().astimezone()
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    results: dict[int, list] = {}
    with threadpool_limits(limits=1):
        for d in dims:
            results[d] = []
            for label, cls, ours in STEPS:
                res = time_step(_timed_factory(cls), d, args.iters, ours)
                results[d].append((label, res))
                print(d, f"{label:18s}", {k: _cell(v) for k, v in res.items()
                                          if isinstance(v, dict)}, flush=True)
        sampled: dict[int, list] = {}
        tune, draws = (int(v) for v in args.sample_budget.split(","))
        for d in sample_dims:
            sampled[d] = []
            for label, cls, ours in STEPS:
                if label not in sample_steps:
                    continue
                # PyMC's steps make one MH iteration per draw: d times the draws give them
                # as many iterations as our steps make (n_steps = d), and a clock reading
                # long enough to be stable (0.05 s at tune 1000 + draws 1000 was not)
                k = 1 if ours else d
                res = time_sample(cls, d, k * tune, k * draws, ours,
                                  repeats=args.sample_repeats)
                sampled[d].append((label, res))
                print("pm.sample", d, f"{label:18s}", res, flush=True)
    packages = ("pymc", "pytensor", "numpy") + (("numba",) if HAVE_NUMBA else ())
    versions = ", ".join(f"{p} {version(p)}" for p in packages)
    lines = [
        "# Cost per Metropolis-Hastings iteration",
        "",
        f"- run: {started:%Y-%m-%d %H:%M %Z}, {(time.perf_counter() - t0) / 60:.1f} min; load "
        f"average at start {load0}, at end " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        f"- machine: {platform.machine()}, {os.cpu_count()} cores (BLAS limited to 1 thread); "
        f"Python {platform.python_version()}, {versions}; compiled numerics: "
        f"{'Numba' if HAVE_NUMBA else 'NumPy fallback'}",
        f"- command: `python -m benchmarks.cost_per_step --dims {args.dims or repr('')} "
        f"--iters {args.iters}` (end to end: `--sample-dim {args.sample_dim} "
        f"--sample-budget {args.sample_budget} --sample-repeats {args.sample_repeats}"
        + ("" if args.sample_steps is None else f" --sample-steps {args.sample_steps}")
        + "`)",
        "",
        "Model `banana_model(d, b=0.1)` (PyTensor). Microseconds per MH iteration "
        "(our steps: per draw / `n_steps`; PyMC's: per `step.step` call), as "
        "`total (log density / step numerics and bookkeeping / PyMC's loop)`. "
        "The log density is timed per call times the evaluations made (ours only; for "
        "PyMC's steps it is inside the middle number). Timings on a shared machine are "
        "noisy (about +-20 %).",
    ]
    for d in dims:
        lines += ["", f"## d = {d}", "",
                  "| step | n_steps | tuning (early) | tuning (late) | draws | F-KAMH rank |",
                  "|---|---|---|---|---|---|"]
        for label, res in results[d]:
            late = _cell(res["tune late"]) if "tune late" in res else ""
            rank = "" if not res["rank"] else str(res["rank"])
            lines.append(f"| {label} | {res['n_steps']} | {_cell(res['tune early'])} | {late} "
                         f"| {_cell(res['draws'])} | {rank} |")
    for d, rows in sampled.items():
        base = dict(rows).get("pm.DEMetropolisZ", {}).get("us")
        lines += ["", f"## pm.sample end to end, d = {d}", "",
                  f"`pm.sample(tune={tune}, draws={draws}, chains=1, cores=1)` on "
                  f"`banana_model({d}, b=0.1)`, our steps at their defaults "
                  f"(warm-up included), PyMC's with {d} times the tune and "
                  "draws (as many MH iterations), median of "
                  f"{args.sample_repeats} runs, "
                  "PyMC's `sampling_time` per chain and per MH iteration (our steps: "
                  "`n_steps` iterations per draw; PyMC's: one `step.step` call per draw). "
                  "This includes the log density and what `pm.sample` adds per draw (trace, "
                  "stats), which our steps share among their `n_steps` iterations.", "",
                  "| step | sampling s | MH iterations | us per iteration | / DEMetropolisZ |",
                  "|---|---|---|---|---|"]
        for label, res in rows:
            ratio = f"{res['us'] / base:.2f}" if base else "-"
            lines.append(f"| {label} | {res['seconds']:.2f} | {res['iterations']} | "
                         f"{res['us']:.1f} | {ratio} |")
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
