"""Overhead of sampling 4 chains through Dask against ``pm.sample(cores=2)`` on one machine.

Usage::

    python -m benchmarks.distributed_overhead [--repeats 3] [--scale 1.0]
                                              [--out docs/benchmarks/distributed.md]

Two models, both sampled with :class:`pymc_kameleon.RandomWalkStep`, 4 chains:

* *cheap*: a correlated 2-d Gaussian (:func:`pymc_kameleon.models.synthetic.gaussian_model`), 2000
  tuning + 2000 draws per chain; a log-density evaluation costs microseconds.
* *expensive*: a 2-d pseudo-marginal model whose likelihood estimator burns 5 ms of CPU per
  evaluation (:func:`pymc_kameleon.pseudo_marginal_potential`), 250 + 250 per chain.

Three ways, interleaved within every repeat so that they share the machine's load:

1. ``pm.sample(chains=4, cores=2)``, timed from building the model and the step to the
   returned ``InferenceData``;
2. :func:`pymc_kameleon.distributed.sample` with its embedded ``LocalCluster`` (2 worker
   processes, one thread each): everything the call does, starting and closing the cluster
   included;
3. the same with a ``LocalCluster`` started beforehand (not timed) and one untimed warm-up
   call on it, so the worker processes have imported PyMC and compiled the model.

``--scale`` multiplies the numbers of iterations (e.g. ``0.1`` for a quick look).  PyMC and
PyTensor are imported inside functions only: the worker processes re-import this module
(multiprocessing "spawn") and should not import PyTensor before the worker plugin of
``pymc_kameleon.distributed`` has chosen their compilation directory.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

N_CHAINS = 4
N_WORKERS = 2
SEED = 20261123
COV = np.array([[1.0, 0.6], [0.6, 2.0]])
#: CPU seconds that one evaluation of the expensive model's estimator burns.
ESTIMATOR_SECONDS = 0.005


# ------------------------------------------------------------------ models (top level: picklable)
def cheap_model():
    from pymc_kameleon.models.synthetic import gaussian_model

    return gaussian_model(COV)


def busy_estimator(theta: np.ndarray, rng: np.random.Generator,
                   seconds: float = ESTIMATOR_SECONDS) -> float:
    """Log of an unbiased likelihood estimate that costs ``seconds`` of CPU (busy loop)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return float(-0.5 * theta @ theta + 0.3 * rng.standard_normal() - 0.045)


def expensive_model():
    import pymc as pm

    from pymc_kameleon import pseudo_marginal_potential

    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 3.0, shape=2)
        pseudo_marginal_potential("likelihood", busy_estimator, theta)
    return model


def step_factory():
    from pymc_kameleon import RandomWalkStep

    return RandomWalkStep()


MODELS = {
    "cheap": (cheap_model, 2000, "2-d Gaussian, 2000 + 2000 iterations per chain"),
    "expensive": (expensive_model, 250,
                  f"pseudo-marginal, {ESTIMATOR_SECONDS * 1e3:.0f} ms per evaluation, "
                  "250 + 250 iterations per chain"),
}
WAYS = {
    "pm_sample": f"`pm.sample(chains={N_CHAINS}, cores={N_WORKERS})`",
    "dask_embedded": "`distributed.sample`, embedded LocalCluster (start + close included)",
    "dask_client": "`distributed.sample`, LocalCluster started beforehand (warm workers)",
}


# ------------------------------------------------------------------------------- the runs
def _quiet() -> None:
    import logging
    import warnings

    import pymc  # noqa: F401 - sets the level of its logger when imported

    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def run_pm_sample(model_factory, n: int) -> float:
    import pymc as pm

    start = time.perf_counter()
    with model_factory():
        step = step_factory()
        pm.sample(draws=n, tune=n, chains=N_CHAINS, cores=N_WORKERS, step=step,
                  random_seed=SEED, progressbar=False, compute_convergence_checks=False)
    return time.perf_counter() - start


def run_dask(model_factory, n: int, client=None) -> float:
    """One timed call: the whole of it, the embedded cluster's start and close included."""
    from pymc_kameleon import distributed as pkd

    start = time.perf_counter()
    pkd.sample(model_factory, step_factory, chains=N_CHAINS, client=client,
               cluster_kwargs={"n_workers": N_WORKERS}, draws=n, tune=n,
               random_seed=SEED, progressbar=False, compute_convergence_checks=False)
    return time.perf_counter() - start


