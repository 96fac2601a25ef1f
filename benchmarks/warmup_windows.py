"""What the warm-up's windows learn: preconditioner, scale and acceptance per chain.

``python -m benchmarks.warmup_windows --models truncated --seeds 1,2,3 --variants code,late``
``python -m benchmarks.warmup_windows --climb --models radon-nc,gp-poisson``

Runs ``RandomWalkStep()`` with ``pm.sample``'s defaults (4 chains one after the other,
tune=1000, draws=1000) on suite models and prints, per run, the suite's criteria and, per
chain, what its warm-up ended with: the reference covariance whitened by the final map
(eigenvalues; 1 where the map matches the posterior), the final scale over
``2.38 / sqrt(d)``, the acceptance after tuning, and for every window the draws it held, its
accepted moves and its raw covariance whitened by the reference (eigenvalues below 1: the
window saw less spread than the posterior has).  Variants of the schedule:

* ``code``: the schedule of the code being run (:func:`~pymc_kameleon.adaptation.warmup.
  window_ends` and the kernel as they are);
* ``late``: commit c3f0f8a's schedule, reverted in d4c978d: the windows of ``code`` plus
  one ending at 90 % of tuning (meaningful only where ``code`` is main's schedule).

``--climb`` instead drives four chains by hand through their first window (75 draws, the
warm-up's 500 assumed) and prints where the climb from the initial point ended
(:func:`~pymc_kameleon.adaptation.warmup.climb_end`), from which draw the window kept its
moments, and the log densities at the start and at the window's level.

Measurements: docs/benchmarks/suite.md, "The random walk's last covariance window".
"""

from __future__ import annotations

import argparse
import json
from contextlib import contextmanager

import numpy as np
import pymc as pm

from pymc_kameleon import RandomWalkStep
from pymc_kameleon.adaptation import warmup_kernel
from pymc_kameleon.adaptation.warmup import climb_end
from pymc_kameleon.compat import start_chain

from .common import quiet_pymc
from .suite.metrics import accuracy, diagnostics, stack_posterior
from .suite.models import MODELS, free_var_labels
from .suite.reference import load_reference


def _unconstrained_reference(model: pm.Model, sample: np.ndarray) -> np.ndarray:
    """Reference draws (constrained, one column per scalar) in the step's coordinates:
    log-transformed where PyMC samples ``log x`` (the suite's 2-4-d models need no other)."""
    out, col = [], 0
    for rv in model.free_RVs:
        size = int(np.prod(model.initial_point()[model.rvs_to_values[rv].name].shape))
        block = sample[:, col:col + size].astype(float)
        transform = model.rvs_to_transforms.get(rv)
        name = type(transform).__name__ if transform is not None else ""
        if name == "LogTransform":
            block = np.log(block)
        elif name not in ("", "NoneType"):
            raise ValueError(f"{rv.name}: transform {name} not handled here")
        out.append(block)
        col += size
    return np.concatenate(out, axis=1)


def _whitened_eigs(cov: np.ndarray, chol: np.ndarray) -> list[float]:
    half = np.linalg.solve(chol, cov)
    white = np.linalg.solve(chol, half.T)
    return sorted(np.linalg.eigvalsh(0.5 * (white + white.T)).tolist())


@contextmanager
def _recording(late: bool, tune: int):
    """Record every window as it closes (and, for ``late``, add the 90 % window)."""
    windows: list[dict] = []
    original_close = warmup_kernel.WarmupKernel._close_window
    original_ends = warmup_kernel.window_ends

    def close(self, state, x, **keep):
        windows.append({"index": state.window_index, "count": state.window.count,
                        "moves": state.window.n_moves, "cov": state.window.cov.copy(),
                        "scale_before": state.rw.value / self.scale0})
        original_close(self, state, x, **keep)
        windows[-1]["map"] = state.precond.cov.copy()

    def ends(length):
        base = original_ends(length)
        return (*base, int(0.9 * tune)) if late and int(0.9 * tune) > base[-1] else base

    warmup_kernel.WarmupKernel._close_window = close
    warmup_kernel.window_ends = ends
    try:
        yield windows
    finally:
        warmup_kernel.WarmupKernel._close_window = original_close
        warmup_kernel.window_ends = original_ends


class _Recorder(RandomWalkStep):
    """RandomWalkStep that keeps, per chain, its map and scale when tuning ends."""

    finals: list

    def stop_tuning(self):
        if self.tune:
            walk = self.warmup_state
            win = walk.window
            self.finals.append({"cov": walk.precond.cov.copy(),
                                "scale": walk.rw.value / self.warmup.scale0,
                                "windows_closed": walk.window_index,
                                "open": None if win is None or win.count < 2 else
                                {"count": win.count, "moves": win.n_moves,
                                 "cov": win.cov.copy()}})
        super().stop_tuning()


