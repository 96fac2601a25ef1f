"""PyMC ecosystem behaviour, known-target validation and bad input, for every sampler.

The contract suite (test_step_contract.py) covers stats, seeds, multiprocessing,
sampling_state, reset_tuning, CompoundStep with Metropolis, pseudo-marginal exactness,
discrete variables, non-finite densities and non-finite starts; this file adds the rest of
issue "Hardening across all steps".  docs/robustness.md lists what is tested where.
"""

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytest
from checks import (
    SAMPLERS,
    STATISTICAL_SAMPLERS,
    gaussian_posterior,
    ks_pvalue,
    mean_error_in_mcse,
    plot_trace,
    sample,
)
from scipy import stats

from pymc_kameleon import RandomWalkStep
from pymc_kameleon.compat import group_dataset, max_rhat, start_chain


@pytest.fixture(params=list(SAMPLERS), scope="module")
def sampler(request):
    return SAMPLERS[request.param]


# ----------------------------------------------------------------------------- PyMC integration
def test_pm_sample_defaults_with_multiprocessing(sampler):
    """pm.sample's defaults (tune=1000, draws=1000, chains=cores=2 here, processes)."""
    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=2)
        idata = pm.sample(step=sampler(), cores=2, random_seed=1, progressbar=False)
    assert idata.posterior.sizes == {"chain": 2, "draw": 1000, "x_dim_0": 2}
    assert float(az.rhat(idata).x.max()) < 1.05


def test_compound_step_with_nuts_refreshes_the_stored_logp(sampler):
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pm.Normal("x", mu, 1.0, shape=2)
        idata = pm.sample(draws=200, tune=100, chains=1, step=[pm.NUTS([mu]), sampler([x])],
                          random_seed=3, progressbar=False, compute_convergence_checks=False)
    logp = model.compile_logp()
    post = idata.posterior
    expected = [logp({"mu": post.mu.values[0, i], "x": post.x.values[0, i]})
                for i in range(post.sizes["draw"])]
    lp = idata.sample_stats.lp.values[0]  # NUTS reports "lp" too: (draw, sampler)
    np.testing.assert_allclose(lp[:, -1], expected, rtol=1e-10)


def test_set_data_then_a_new_run_from_the_last_draw(sampler):
    """``pm.set_data`` between two runs, the second started at the first's last draw, with a
    fresh step and with the same step again: the value stored for that point under the old
    data must not be the new chain's current value (it was: the chain never moved, its
    ``lp`` the old data's)."""
    kw = {"chains": 1, "cores": 1, "progressbar": False, "compute_convergence_checks": False}
    with pm.Model() as model:
        data = pm.Data("data", np.zeros(20))
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=data)
        step = sampler()
        first = pm.sample(tune=150, draws=20, step=step, random_seed=1, **kw)
        start = {"mu": float(first.posterior.mu.values[0, -1])}
        pm.set_data({"data": np.full(20, 5.0)})  # posterior of mu now about N(5, 0.22^2)
        logp = model.compile_logp()
        for again in (sampler(), step):
            idata = pm.sample(tune=150, draws=100, step=again, random_seed=2, initvals=start,
                              **kw)
            draws = idata.posterior.mu.values[0]
            np.testing.assert_allclose(idata.sample_stats.lp.values[0],
                                       [logp({"mu": m}) for m in draws], rtol=1e-10)
            z = mean_error_in_mcse(draws, *gaussian_posterior(10.0, 20, 100.0))
            assert abs(z) < 4, z


