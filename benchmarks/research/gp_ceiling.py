"""How far gradient-free moves can go on posteriordb's latent GP (``gp-pois-regr``).

Usage::

    python -m benchmarks.research.gp_ceiling [--seeds 1,2,3] [--evals 50000] [--chains 4]
                                             [--moves M,...]

Every step fails the suite's latent GP (``docs/benchmarks/work_cap.md``) at about 0.4 ESS
per 1000 evaluations.  This script asks whether better moves could pass it, by giving the
moves what no step has: the reference posterior's covariance and the exact local Hessian.
On the unconstrained space (``log rho``, ``log alpha``, ``f_tilde``) of the suite's model,
with ``--chains`` chains started at reference draws (no burn-in needed), it prints

* the local curvature: the eigenvalues of the negative Hessian of the log density, whitened
  by the reference covariance, at reference draws (1 everywhere for a Gaussian posterior);
* ESS per 1000 evaluations (min over the 13 coordinates of ArviZ's bulk ESS, the first
  fifth of each chain dropped) and R-hat of

  - ``global``: a random walk with the reference covariance (what a step's adaptation can
    at best learn), scale ``2.38 / sqrt(d)``;
  - ``local``: a random walk whose covariance at each point is the inverse of the exact
    local negative Hessian (eigenvalues made positive and floored), with the full MH ratio;
    the Hessian's evaluations are not counted (an oracle no gradient-free step has);
  - ``ess-gibbs``: elliptical slice sampling (Murray, Adams & MacKay 2010) on ``f_tilde``,
    whose prior is ``N(0, I)``, alternating with three random-walk updates of the two
    hyperparameters at the scale of their conditional sd;
  - ``centred``: ``global`` on the model written centred (``f ~ MvNormal(0, K)``, the
    reference mapped to ``f = L f_tilde``);
  - ``centred-ess``: elliptical slice on ``f`` of the centred model (prior
    ``N(0, K(alpha, rho))``, its Cholesky factor not counted), alternating with three
    random-walk updates of the hyperparameters given ``f`` at their conditional sd there;
  - ``interweave``: ``centred-ess`` followed by three updates of the hyperparameters given
    ``f_tilde`` (``f`` moving with ``L``), the two conditionals interwoven (Yu & Meng 2011).

The results are on ``docs/benchmarks/work_cap.md``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

__all__ = ["centred_elliptical_gibbs", "elliptical_gibbs", "global_walk", "local_walk",
           "main"]

LogDensity = Callable[[np.ndarray], float]


class Counted:
    """A log density on a flat vector that counts its calls."""

    def __init__(self, fn: LogDensity):
        self.fn, self.calls = fn, 0

    def __call__(self, x: np.ndarray) -> float:
        self.calls += 1
        value = float(self.fn(x))
        return value if np.isfinite(value) else -np.inf


def global_walk(logp: Counted, x0: np.ndarray, chol: np.ndarray, n: int,
                rng: np.random.Generator) -> np.ndarray:
    """``n`` random-walk iterations with proposal ``x + chol @ e``, ``e ~ N(0, I)``."""
    x, lx = x0.copy(), logp(x0)
    out = np.empty((n, x0.size))
    for t in range(n):
        y = x + chol @ rng.standard_normal(x0.size)
        ly = logp(y)
        if np.log(rng.uniform()) < ly - lx:
            x, lx = y, ly
        out[t] = x
    return out


def local_walk(logp: Counted, neg_hessian: Callable[[np.ndarray], np.ndarray],
               x0: np.ndarray, scale: float, floor: float, n: int,
               rng: np.random.Generator) -> np.ndarray:
    """Random walk ``N(x, scale^2 / d H(x)^-1)`` with ``H`` the local negative Hessian, its
    eigenvalues replaced by ``max(|lambda|, floor)``; full MH ratio with the reverse
    proposal density."""
    d = x0.size
    s2 = scale**2 / d

    def metric(x):
        lam, vec = np.linalg.eigh(neg_hessian(x))
        return vec, np.maximum(np.abs(lam), floor)

    def log_q(to, frm, vec, lam):  # log N(to; frm, s2 * vec diag(1/lam) vec^T) + const
        z = vec.T @ (to - frm)
        return -0.5 * np.sum(z * z * lam) / s2 + 0.5 * np.sum(np.log(lam))

    x, lx = x0.copy(), logp(x0)
    vx, ex = metric(x)
    out = np.empty((n, d))
    for t in range(n):
        y = x + vx @ (rng.standard_normal(d) / np.sqrt(ex)) * np.sqrt(s2)
        ly = logp(y)
        if np.isfinite(ly):
            vy, ey = metric(y)
            log_ratio = ly - lx + log_q(x, y, vy, ey) - log_q(y, x, vx, ex)
            if np.log(rng.uniform()) < log_ratio:
                x, lx, vx, ex = y, ly, vy, ey
        out[t] = x
    return out


def elliptical_gibbs(logp: Counted, x0: np.ndarray, latent: slice, hyper_sd: np.ndarray,
                     hyper_steps: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Sweeps of one elliptical slice update of ``x[latent]`` (prior ``N(0, I)``) and
    ``hyper_steps`` random-walk updates of the other coordinates (sd ``hyper_sd``): the
    centred sweep below with the identity as the prior's factor."""
    identity = np.eye(x0[latent].size)
    return centred_elliptical_gibbs(logp, x0, latent, lambda _: identity, hyper_sd,
                                    hyper_steps, n, rng)


