"""The emulator mode's wall time against the number of workers, on a model that waits.

The model is :func:`benchmarks.smc_scaling.waiting_model`: an ``as_op`` likelihood that
sleeps ``--wait`` seconds per evaluation (an external program: an ODE solver, a simulator)
and then returns a Gaussian log density.  For each seed and number of workers, one chain of
``pm.sample_smc(kernel=KameleonSMC, emulator=True, executor=ThreadPoolExecutor(n))`` (the
sleep releases the GIL, as a subprocess call does), and the same with the stages and
``recycle`` instead of the emulator.  It prints per run the wall time, the evaluations (all
counted, ``attrs["n_evals_total"]``), the speed-up over one worker, whether the draws equal
the one-worker run's bit for bit, and where the time went, measured by timing wrappers:

* ``search``: the emulator's multi-start mode search (its evaluations included, so it
  overlaps ``wait``);
* ``wait``: every batch of true evaluations (the executor's map; the search's too);
* ``gp``: the emulator's GP fits (hyperparameters and the held-out error);
* ``temper``: the tempered SMC on the emulator;
* ``other``: the rest of the main process (correction's mixture fits, PyMC's bookkeeping);
* ``cpu``: the process's CPU time (the main process's work; sleeping workers cost none).

and, against the model's exact posterior (Gaussian), the largest error of a mean in
posterior sds and of an sd (relative), and Kish's ESS of the emulator's weights.
``--set name=value`` passes :class:`~pymc_kameleon.emulator.EmulatorSettings` fields (e.g.
``--set n_subsample=100``, a cheaper tempering on the emulator, or ``--set keep_draws=True``).

Usage::

    python -m benchmarks.emulator_workers --workers 1 2 4 8 --seeds 1 2 3
    python -m benchmarks.emulator_workers --modes emulator --set n_subsample=100
    python -m benchmarks.emulator_workers --modes emulator --workers 1 2 4 8 --set keep_draws=True

Results: ``docs/benchmarks/emulator.md`` (section "Workers").
"""

from __future__ import annotations

import argparse
import ast
import os
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import pymc as pm

from pymc_kameleon import KameleonSMC
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.emulator import EmulatorSettings, engine, surrogate
from pymc_kameleon.smc import evaluation

from .quiet import quiet_pymc
from .smc_scaling import WAIT, waiting_model

#: seconds spent in each part of the run (reset per run); wrappers add to it
CLOCK: dict[str, float] = defaultdict(float)


