"""The comparison script's PyVBMC and step paths and the 6-d regression's reference
(``benchmarks/smc_compare.py``, ``benchmarks/suite/analytic.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from benchmarks import smc_compare
from benchmarks.suite.analytic import regression_posterior
from benchmarks.suite.models import MODELS, REGRESSION_PRIOR_SD, regression_data

TINY_STEPS = ["--step-tune", "100", "--step-draws", "100", "--step-chains", "2"]


def _marginal_loglik(sigma: float, X: np.ndarray, y: np.ndarray, s0: float) -> float:
    """log p(y | sigma) with the coefficients integrated out, from the full covariance."""
    cov = sigma**2 * np.eye(len(y)) + s0**2 * X @ X.T
    return float(stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y))


def test_regression_reference_against_direct_quadrature():
    """Evidence, sigma's moments and the coefficients' means by SciPy's adaptive quadrature
    of the full-covariance marginal (no SVD, no grid), and the model's own log density
    against the prior times the likelihood written out."""
    X, y = regression_data()
    s0, sigma_sd = REGRESSION_PRIOR_SD
    post = regression_posterior()
    mean, sd = post.moments()
    prior = stats.halfnorm(scale=sigma_sd)
    peak = _marginal_loglik(mean[-1], X, y, s0)  # keeps the integrands near 1

    def joint(sigma: float) -> float:
        return np.exp(_marginal_loglik(sigma, X, y, s0) - peak) * prior.pdf(sigma)

    lo, hi = mean[-1] - 10 * sd[-1], mean[-1] + 12 * sd[-1]
    z = integrate.quad(joint, lo, hi, epsabs=0, epsrel=1e-10, limit=200)[0]
    assert post.log_z == pytest.approx(np.log(z) + peak, abs=1e-6)
    m1 = integrate.quad(lambda s: s * joint(s), lo, hi, epsrel=1e-10, limit=200)[0] / z
    m2 = integrate.quad(lambda s: s * s * joint(s), lo, hi, epsrel=1e-10, limit=200)[0] / z
    assert (mean[-1], sd[-1]) == pytest.approx((m1, np.sqrt(m2 - m1**2)), rel=1e-6)

    def beta_mean(sigma: float) -> np.ndarray:  # the conjugate normal's mean given sigma
        precision = X.T @ X / sigma**2 + np.eye(X.shape[1]) / s0**2
        return np.linalg.solve(precision, X.T @ y / sigma**2)

    for j in (0, 3):
        got = integrate.quad(lambda s, j=j: beta_mean(s)[j] * joint(s), lo, hi,
                             epsrel=1e-10, limit=200)[0] / z
        assert mean[j] == pytest.approx(got, abs=1e-6 * sd[j])
    # the model is the one integrated: its log density at a point, written out
    model = MODELS["regression"].factory()
    beta, sigma = np.array([0.8, -0.4, 0.3, 0.1, 2.0]), 0.7
    expected = (stats.norm(0, s0).logpdf(beta).sum() + prior.logpdf(sigma)
                + stats.norm(X @ beta, sigma).logpdf(y).sum())
    logp = model.compile_logp(jacobian=False)
    assert logp({"beta": beta, "sigma_log__": np.log(sigma)}) == pytest.approx(expected)
    # quantiles: the 5 % / 95 % ones bracket the mean, sigma's by its interpolated CDF
    q = post.quantiles((0.05, 0.95))
    assert np.all(q[0] < mean) and np.all(mean < q[1])
    assert q[1, 0] - q[0, 0] == pytest.approx(2 * 1.6449 * sd[0], rel=0.02)  # near normal


def test_failed_run_is_recorded_and_the_next_runs(monkeypatch, capsys):
    """An exception in one run (here PyVBMC's, faked) gives a failed row with the
    evaluations made so far, and the script goes on with the next sampler."""

    def failing(ev, seed, args):
        ev.logpost(ev.initial_y)
        raise ValueError("the log density is not finite")

    monkeypatch.setattr(smc_compare, "run_pyvbmc", failing)
    rows = smc_compare.main(["--models", "censored", "--samplers", "pyvbmc", "rw-screen",
                             "--seeds", "1", *TINY_STEPS])
    out = capsys.readouterr().out
    assert rows[0]["error"] == "ValueError: the log density is not finite"
    assert rows[0]["evals"] == 1
    assert "failed: ValueError" in out
    assert rows[1]["sampler"] == "rw-screen" and "error" not in rows[1]


def test_steps_run_through_pm_sample_and_count_every_chain():
    rows = smc_compare.main(["--models", "censored", "--samplers", "kamh-emu", "metropolis",
                             "--seeds", "1", "2", *TINY_STEPS])
    assert [r["sampler"] for r in rows] == ["kamh-emu"] * 2 + ["metropolis"] * 2
    for r in rows:
        assert r["ess_kind"] == "ArviZ bulk, 2 chains"
        assert np.shape(r["means"]) == (2, 2)  # the chains' means enter the spread
        assert r["mean_err"] < 1.0
    # pm.Metropolis: one evaluation per iteration and chain, plus the initial points'
    assert rows[2]["evals"] >= 2 * 200


def test_pyvbmc_on_a_2d_model_counts_its_evaluations():
    pytest.importorskip("pyvbmc")
    rows = smc_compare.main(["--models", "censored", "--samplers", "pyvbmc", "--seeds", "1",
                             "--budget", "60"])
    (r,) = rows
    assert "error" not in r
    assert 0 < r["evals"] <= 60 + 10  # PyVBMC's cap, plus its initial design's checks
    assert np.isfinite(r["log_z"]) and r["mean_err"] < 1.0