def centred_elliptical_gibbs(logp: Counted, x0: np.ndarray, latent: slice,
                             prior_chol: Callable[[np.ndarray], np.ndarray],
                             hyper_sd: np.ndarray, hyper_steps: int, n: int,
                             rng: np.random.Generator,
                             whitened_sd: np.ndarray | None = None) -> np.ndarray:
    """Sweeps of one elliptical slice update of ``x[latent]``, whose prior is
    ``N(0, C C^T)`` with ``C = prior_chol(x[hyper])``, and ``hyper_steps`` random-walk
    updates of the other coordinates given ``x[latent]`` (sd ``hyper_sd``); with
    ``whitened_sd``, then as many given ``C^{-1} x[latent]`` (the latent moving with ``C``,
    the ratio carrying the Jacobian ``|det C|``)."""
    from scipy.linalg import solve_triangular

    x, lx = x0.copy(), logp(x0)
    hyper = np.ones(x0.size, bool)
    hyper[latent] = False

    def rw(x, lx, sd, whitened):
        y = x.copy()
        y[hyper] += sd * rng.standard_normal(hyper.sum())
        log_jac = 0.0
        if whitened:
            c_x, c_y = prior_chol(x[hyper]), prior_chol(y[hyper])
            y[latent] = c_y @ solve_triangular(c_x, x[latent], lower=True)
            log_jac = np.sum(np.log(np.diag(c_y))) - np.sum(np.log(np.diag(c_x)))
        ly = logp(y)
        return (y, ly) if np.log(rng.uniform()) < ly - lx + log_jac else (x, lx)

    def prior_quad(chol, v):  # |C^{-1} v|^2 / 2: the latent prior's term, up to a constant
        w = solve_triangular(chol, v, lower=True)
        return 0.5 * w @ w

    out = np.empty((n, x0.size))
    for t in range(n):
        chol = prior_chol(x[hyper])
        f = x[latent]

        threshold = lx + prior_quad(chol, f) + np.log(rng.uniform())
        nu = chol @ rng.standard_normal(f.size)
        theta = rng.uniform(0.0, 2.0 * np.pi)
        lo, hi = theta - 2.0 * np.pi, theta
        while True:
            y = x.copy()
            y[latent] = f * np.cos(theta) + nu * np.sin(theta)
            ly = logp(y)
            if ly + prior_quad(chol, y[latent]) > threshold:
                x, lx = y, ly
                break
            lo, hi = (theta, hi) if theta < 0 else (lo, theta)
            theta = rng.uniform(lo, hi)
        for _ in range(hyper_steps):
            x, lx = rw(x, lx, hyper_sd, False)
        if whitened_sd is not None:
            for _ in range(hyper_steps):
                x, lx = rw(x, lx, whitened_sd, True)
        out[t] = x
    return out


