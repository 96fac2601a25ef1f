"""Fast tests of the SMC benchmarks: the evidence reference (``smc_reference``), the runs of
``smc``, ``smc_settings``, ``smc_scaling`` and the comparison with other samplers
(``smc_compare``)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import stats

_MULTIVARIATE_T = stats.multivariate_t


class _WithoutDensity:
    """Deliberately broken importance weights: the target's density alone, as if the
    proposal's density were constant (draws from the same t)."""

    def __init__(self, loc, shape, df, seed):
        self.draw = _MULTIVARIATE_T(loc, shape, df=df, seed=seed)

    def rvs(self, n):
        return self.draw.rvs(n)

    def logpdf(self, x):
        return np.zeros(len(x))


@pytest.mark.parametrize("broken", [False, True])
def test_importance_reference_matches_quadrature(monkeypatch, broken):
    """The evidence reference of benchmarks/smc_reference.py on a 2-parameter model with
    transformed variables, against a quadrature of its evidence (measured in
    docs/benchmarks/test_calibration.md); weights with the wrong proposal density must fail."""
    from scipy.special import logsumexp

    import benchmarks.smc_reference as ref

    y = np.array([0.3, 1.2, 2.0])

    def target():
        with pm.Model() as model:
            x = pm.HalfNormal("x", 1.0)
            s = pm.LogNormal("s", 0.0, 0.5)
            pm.Normal("y", x, s, observed=y)
        return model, {}

    monkeypatch.setitem(ref.TARGETS, "known", target)
    xs, log_s = np.linspace(1e-4, 8, 800), np.linspace(-4, 3, 800)
    X, S = np.meshgrid(xs, np.exp(log_s))
    log_f = (stats.halfnorm().logpdf(X) + stats.lognorm(0.5).logpdf(S)
             + sum(stats.norm(X, S).logpdf(v) for v in y))
    exact = logsumexp(log_f + np.log(S) + np.log(xs[1] - xs[0]) + np.log(log_s[1] - log_s[0]))
    if broken:
        monkeypatch.setattr(ref.stats, "multivariate_t",
                            lambda loc, shape, df, seed: _WithoutDensity(loc, shape, df, seed))
    r = ref.importance_reference("known", pilot_draws=200, draws=2000, seed=1)
    ok = abs(r["log_z"] - exact) < 4 * r["log_z_se"] + 0.005 and r["ess"] > 500
    assert ok != broken, (r["log_z"], r["log_z_se"], exact)


def test_benchmark_run_saves_particles_and_rhat_per_variable(tmp_path):
    """``benchmarks.smc.run_one(..., save=dir)`` writes each chain's particles and reports
    R-hat per coordinate, whose largest is the row's ``rhat`` (docs/benchmarks/smc.md)."""
    import arviz as az

    from benchmarks.smc import run_one

    row = run_one("mixture", "KameleonSMC", 100, 2, 1, save=tmp_path)
    x = np.load(tmp_path / "mixture-KameleonSMC-s1-100x2.npz")["x"]
    assert x.shape == (2, 100, 4)
    assert row["rhat"] == pytest.approx(max(row["rhat_vars"]["x"]), abs=1e-3)
    # the same R-hat from the saved particles, computed independently of the run
    assert np.ravel(az.rhat(x[..., 0])).item() == pytest.approx(row["rhat_vars"]["x"][0],
                                                                 abs=1e-3)


def test_settings_benchmark_prints_a_row(capsys):
    from benchmarks.smc_settings import main

    (row,) = main(["--model", "eight-schools-nc", "--draws", "100", "--chains", "3",
                   "--settings", '{"recycle": 300}'])
    assert row["evals"] > 300 and np.isfinite(row["log_z_recycled"]).all()
    assert "eight-schools-nc" in capsys.readouterr().out


def test_scaling_benchmark_gives_identical_draws_for_every_worker_count(capsys):
    """The scaling script on a tiny run: the same draws with 1 and 3 threads (its speed is
    measured on the benchmark page, never asserted)."""
    from benchmarks.smc_scaling import main

    rows = main(["--wait", "0.0005", "--workers", "1", "3", "--draws", "40"])
    assert [r["identical"] for r in rows] == [True, True]
    assert rows[0]["evals"] == rows[1]["evals"] > 40


def test_comparison_benchmark_maps_the_unit_cube_by_the_priors():
    """The comparison script's unit cube -> model map against SciPy's quantile functions
    (the truncated normal's written out; a log-transformed variable), and its likelihood
    against the model's own at the same point."""
    from scipy import stats as st

    from benchmarks.smc_compare import Evaluations

    with pm.Model() as model:
        a = pm.TruncatedNormal("a", mu=0.05, sigma=0.05, lower=0.0)
        b = pm.LogNormal("b", 1.0, 0.5, shape=2)
        c = pm.HalfCauchy("c", 2.0)
        pm.Normal("y", a + b.sum() + c, 1.0, observed=[3.0, 4.0])
    ev = Evaluations(model)
    u = np.array([0.2, 0.7, 0.05, 0.9])
    x = ev.x_from_cube(u[None])[0]
    expected = [st.truncnorm(-1.0, np.inf, 0.05, 0.05).ppf(0.2),
                *st.lognorm(0.5, scale=np.e).ppf([0.7, 0.05]), st.halfcauchy(0, 2).ppf(0.9)]
    np.testing.assert_allclose(x, expected, rtol=1e-8)
    lik = st.norm(x.sum(), 1.0).logpdf([3.0, 4.0]).sum()
    assert ev.loglike_cube(u) == pytest.approx(lik, rel=1e-10)
    assert ev.count == 1
    np.testing.assert_allclose(ev.x_from_y(ev.y_from_cube(u[None]))[0], x, rtol=1e-10)