def test_a_term_added_to_the_model_then_a_new_run_from_the_last_draw(sampler):
    """A potential added after a run, then a new run from its last draw: same data, so the
    old value's key still matches; a second evaluation at the start shows it is stale (a
    noise-free density that changed), and the fresh value is used."""
    kw = {"chains": 1, "cores": 1, "progressbar": False, "compute_convergence_checks": False}
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        first = pm.sample(tune=150, draws=20, step=sampler(), random_seed=1, **kw)
        start = {"mu": float(first.posterior.mu.values[0, -1])}
        pm.Potential("near_five", -0.5 * ((mu - 5.0) / 0.2) ** 2)
        idata = pm.sample(tune=150, draws=100, step=sampler(), random_seed=2, initvals=start,
                          **kw)
    draws = idata.posterior.mu.values[0]
    logp = model.compile_logp()
    np.testing.assert_allclose(idata.sample_stats.lp.values[0],
                               [logp({"mu": m}) for m in draws], rtol=1e-10)
    # prior N(0, 10^2) times the potential N(5, 0.2^2): one "observation" 5 with sd 0.2
    z = mean_error_in_mcse(draws, *gaussian_posterior(10.0, 1, 5.0, noise_sd=0.2))
    assert abs(z) < 4, z


def test_arviz_functions_work_on_draws_and_stats(sampler):
    import matplotlib

    matplotlib.use("Agg")
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=2)
    idata = sample(model, sampler, draws=200, tune=200, chains=2)
    assert not az.summary(idata).isna().any().any()
    ss = group_dataset(idata, "sample_stats")
    stat_names = [n for n in ss.data_vars
                  if ss[n].dtype.kind == "f" and np.all(np.isfinite(ss[n].values))]
    assert "accept" in stat_names
    az.summary(ss[stat_names])
    az.ess(ss[["accept", "lp"]])
    az.rhat(ss[["accept", "lp"]])
    plot_trace(idata)
    plot_trace(idata, "sample_stats", var_names=["accept", "lp"])
    matplotlib.pyplot.close("all")


def test_keyboard_interrupt_returns_the_draws_so_far(sampler):
    with pm.Model():
        pm.Normal("x", 0.0, 1.0)

        def interrupt(trace, draw):
            if draw.draw_idx == 150:
                raise KeyboardInterrupt

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(draws=300, tune=100, chains=1, step=sampler(), callback=interrupt,
                              random_seed=1, progressbar=False, compute_convergence_checks=False)
    assert 0 < idata.posterior.sizes["draw"] < 300


def test_sample_smc_is_not_affected():
    import pymc_kameleon  # noqa: F401  (importing the package must not change PyMC)

    # a likelihood term: PyMC 5.25 (the last release for Python 3.10) fails on a model of
    # priors only, with or without this package (UnusedInputError in its SMC kernel)
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0)
        pm.Normal("y", x, 1.0, observed=[0.0])
        idata = pm.sample_smc(draws=300, chains=1, random_seed=1, progressbar=False,
                              compute_convergence_checks=False)
    # posterior N(0, 1/2)
    assert abs(float(idata.posterior.x.mean())) < 0.25
    assert 0.5 < float(idata.posterior.x.std()) < 0.9


# ----------------------------------------------------------------------------- known targets
@pytest.mark.parametrize("sampler", STATISTICAL_SAMPLERS, indirect=True)
def test_ks_uniform_and_student_t(sampler):
    """Bounded uniform (interval transform) and a heavy-tailed Student-t (nu = 3)."""
    with pm.Model() as model:
        pm.Uniform("u", -2.0, 3.0)
        pm.StudentT("t", nu=3.0, mu=1.0, sigma=2.0)
    idata = sample(model, sampler, draws=5000, tune=1000, chains=2, seed=5)
    assert ks_pvalue(idata.posterior.u.values, stats.uniform(-2, 5).cdf) > 1e-3
    assert ks_pvalue(idata.posterior.t.values, stats.t(3, 1.0, 2.0).cdf) > 1e-3
    assert max_rhat(idata) < 1.05