def _summary(chains: list[np.ndarray], calls: int) -> tuple[float, float]:
    import arviz as az

    x = np.stack([c[c.shape[0] // 5:] for c in chains])
    ess = min(float(az.ess(x[:, :, j])) for j in range(x.shape[2]))
    rhat = max(float(az.rhat(x[:, :, j])) for j in range(x.shape[2]))
    return 1000.0 * ess / calls, rhat


def _centred_model():
    """The suite's model written centred: ``f ~ MvNormal(0, K(alpha, rho))``."""
    import pymc as pm
    import pytensor.tensor as pt

    from pymc_kameleon.models.hard import GP_POIS_REGR_K, GP_POIS_REGR_X, gp_pois_regr_cov

    with pm.Model() as model:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", 2.0)
        f = pm.MvNormal("f", mu=np.zeros(GP_POIS_REGR_X.size),
                        cov=gp_pois_regr_cov(alpha, rho))
        pm.Poisson("k", pt.exp(f), observed=GP_POIS_REGR_K)
    return model


def _model_functions(centred: bool = False):
    """Log density, negative Hessian (flat vectors in; None for the centred form, which
    no move needs it of) and the reference draws on the unconstrained space of the suite's
    model (or of its centred form)."""
    from pymc_kameleon.models.hard import gp_pois_regr_cov, gp_pois_regr_model

    from ..suite.reference import load_reference

    model = _centred_model() if centred else gp_pois_regr_model()
    names = [v.name for v in model.value_vars]
    assert names == ["rho_log__", "alpha_log__", "f" if centred else "f_tilde"], names
    logp_fn = model.compile_logp(jacobian=True)
    hess_fn = None if centred else model.compile_d2logp(jacobian=True)  # negative Hessian

    def point(x):
        return dict(zip(names, (x[0], x[1], x[2:]), strict=True))

    ref = load_reference("gp-pois-regr").sample.copy()
    if centred:
        for row in ref:
            row[2:] = np.linalg.cholesky(gp_pois_regr_cov(row[1], row[0])) @ row[2:]
    ref[:, :2] = np.log(ref[:, :2])
    hess = None if hess_fn is None else (lambda x: hess_fn(point(x)))
    return (lambda x: logp_fn(point(x))), hess, ref


def _prior_chol(log_hyper: np.ndarray) -> np.ndarray:
    """Cholesky factor of the latent prior's covariance at ``(log rho, log alpha)``."""
    from pymc_kameleon.models.hard import gp_pois_regr_cov

    return np.linalg.cholesky(gp_pois_regr_cov(np.exp(log_hyper[1]), np.exp(log_hyper[0])))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--evals", type=int, default=50_000, help="iterations per chain")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--moves",
                        default="global,local,ess-gibbs,centred,centred-ess,interweave")
    args = parser.parse_args(argv)
    moves = args.moves.split(",")
    logp_fn, hess_fn, ref = _model_functions()
    centred_logp, _, centred_ref = _model_functions(centred=True)
    cov = np.cov(ref.T)
    chol = np.linalg.cholesky(cov)
    centred_chol = np.linalg.cholesky(np.cov(centred_ref.T))
    centred_cond_sd = 1.0 / np.sqrt(np.diag(np.linalg.inv(np.cov(centred_ref.T))))
    d = ref.shape[1]

    lam = np.array([np.linalg.eigvalsh(chol.T @ hess_fn(x) @ chol) for x in ref[::10]])
    print(f"whitened local curvature at {len(lam)} reference draws: largest eigenvalue "
          f"median {np.median(lam[:, -1]):.0f} (range {lam[:, -1].min():.0f}-"
          f"{lam[:, -1].max():.0f}); a negative one at {np.mean(lam[:, 0] < 0):.0%}")
    prec = np.linalg.inv(cov)
    cond_sd = 1.0 / np.sqrt(np.diag(prec))
    print("reference sd / sd given the rest (Gaussian approximation): log rho "
          f"{np.sqrt(cov[0, 0]) / cond_sd[0]:.1f}, log alpha {np.sqrt(cov[1, 1]) / cond_sd[1]:.1f}")

    print("\n| moves | seed | iterations per chain | evaluations | ESS per 1000 evals "
          "| max R-hat |")
    print("|---|---|---|---|---|---|")
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name in moves:
            rng = np.random.default_rng(seed)
            logp = Counted(centred_logp if name.startswith(("centred", "interweave"))
                           else logp_fn)
            n = args.evals if name in ("global", "centred") else args.evals // 10
            chains = []
            for _ in range(args.chains):
                i = rng.integers(len(ref))
                x0 = ref[i]
                if name == "global":
                    chains.append(global_walk(logp, x0, 2.38 / np.sqrt(d) * chol, n, rng))
                elif name == "centred":
                    chains.append(global_walk(logp, centred_ref[i],
                                              2.38 / np.sqrt(d) * centred_chol, n, rng))
                elif name in ("centred-ess", "interweave"):
                    chains.append(centred_elliptical_gibbs(
                        logp, centred_ref[i], slice(2, None), _prior_chol, centred_cond_sd[:2],
                        3, n, rng, cond_sd[:2] if name == "interweave" else None))
                elif name == "local":
                    chains.append(local_walk(logp, hess_fn, x0, 1.5, 1.0 / cov.diagonal().max(),
                                             n, rng))
                else:
                    chains.append(elliptical_gibbs(logp, x0, slice(2, None), cond_sd[:2],
                                                   3, n, rng))
            per_1k, rhat = _summary(chains, logp.calls)
            print(f"| {name} | {seed} | {n} | {logp.calls} | {per_1k:.2f} | {rhat:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
