"""How far kernel HMC's trajectories go, and which of them are accepted (on pk).

Usage::

    python -m benchmarks.research.khmc_jumps --model pk --seed 1 [--max-jump inf] [--chains 4]

``KernelHMCStep`` with its defaults (``max_jump`` given, ``inf`` to evaluate every
trajectory as before the bound existed; ``on_error="reject"`` so that a failing solver does
not stop the run) on a suite model with ``pm.sample``'s defaults (``cores=1``).  Every
evaluated proposal of the kernel phase (tuning and after) is recorded with its length in
whitened posterior sds; printed: per length bin the trajectories, how many were accepted
and the mean acceptance probability, then the failed evaluations and the unevaluated
rejections (``n_diverged``).  The results are on ``docs/benchmarks/suite.md``, "Kernel
HMC's trajectories on pk".
"""

from __future__ import annotations

import argparse

import numpy as np
import pymc as pm

from pymc_kameleon import KernelHMCStep, StepInfo

from ..common import quiet_pymc
from ..suite.models import MODELS

__all__ = ["RecordingKernelHMC", "main"]

#: Bins of trajectory length, in whitened posterior sds.
BINS = (0.0, 5.0, 10.0, 20.0, 40.0, 100.0, np.inf)


class RecordingKernelHMC(KernelHMCStep):
    """KernelHMCStep that records (length in whitened coordinates, accepted, acceptance
    probability) of every evaluated proposal of the kernel phase, through its ``callback``:
    trajectories and the random-walk iterations mixed in (not the warm-up's walk, nor the
    trajectories rejected unevaluated, which ``n_diverged`` counts)."""

    def __init__(self, *args, **kwargs):
        self.records: list[tuple[float, bool, float]] = []
        self.previous: np.ndarray | None = None  # the chain's point before the iteration
        super().__init__(*args, callback=self.record, **kwargs)

    def record(self, info: StepInfo) -> None:
        before, self.previous = self.previous, info.position
        if info.phase != "kernel" or info.proposal is None or before is None:
            return
        to_u = self.preconditioner.to_u  # frozen in the kernel phase
        jump = float(np.linalg.norm(to_u(info.proposal) - to_u(before)))
        self.records.append((jump, info.accepted, info.accept_prob))


def main(argv: list[str] | None = None) -> np.ndarray:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="pk")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--max-jump", type=float, default=None,
                        help="KernelHMCStep(max_jump=...); default: the step's own")
    args = parser.parse_args(argv)
    quiet_pymc()
    with MODELS[args.model].factory():
        step = RecordingKernelHMC(max_jump=args.max_jump, on_error="reject")
        idata = pm.sample(step=step, chains=args.chains, cores=1, random_seed=args.seed,
                          progressbar=False, compute_convergence_checks=False,
                          discard_tuned_samples=False)
    rec = np.array(step.records, dtype=float).reshape(-1, 3)
    print(f"{args.model}, seed {args.seed}, max_jump {step.max_jump:g}, "
          f"{len(rec)} evaluated trajectories")
    print("| length (sds) | trajectories | accepted | mean acceptance probability |")
    print("|---|---|---|---|")
    for lo, hi in zip(BINS[:-1], BINS[1:], strict=True):
        m = (rec[:, 0] >= lo) & (rec[:, 0] < hi)
        mean = f"{rec[m, 2].mean():.3g}" if m.any() else ""
        print(f"| [{lo:g}, {hi:g}) | {m.sum()} | {int(rec[m, 1].sum())} | {mean} |")
    stats = idata.sample_stats
    warm = idata.warmup_sample_stats
    for name in ("n_diverged", "n_errors", "n_nan"):
        after = int(stats[name].sum())
        tuning = int(warm[name].sum())
        print(f"{name}: {after} after tuning, {tuning} while tuning")
    return rec


if __name__ == "__main__":
    main()
