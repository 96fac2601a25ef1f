"""The emulator's correction on a curved target: own-round against mixture weights.

Usage::

    python -m benchmarks.research.emulator_weights [--runs 6] [--b 0.3] [--v 4]

Runs :class:`~pymc_kameleon.emulator.EmulatorRun` (free of PyMC, default settings) on a
4-d banana (``x0 ~ N(0, v)``, ``x1 = y + b (x0^2 - v)``, the others standard normal;
normalised, so ``log Z = 0``) from a ``N(0, 25 I)`` prior, and weighs the final pool of
each run twice: by each round's own proposal (the engine's weights) and by the
deterministic mixture of every round's proposals.  Prints per run and pooled over the
runs: the weighted sds over the exact ones, the 5 %/95 % quantile errors in exact sds, the
log evidence and Kish's ESS.  Results: ``docs/benchmarks/emulator.md``.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from pymc_kameleon.emulator import EmulatorProblem, EmulatorRun, EmulatorSettings
from pymc_kameleon.math.importance import kish_ess

D = 4


def banana(b: float, v: float):
    def logp(X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(X)
        y1 = X[:, 1] - b * (X[:, 0] ** 2 - v)
        return (stats.norm(0, np.sqrt(v)).logpdf(X[:, 0]) + stats.norm.logpdf(y1)
                + stats.norm.logpdf(X[:, 2:]).sum(1))
    return logp


def exact(b: float, v: float, n: int = 400_000) -> np.ndarray:
    E = np.random.default_rng(0).standard_normal((n, D))
    E[:, 0] *= np.sqrt(v)
    E[:, 1] += b * (E[:, 0] ** 2 - v)
    return E


def weighted_summary(X: np.ndarray, log_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = np.exp(log_w - np.max(log_w))
    w /= w.sum()
    mean = w @ X
    sd = np.sqrt(w @ (X - mean) ** 2)
    q = []
    for j in range(X.shape[1]):
        order = np.argsort(X[:, j])
        cum = np.cumsum(w[order])
        q.append([X[order[min(np.searchsorted(cum, p), len(cum) - 1)], j] for p in (0.05, 0.95)])
    return sd, np.array(q).T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--b", type=float, default=0.3)
    parser.add_argument("--v", type=float, default=4.0)
    args = parser.parse_args()
    logp, E = banana(args.b, args.v), exact(args.b, args.v)
    sd_true, q_true = E.std(0), np.quantile(E, [0.05, 0.95], axis=0)
    prior = stats.multivariate_normal(np.zeros(D), 25 * np.eye(D))
    np.set_printoptions(precision=3, suppress=True, linewidth=150)
    pooled: dict[str, list] = {"own": [], "mixture": []}
    for run_index in range(args.runs):
        rng = np.random.default_rng(100 + run_index)
        problem = EmulatorProblem(
            prior.logpdf, lambda X: (prior.logpdf(X), logp(X) - prior.logpdf(X)),
            lambda n, rng=rng: rng.multivariate_normal(np.zeros(D), 25 * np.eye(D), n), D)
        run = EmulatorRun(problem, EmulatorSettings(), 1000, rng)
        while run.phase not in ("done", "fallback"):
            run.step()
        if run.phase == "fallback":
            print(f"run {run_index}: fell back ({run.reason})")
            continue
        pool = run.correction.pool
        for kind in ("own", "mixture"):
            pool.own_stage = kind == "own"
            X, _, _, log_w = pool.weighted()
            sd, _ = weighted_summary(X, log_w)
            log_z = float(np.logaddexp.reduce(log_w) - np.log(len(log_w)))
            pooled[kind].append((X, log_w - np.logaddexp.reduce(log_w), log_z))
            print(f"run {run_index} {kind:<8} sd ratio {sd / sd_true}  log Z {log_z:+.3f}  "
                  f"Kish {kish_ess(log_w):.0f} of {len(X)}", flush=True)
    for kind, runs in pooled.items():
        X = np.concatenate([r[0] for r in runs])
        log_w = np.concatenate([r[1] for r in runs])
        sd, q = weighted_summary(X, log_w)
        q_err = np.max(np.abs(q - q_true) / sd_true, axis=0)
        print(f"pooled {kind:<8} sd ratio {sd / sd_true}  largest 5%/95% error {q_err}  "
              f"mean log Z {np.mean([r[2] for r in runs]):+.3f}")


if __name__ == "__main__":
    main()