def test_comparison_benchmark_prints_rows_and_the_verdict_over_seeds(capsys):
    from benchmarks.smc_compare import main

    rows = main(["--models", "eight-schools-nc", "--samplers", "kameleon", "imh", "--seeds",
                 "1", "2", "--draws", "100", "--chains", "3", "--kameleon", '{"recycle": 300}',
                 "--budget", "2000"])
    out = capsys.readouterr().out
    assert [r["sampler"] for r in rows] == ["kameleon", "kameleon"]
    assert all(r["evals"] <= 2000 for r in rows)  # the budget per chain is kept
    assert "over 2 seeds: R-hat" in out and "imh       skipped" in out


def test_missed_mode_script_prints_each_run_and_the_count(capsys):
    """``python -m benchmarks.research.missed_mode`` on one small run; its mixture is
    normalised (the log density integrates to 1 over a grid of the first coordinate)."""
    from benchmarks.research import missed_mode

    x0 = np.linspace(-12.0, 12.0, 2401)
    X = np.zeros((len(x0), missed_mode.D))
    X[:, 0] = x0
    # the other coordinates standard normal: their density at 0 times the x0 marginal
    at_zero = (missed_mode.D - 1) * -0.5 * np.log(2 * np.pi)
    marginal = np.exp(missed_mode.log_target(X) - at_zero)
    assert np.trapezoid(marginal, x0) == pytest.approx(1.0, abs=1e-6)
    rows = missed_mode.main(["--seeds", "3", "3", "--draws", "300"])
    out = capsys.readouterr().out
    assert len(rows) == 1 and rows[0][1] == "done" and "of 1" in out


def test_design_edge_script_prints_both_variants(capsys):
    """``python -m benchmarks.research.design_edge`` on one seed: both variants, and its
    errors are about zero for exact draws weighted equally and large for a shifted sample."""
    from benchmarks.research import design_edge

    exact = design_edge.banana_sample(20_000, 2, design_edge.B, design_edge.V, rng=1)
    assert max(design_edge.errors(exact, np.zeros(len(exact)), exact)) < 0.01
    shifted = exact + np.array([0.0, 5.0])
    mean, _, q = design_edge.errors(shifted, np.zeros(len(exact)), exact)
    assert mean == pytest.approx(5.0 / exact[:, 1].std()) and q > 0.3
    rows = design_edge.main(["--seeds", "1", "1"])
    out = capsys.readouterr().out
    assert [r["max_edge"] for r in rows] == [1.0, 0.05] and out.count("of 1;") == 2


def test_past_edge_script_prints_both_variants_and_the_controls(capsys):
    """``python -m benchmarks.research.past_edge`` on one seed: both variants of the
    banana, then the controls (four targets)."""
    from benchmarks.research import past_edge
    from pymc_kameleon.emulator import EmulatorSettings

    rows = past_edge.main(["--seeds", "1", "1"])
    out = capsys.readouterr().out
    default = EmulatorSettings().edge_weight
    assert [r["edge_weight"] for r in rows] == [np.inf, default]
    assert out.count("of 1 returned") == 2
    rows = past_edge.main(["--controls", "--seeds", "1", "1", "--draws", "200"])
    assert len(rows) == 4 and all("past" in r for r in rows)


def test_comparison_benchmark_takes_each_chains_own_evidence():
    """``smc_compare.chain_evidence``: a chain's recycled evidence and Kish's ESS where it
    has them (it fell back, or ``recycle=``), else its correction's (the emulator's run
    finished) or the stages' evidence with no Kish: chains of one run may mix the two."""
    from types import SimpleNamespace

    from benchmarks.smc_compare import chain_evidence

    def stat(*rows):  # two stages a chain, the last one read
        return SimpleNamespace(values=np.array([[np.nan, r] for r in rows]))

    mixed = {"log_marginal_likelihood": stat(-31.2, -40.0, -40.0),
             "kish_ess": stat(2100.0, np.nan, np.nan),
             "log_evidence_recycled": stat(np.nan, -31.3, -31.4),
             "recycled_ess": stat(np.nan, 2900.0, 3000.0)}
    log_z, kish = chain_evidence(mixed, 3)
    assert log_z.tolist() == [-31.2, -31.3, -31.4] and kish.tolist() == [2100.0, 2900.0, 3000.0]
    log_z, kish = chain_evidence({"log_marginal_likelihood": stat(-1.0, -2.0)}, 2)
    assert log_z.tolist() == [-1.0, -2.0] and np.isnan(kish).all()