def _timed(owner, name: str, key: str):
    """Replace ``owner.name`` by a wrapper adding its wall time to ``CLOCK[key]``."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            CLOCK[key] += time.perf_counter() - start

    setattr(owner, name, wrapper)
    return owner, name, original


@contextmanager
def timers():
    """Time the evaluation batches, the mode search, the GP fits and the tempering."""
    patched = [_timed(evaluation.Evaluations, "raw", "wait"),
               _timed(engine.EmulatorRun, "_modes", "search"),
               _timed(surrogate.LogDensityEmulator, "fit", "gp"),
               _timed(surrogate.LogDensityEmulator, "held_out_error", "gp"),
               _timed(engine, "temper", "temper")]
    try:
        yield
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


#: the waiting model's exact posterior per coordinate: prior N(0, 3^2), likelihood
#: N(1, 0.5^2) in x
POST_SD = np.sqrt(1.0 / (1.0 / 9.0 + 4.0))
POST_MEAN = POST_SD**2 * 4.0


def run(model: pm.Model, workers: int, draws: int, seed: int, mode: str,
        recycle: int, settings: dict | None = None) -> dict:
    """One chain; its draws, wall time, evaluations, the time split and its errors."""
    kwargs = ({"emulator": EmulatorSettings(**(settings or {}))} if mode == "emulator"
              else {"recycle": recycle})
    CLOCK.clear()
    with ThreadPoolExecutor(workers) as pool, model, timers():
        start, cpu = time.perf_counter(), time.process_time()
        idata = pm.sample_smc(draws, kernel=KameleonSMC, chains=1, cores=1,
                              progressbar=False, random_seed=seed,
                              compute_convergence_checks=False, executor=pool, **kwargs)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    ss = group_dataset(idata, "sample_stats")
    phase = ss["emulator_phase"].values.ravel() if "emulator_phase" in ss else np.array([])
    x = group_dataset(idata, "posterior")["x"].values
    flat = x.reshape(-1, x.shape[-1])
    return {"x": x, "wall": wall, "cpu": cpu, "evals": int(ss.attrs["n_evals_total"]),
            "fallback": bool(np.any(phase == 4)),
            "kish": float(ss["kish_ess"].values.ravel()[-1]) if "kish_ess" in ss else np.nan,
            "mean_err": float(np.max(np.abs(flat.mean(0) - POST_MEAN)) / POST_SD),
            "sd_err": float(np.max(np.abs(flat.std(0) / POST_SD - 1))),
            **{k: CLOCK[k] for k in ("wait", "search", "gp", "temper")}}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wait", type=float, default=0.01, help="seconds per evaluation")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--recycle", type=int, default=2000,
                        help="recycle= of the stages runs (their draws)")
    parser.add_argument("--modes", nargs="+", choices=["emulator", "recycle"],
                        default=["emulator", "recycle"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--set", nargs="+", default=[], metavar="NAME=VALUE",
                        help="EmulatorSettings fields (Python literals)")
    args = parser.parse_args(argv)
    settings = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in args.set)}
    quiet_pymc()
    model = waiting_model(args.dim)
    WAIT["seconds"] = 0.0
    for mode in args.modes:  # compile once before timing
        run(model, 1, 50, 0, mode, 50, settings)
    WAIT["seconds"] = args.wait
    print(f"{'mode':>8} {'seed':>4} {'workers':>7} {'wall s':>7} {'evals':>6} {'speedup':>7} "
          f"{'same':>5} {'search':>6} {'wait':>6} {'gp':>6} {'temper':>6} {'other':>6} "
          f"{'cpu':>6} {'kish':>6} {'mean e':>6} {'sd e':>6}")
    print("load average (1, 5, 15 min): " + " ".join(f"{v:.1f}" for v in os.getloadavg()))
    rows = []
    for mode in args.modes:
        for seed in args.seeds:
            first = None
            for w in args.workers:
                r = run(model, w, args.draws, seed, mode, args.recycle, settings)
                first = first or r
                other = r["wall"] - r["wait"] - r["gp"] - r["temper"]
                r.update(mode=mode, seed=seed, workers=w, speedup=first["wall"] / r["wall"],
                         same=bool(np.array_equal(r["x"], first["x"])), other=other)
                rows.append(r)
                print(f"{mode:>8} {seed:>4} {w:>7} {r['wall']:>7.2f} {r['evals']:>6} "
                      f"{r['speedup']:>7.2f} {str(r['same']):>5} {r['search']:>6.2f} "
                      f"{r['wait']:>6.2f} {r['gp']:>6.2f} {r['temper']:>6.2f} "
                      f"{other:>6.2f} {r['cpu']:>6.2f} {r['kish']:>6.0f} {r['mean_err']:>6.3f} "
                      f"{r['sd_err']:>6.3f}{'  fell back' if r['fallback'] else ''}", flush=True)
    print("load average (1, 5, 15 min): " + " ".join(f"{v:.1f}" for v in os.getloadavg()))
    print("\nmean over seeds")
    print(f"{'mode':>8} {'workers':>7} {'wall s':>7} {'evals':>7} {'speedup':>7} {'same':>5} "
          f"{'cpu':>6} {'search':>6} {'temper':>6}")
    for mode in args.modes:
        for w in args.workers:
            sel = [r for r in rows if r["mode"] == mode and r["workers"] == w]
            print(f"{mode:>8} {w:>7} {np.mean([r['wall'] for r in sel]):>7.2f} "
                  f"{np.mean([r['evals'] for r in sel]):>7.0f} "
                  f"{np.mean([r['speedup'] for r in sel]):>7.2f} "
                  f"{str(all(r['same'] for r in sel)):>5} "
                  f"{np.mean([r['cpu'] for r in sel]):>6.2f} "
                  f"{np.mean([r['search'] for r in sel]):>6.2f} "
                  f"{np.mean([r['temper'] for r in sel]):>6.2f}")
    return rows


if __name__ == "__main__":
    main()