@pytest.mark.slow
def test_ks_ten_dimensional_normal_with_unequal_variances(sampler):
    sd = np.geomspace(0.5, 3.0, 10)
    with pm.Model() as model:
        pm.Normal("x", 0.0, sd, shape=10)
    idata = sample(model, sampler, draws=6000, tune=3000, chains=2, cores=2, seed=6)
    x = idata.posterior.x.values
    pvals = [ks_pvalue(x[..., j], stats.norm(0, sd[j]).cdf) for j in range(10)]
    assert min(pvals) > 1e-3 / 10, pvals  # Bonferroni over the 10 marginals
    # 1.1: KMC lite mixes the widest dimension slowly (R-hat 1.09 with 2 x 6000 draws)
    assert float(az.rhat(idata).x.max()) < 1.1


@pytest.mark.slow
def test_ks_beta_binomial_three_bounded_variables(sampler):
    with pm.Model() as model:
        p = pm.Beta("p", alpha=[1.0, 2.0, 0.5], beta=[1.0, 5.0, 0.5], shape=3)
        pm.Binomial("k", n=[10, 30, 8], p=p, observed=[3, 12, 7])
    idata = sample(model, sampler, draws=5000, tune=1500, chains=2, cores=2, seed=7)
    post = [stats.beta(4, 8), stats.beta(14, 23), stats.beta(7.5, 1.5)]
    p_draws = idata.posterior.p.values
    for j in range(3):
        assert ks_pvalue(p_draws[..., j], post[j].cdf) > 1e-3 / 3, j
    assert float(az.rhat(idata).p.max()) < 1.05


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("sampler", STATISTICAL_SAMPLERS, indirect=True)
def test_one_dimension(sampler):
    with pm.Model() as model:
        pm.Normal("x", 2.0, 0.5)
    idata = sample(model, sampler, draws=3000, tune=1000, chains=2, seed=8)
    assert ks_pvalue(idata.posterior.x.values, stats.norm(2.0, 0.5).cdf) > 1e-3


def test_one_hundred_dimensions(sampler):
    """d = 100 runs; the adaptive state stays within its documented memory bound."""
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=100)
        step = sampler()
    point = model.initial_point()
    for _ in range(300):
        point, stats_ = step.step(point)
    assert np.all(np.isfinite(point["x"]))
    nbytes = _nbytes(step.sampling_state)
    # KAMH/KMC: history reservoir of 1000 x 100; F-KAMH: O(D^2) moments (D = 500 by default
    # in d = 100, 200 before); KMC finite: O(m^2) with m = 200
    D = max(getattr(step, "n_features", 200), 200)
    assert nbytes < 8 * (1000 * 100 * 3 + D**2 * 4), nbytes


def _nbytes(obj, _seen=None) -> int:
    """Bytes of all arrays reachable from ``obj`` (a sampling-state dataclass)."""
    _seen = set() if _seen is None else _seen
    if id(obj) in _seen:
        return 0
    _seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v, _seen) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_nbytes(v, _seen) for v in obj)
    if hasattr(obj, "__dict__"):
        return sum(_nbytes(v, _seen) for v in vars(obj).values())
    return 0


def test_degenerate_history_early_in_tuning(sampler):
    """Proposals 100x too wide are all rejected when the sampler starts (after a short
    warm-up): its history is one repeated point (zero median distance).  The step must
    neither fail nor build a kernel on it."""
    name = sampler.cls.__name__
    kwargs = ({"step_size": 100.0} if name == "KernelHMCStep"
              else {"scale": 100.0} if name == "RandomWalkStep" else {"gamma": 100.0})
    kwargs.update(warmup_draws=20, n_steps=1)  # kernel iteration t ends draw 20 + t
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=2)
    idata = sample(model, lambda: sampler(**kwargs), draws=300, tune=700, chains=1,
                   discard_tuned_samples=False)
    warm = idata.warmup_posterior.x.values[0]
    assert np.all(np.isfinite(idata.posterior.x.values))
    stats_ = idata.warmup_sample_stats
    if "n_history" in stats_:  # KAMH, F-KAMH: the history is degenerate, no kernel on it
        assert np.all(warm[20:71] == warm[20])
        assert stats_.n_history.values[0, 71] == 0
        assert np.isnan(stats_.bandwidth.values[0, 71])


