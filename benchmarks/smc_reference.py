"""Reference log evidence (and moments) for SMC targets without a closed form.

Importance sampling from a heavy-tailed fit to a pilot posterior sample:

1. a pilot ``pm.sample_smc`` run with PyMC's IMH kernel (``--pilot-draws`` particles, one
   chain) gives particles in the model's unconstrained space;
2. the proposal ``q`` is a multivariate t (``--df`` degrees of freedom) with their mean and
   ``--inflate`` times their covariance;
3. ``Z = E_q[p(y | theta) p(theta) / q(theta)]`` is estimated from ``--draws`` independent
   draws, each with one evaluation of the model's prior and likelihood (a
   pseudo-marginal likelihood's unbiased estimate keeps the estimate of ``Z`` unbiased), and
   the posterior mean and sd by the self-normalised weights.

The estimate is unbiased for ``Z`` whatever the pilot, which only sets its variance; the
standard error of ``log Z`` is the delta-method ``sd(w) / (sqrt(n) mean(w))`` and the
importance weights' effective sample size says whether ``q`` covered the posterior.

Usage::

    python -m benchmarks.smc_reference gp-glass --pilot-draws 400 --draws 10000 --seed 1

writes the result with the command, date and runtime under the target's name in
``benchmarks/data/smc_references.json``, which :mod:`benchmarks.smc` reads.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from .smc import TARGETS

OUT = Path(__file__).parent / "data" / "smc_references.json"
#: Tail quantiles kept (weighted, per scalar of the unconstrained space).
QUANTILES = (0.05, 0.95)


def weighted_quantiles(X: np.ndarray, w: np.ndarray, levels) -> np.ndarray:
    """Quantiles ``levels`` per column of ``X`` under normalised weights ``w``, shape
    ``(len(levels), X.shape[1])``: the smallest value whose cumulative weight reaches each."""
    order = np.argsort(X, axis=0)
    cum = np.cumsum(w[order], axis=0)
    return np.array([[X[order[min(np.searchsorted(cum[:, j], p), len(X) - 1), j], j]
                      for j in range(X.shape[1])] for p in levels])


def _pilot(model, draws: int, seed: int):
    """A pilot SMC run with PyMC's IMH kernel, driven stage by stage so that its particles
    and compiled prior and likelihood stay at hand (all in the unconstrained space)."""
    from pymc.smc.kernels import IMH

    with model:
        kernel = IMH(draws=draws, model=model, random_seed=seed)
    return run_stages(kernel, np.random.default_rng(seed))


def run_stages(kernel, rng: np.random.Generator):
    """Drive an SMC kernel through its stages as ``pm.sample_smc`` does for one chain."""
    kernel.initialize(None, rng)
    while kernel.beta < 1:
        kernel.update_beta_and_weights()
        kernel.resample()
        kernel.tune()
        kernel.mutate()
    return kernel


def importance_reference(target: str, pilot_draws: int, draws: int, seed: int,
                         df: float = 5.0, inflate: float = 1.5) -> dict:
    model, _ = TARGETS[target]()
    t0 = time.perf_counter()
    kernel = _pilot(model, pilot_draws, seed)
    X = kernel.tempered_posterior
    q = stats.multivariate_t(X.mean(0), inflate * np.cov(X, rowvar=False), df=df,
                             seed=np.random.default_rng(seed + 1))
    t_pilot = time.perf_counter() - t0
    theta = np.atleast_2d(q.rvs(draws))
    log_p = np.array([float(kernel.prior_logp_func(t)) + float(kernel.likelihood_logp_func(t))
                      for t in theta])
    log_w = np.where(np.isnan(log_p), -np.inf, log_p) - q.logpdf(theta)
    w = np.exp(log_w - log_w.max())
    norm = w / w.sum()
    mean = norm @ theta
    sd = np.sqrt(norm @ (theta - mean) ** 2)
    quantiles = weighted_quantiles(theta, norm, QUANTILES).tolist()
    return {
        "log_z": float(logsumexp(log_w) - np.log(draws)),
        "log_z_se": float(np.std(w) / (np.sqrt(draws) * np.mean(w))),
        "ess": float(1.0 / np.sum(norm**2)),
        "mean": mean.tolist(), "sd": sd.tolist(), "quantiles": quantiles,
        "quantile_levels": list(QUANTILES),
        "draws": draws, "pilot_draws": pilot_draws, "pilot_log_z": float(
            kernel.log_marginal_likelihood), "df": df, "inflate": inflate, "seed": seed,
        "wall_s": round(time.perf_counter() - t0, 1), "pilot_wall_s": round(t_pilot, 1),
        "command": "python -m benchmarks.smc_reference " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--pilot-draws", type=int, default=400)
    parser.add_argument("--draws", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--df", type=float, default=5.0)
    parser.add_argument("--inflate", type=float, default=1.5)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    result = importance_reference(args.target, args.pilot_draws, args.draws, args.seed,
                                  args.df, args.inflate)
    print(json.dumps(result, indent=1))
    refs = json.loads(args.out.read_text()) if args.out.is_file() else {}
    refs[args.target] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(refs, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