def start_client():
    import distributed

    cluster = distributed.LocalCluster(n_workers=N_WORKERS, threads_per_worker=1,
                                       processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0")
    return cluster, distributed.Client(cluster, set_as_default=False)


def measure(repeats: int, scale: float) -> dict[str, dict[str, list[float]]]:
    """Wall times, ``{model: {way: [seconds per repeat]}}``."""
    times: dict[str, dict[str, list[float]]] = {m: {w: [] for w in WAYS} for m in MODELS}
    cluster, client = start_client()
    try:
        for key, (factory, n, _) in MODELS.items():
            n = max(10, int(round(n * scale)))
            run_dask(factory, n, client)  # warm-up: imports and compilation in the workers
            run_pm_sample(factory, n)  # ... and in this process
            for r in range(repeats):
                for way in WAYS:
                    if way == "pm_sample":
                        t = run_pm_sample(factory, n)
                    elif way == "dask_embedded":
                        t = run_dask(factory, n)
                    else:
                        t = run_dask(factory, n, client)
                    times[key][way].append(t)
                    print(f"{key:9s} repeat {r + 1}/{repeats} {way:13s} {t:6.2f} s", flush=True)
    finally:
        client.close()
        cluster.close()
    return times


# ------------------------------------------------------------------------------- the page
def _versions() -> str:
    import arviz
    import dask
    import distributed
    import pymc
    import pytensor

    return (f"Python {platform.python_version()}, PyMC {pymc.__version__}, PyTensor "
            f"{pytensor.__version__}, ArviZ {arviz.__version__}, NumPy {np.__version__}, "
            f"Dask {dask.__version__}, distributed {distributed.__version__}")


def table(times: dict[str, dict[str, list[float]]]) -> str:
    from .common import fmt_mean_sd, mean_sd

    lines = ["| model | way | wall time (s) | vs pm.sample |", "|---|---|---|---|"]
    for key, per_way in times.items():
        base = mean_sd(per_way["pm_sample"])[0]
        for way, values in per_way.items():
            mean, sd = mean_sd(values)
            extra = "" if way == "pm_sample" else f"{mean - base:+.1f} s ({mean / base:.2f}x)"
            lines.append(f"| {key} | {WAYS[way]} | {fmt_mean_sd(mean, sd)} | {extra} |")
    return "\n".join(lines)


def page(times, command: str, started: datetime.datetime, minutes: float, load_start,
         load_end, repeats: int, scale: float) -> str:
    models = "\n".join(f"- *{k}*: {desc}" for k, (_, _, desc) in MODELS.items())
    return f"""# Overhead of the Dask path: 4 chains on 2 cores

- run: {started:%Y-%m-%d %H:%M} UTC, {minutes:.1f} min, load average at start
  {" ".join(f"{x:.2f}" for x in load_start)}, at end {" ".join(f"{x:.2f}" for x in load_end)}
- command: `{command}`
- versions: {_versions()}
- machine: {os.cpu_count()} cores, shared with other jobs (see the load average)

Wall time of sampling {N_CHAINS} chains with `RandomWalkStep` ({repeats} repeats, mean ± sd,
iterations scaled by {scale:g}), from the factories to the returned `InferenceData`:

{models}

{table(times)}

How to read it: `pm.sample(cores={N_WORKERS})` forks its chain processes (Linux, Python < 3.14)
from a process that has already imported PyMC and built and compiled everything, while each
Dask task builds and compiles its model in its worker; the embedded cluster also starts
{N_WORKERS} fresh worker processes, which import PyMC (several seconds of CPU each, more on a
loaded machine), and stops them again (they are killed if still alive after 4 s).  The
difference to `pm.sample` is that overhead; with a running cluster (third row) it is what
every further call costs.  A warm-up call before the timed repeats filled the PyTensor
compilation caches of both (the embedded cluster's workers keep theirs in
`<base_compiledir>/pymc-kameleon-dask/`).
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies the numbers of iterations")
    parser.add_argument("--out", type=Path, help="write the result page (Markdown) here")
    args = parser.parse_args(argv)
    _quiet()
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    times = measure(args.repeats, args.scale)
    minutes = (time.perf_counter() - t0) / 60
    load_end = os.getloadavg()
    print(table(times))
    if args.out is not None:
        command = "python -m benchmarks.distributed_overhead " + " ".join(
            sys.argv[1:] if argv is None else argv)
        args.out.write_text(page(times, command.strip(), started, minutes, load_start,
                                 load_end, args.repeats, args.scale))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