def run(model_name: str, seed: int, variant: str, tune: int = 1000, draws: int = 1000,
        chains: int = 4) -> dict:
    """One run of ``RandomWalkStep()`` and what each chain's warm-up ended with."""
    quiet_pymc()
    spec = MODELS[model_name]
    ref = load_reference(model_name)
    model = spec.factory()
    names, labels = free_var_labels(model)
    ref_u = _unconstrained_reference(model, ref.sample)
    ref_cov = np.cov(ref_u, rowvar=False)
    with _recording(variant == "late", tune) as windows, model:
        step = _Recorder()
        step.finals = []
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=1, step=step,
                          random_seed=seed, progressbar=False,
                          compute_convergence_checks=False)
    x = stack_posterior(idata.posterior, names)
    acc = accuracy(diagnostics(x), ref.mean, ref.sd, labels)
    accept = np.asarray(idata.sample_stats["accept"].values, float).mean(axis=1)
    per_chain, w = [], 0
    ref_chol = np.linalg.cholesky(ref_cov)
    for c, fin in enumerate(step.finals):
        n = fin["windows_closed"]
        mine = windows[w:w + n]
        w += n
        per_chain.append({
            "white_ref_eigs": _whitened_eigs(ref_cov, np.linalg.cholesky(fin["cov"])),
            "scale": fin["scale"], "accept": float(accept[c]),
            "sd_ratio": (x[c].std(axis=0) / ref.sd).tolist(),
            "windows": [{"count": win["count"], "moves": win["moves"],
                         "eigs_vs_ref": _whitened_eigs(win["cov"], ref_chol),
                         "map_vs_ref": _whitened_eigs(win["map"], ref_chol),
                         "scale_before": win["scale_before"]} for win in mine],
            "open_window": None if fin["open"] is None else {
                "count": fin["open"]["count"], "moves": fin["open"]["moves"],
                "eigs_vs_ref": _whitened_eigs(fin["open"]["cov"], ref_chol)},
        })
    return {"model": model_name, "seed": seed, "variant": variant, "labels": labels,
            "accuracy": acc.to_dict(), "chains": per_chain}


def climb(model_name: str, chains: int = 4, seed: int = 100) -> list[dict]:
    """Drive ``chains`` chains of ``RandomWalkStep()`` through their first window; return,
    per chain, where its climb ended and from which draw the window kept its moments."""
    quiet_pymc()
    seen: list[dict] = []
    original = warmup_kernel.WarmupKernel._drop_climb

    def drop(self, state):
        cut = climb_end(state.logps) if state.logps else 0
        kept = max([s for s, _ in state.climb if s <= cut] + [0])
        seen.append({"cut": cut, "kept_from": kept, "first": state.logps[0],
                     "level": float(np.median(state.logps[len(state.logps) // 2:]))})
        original(self, state)

    model = MODELS[model_name].factory()
    warmup_kernel.WarmupKernel._drop_climb = drop
    try:
        for chain in range(chains):
            with model:
                step = RandomWalkStep()
            start_chain(step, np.random.default_rng(seed + chain))
            step.reset_tuning()
            point = model.initial_point()
            while not seen or len(seen) <= chain:
                point, stats = step.step(point)
            seen[-1]["laplace_start"] = int(stats[0]["laplace_start"])
    finally:
        warmup_kernel.WarmupKernel._drop_climb = original
    return seen


def _fmt(values) -> str:
    return "/".join(f"{v:.2f}" for v in values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="truncated")
    parser.add_argument("--seeds", default="1,2,3,4,5,6")
    parser.add_argument("--variants", default="code,late")
    parser.add_argument("--json", default=None)
    parser.add_argument("--climb", action="store_true")
    args = parser.parse_args(argv)
    if args.climb:
        for model_name in args.models.split(","):
            for c, res in enumerate(climb(model_name)):
                print(f"{model_name} chain {c}: Laplace start {res['laplace_start']}, climb "
                      f"ended after draw {res['cut']}, window kept from draw "
                      f"{res['kept_from']}; log density {res['first']:.1f} after draw 1, "
                      f"level {res['level']:.1f}", flush=True)
        return
    results = []
    for model_name in args.models.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for variant in args.variants.split(","):
                res = run(model_name, seed, variant)
                results.append(res)
                a = res["accuracy"]
                flags = "".join(k for k, ok in (("R", a["rhat_ok"]), ("E", a["ess_ok"]),
                                                ("M", a["mean_ok"]), ("S", a["sd_ok"]))
                                if not ok) or "ok"
                print(f"{model_name} seed {seed} {variant}: {flags} R-hat {a['max_rhat']:.3f} "
                      f"ESS {a['min_ess_bulk']:.0f} sd {a['worst_sd']} {a['sd_ratio']:.2f}",
                      flush=True)
                for c, ch in enumerate(res["chains"]):
                    wins = " ".join(f"[{win['count']},{win['moves']}:{_fmt(win['eigs_vs_ref'])}"
                                    f"|{_fmt(win['map_vs_ref'])}]"
                                    for win in ch["windows"])
                    print(f"  chain {c}: ref whitened by final map {_fmt(ch['white_ref_eigs'])}"
                          f" scale {ch['scale']:.2f} accept {ch['accept']:.2f} "
                          f"sd ratios {_fmt(ch['sd_ratio'])}; windows (draws,moves: "
                          f"window cov / map vs ref) {wins}", flush=True)
                    if ch["open_window"]:
                        ow = ch["open_window"]
                        print(f"    open at the end of tuning (never used): {ow['count']} "
                              f"iterations, {ow['moves']} moves, cov vs ref "
                              f"{_fmt(ow['eigs_vs_ref'])}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