def test_ill_conditioned_target(sampler):
    """Correlation 0.9999 and scales 1e-3 .. 1e3: no exception mid-chain."""
    cov = np.array([[1.0, 0.9999], [0.9999, 1.0]])
    scales = np.diag([1e-3, 1e3])
    with pm.Model() as model:
        pm.MvNormal("x", np.zeros(2), scales @ cov @ scales)
    idata = sample(model, sampler, draws=300, tune=700, chains=1)
    assert np.all(np.isfinite(idata.posterior.x.values))


def test_float32_models(sampler):
    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model() as model:
            pm.Normal("x", 0.0, 1.0, shape=2)
            pm.HalfNormal("s", 1.0)
        idata = sample(model, sampler, draws=1000, tune=500, chains=1)
    assert idata.posterior.x.dtype == np.float32
    assert ks_pvalue(idata.posterior.s.values, stats.halfnorm().cdf) > 1e-3


@pytest.mark.parametrize("kwargs, match", [
    ({"scale": 0.0}, "scale must be a positive"),
    ({"scale": -1.0}, "scale must be a positive"),
    ({"target_accept": 0.0}, r"target_accept must lie in \(0, 1\)"),
    ({"target_accept": 1.0}, r"target_accept must lie in \(0, 1\)"),
    ({"cov": np.array([[1.0, 2.0], [2.0, 1.0]])}, "positive-definite"),  # indefinite
    ({"cov": np.array([[1.0, 0.5], [0.0, 1.0]])}, "symmetric"),
    ({"cov": np.array([[1.0, np.nan], [np.nan, 1.0]])}, "finite"),
    ({"cov": np.eye(3)}, r"shape \(2, 2\)"),
])
def test_random_walk_invalid_parameters(kwargs, match):
    """A zero scale or target was silently replaced by the default, and an indefinite cov
    accepted (with adapt_scale=False the chain then moved along one line only)."""
    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=2)
        with pytest.raises(ValueError, match=match):
            RandomWalkStep(**kwargs)


def test_random_walk_starts_from_the_given_cov():
    """A given cov is the initial proposal shape: the Laplace start (which replaced it)
    runs only on request.  Seen in the step's learned map and in its ``laplace_start`` stat
    (-1: the Laplace mode was not used)."""
    cov = np.array([[4.0, 0.3], [0.3, 0.25]])
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=2)
        given, laplace = RandomWalkStep(cov=cov), RandomWalkStep(cov=cov, laplace=True)
    starts = []
    for step in (given, laplace):  # the first tuning draw (no warm-up window closed yet)
        start_chain(step, 1, tune=1000, draws=1000)
        assert step.preconditioner is None  # no chain yet
        _, stats = step.step(model.initial_point())
        starts.append(stats[0]["laplace_start"])
    np.testing.assert_allclose(given.preconditioner.cov, cov, rtol=1e-12)
    np.testing.assert_allclose(laplace.preconditioner.cov, np.eye(2), rtol=1e-3)
    assert starts[0] == -1 and starts[1] >= 0
    learned = given.preconditioner  # a copy: changing it leaves the chain's map alone
    learned.chol[:] = 0.0
    np.testing.assert_allclose(given.preconditioner.cov, cov, rtol=1e-12)


def test_a_block_without_elements_is_a_clear_error(sampler):
    """A block of size-0 variables (e.g. zero groups in the data): a ValueError naming them,
    not an error from deep inside the adaptation (inf scales, division by zero)."""
    with pm.Model():
        empty = pm.Normal("empty", 0.0, 1.0, shape=0)
        pm.Normal("a", 0.0, 1.0)
        with pytest.raises(ValueError, match=r"\['empty'\] have no elements"):
            sampler([empty])
        assert sampler().dim == 1  # next to another variable it is simply carried along
