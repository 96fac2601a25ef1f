"""KameleonStep through pm.sample: API contract, exactness rules and known targets."""

from functools import partial

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from checks import banana_check, ks_pvalue, moment_zscores, sample
from scipy import stats

from pymc_kameleon import KameleonStep, PseudoMarginalWarning, pseudo_marginal_potential
from pymc_kameleon.models import banana_model, counted_model, gaussian_model
from pymc_kameleon.step_base import Proposal
from pymc_kameleon.targets import banana_logp

COV = np.array([[4.0, 1.8], [1.8, 1.0]])


class NoHastingsCorrection(KameleonStep):
    """Deliberately broken: treats the (asymmetric) proposal as symmetric."""

    def _propose(self, state):
        proposal, stats = super()._propose(state)
        return Proposal(proposal.position, 0.0), stats


class ReEstimatingKameleon(KameleonStep):
    """Deliberately broken for estimators: recomputes the current point's log density
    every iteration ("Monte Carlo within Metropolis")."""

    def _sync_state(self, q0):
        self._chain = None
        return super()._sync_state(q0)


@pytest.fixture(scope="module")
def gauss():
    return gaussian_model(COV)


@pytest.fixture(scope="module")
def gauss_idata(gauss):
    return sample(gauss, KameleonStep, draws=4000, tune=1000, chains=2, seed=11)


# ----------------------------------------------------------------------------- API contract
def test_inference_data_and_stats(gauss_idata):
    ss = gauss_idata.sample_stats
    for name in ("accept", "accepted", "scaling", "gamma", "bandwidth", "n_history", "lp"):
        assert name in ss, name
    assert ss.accept.shape == (2, 4000)
    assert np.all((ss.accept >= 0) & (ss.accept <= 1))
    assert np.all(ss.gamma == 0.2)
    assert np.all(ss.n_history == 1000)
    assert 0.15 < float(ss.accepted.mean()) < 0.35  # tuned toward 0.234
    summary = az.summary(gauss_idata)
    assert set(summary.index) == {"x[0]", "x[1]"}


def test_tuning_stats_and_frozen_adaptation(gauss):
    idata = sample(gauss, KameleonStep, draws=300, tune=400, chains=1, seed=3,
                   discard_tuned_samples=False)
    warm, post = idata.warmup_sample_stats, idata.sample_stats
    # PyMC moves the "tune" stat into the warmup/posterior split of InferenceData; the raw
    # trace still has it
    trace = sample(gauss, KameleonStep, draws=20, tune=30, chains=1, seed=3,
                   return_inferencedata=False, discard_tuned_samples=False)
    tune_stat = trace.get_sampler_stats("tune")
    assert tune_stat[:30].all() and not tune_stat[30:].any()
    # subsample grows while tuning, and scaling is adapted
    assert int(warm.n_history[0, 0]) == 0 and int(warm.n_history[0, -1]) > 0
    assert np.nanstd(warm.scaling.values) > 0
    # stop_tuning froze subsample, bandwidth and scale
    for name in ("scaling", "bandwidth", "n_history"):
        assert np.unique(post[name].values).size == 1, name


def test_reproducible_with_seed_and_across_cores(gauss):
    a = sample(gauss, KameleonStep, draws=200, tune=200, chains=2, seed=5)
    b = sample(gauss, KameleonStep, draws=200, tune=200, chains=2, seed=5)
    c = sample(gauss, KameleonStep, draws=200, tune=200, chains=2, seed=6)
    mp = sample(gauss, KameleonStep, draws=200, tune=200, chains=2, cores=2, seed=5)
    np.testing.assert_array_equal(a.posterior.x.values, b.posterior.x.values)
    np.testing.assert_array_equal(a.posterior.x.values, mp.posterior.x.values)
    assert not np.array_equal(a.posterior.x.values, c.posterior.x.values)
    # chains differ from each other
    assert not np.array_equal(a.posterior.x.values[0], a.posterior.x.values[1])


def test_one_logp_evaluation_per_iteration():
    model, op = counted_model(partial(banana_logp, b=0.1, v=100.0), dim=2)
    counts = []

    def record(trace, draw):
        counts.append(op.count)

    with model:
        step = KameleonStep()
        op.count = 0
        pm.sample(draws=300, tune=300, chains=1, step=step, random_seed=1, progressbar=False,
                  compute_convergence_checks=False, callback=record)
    # the first iteration also evaluates the start point, every later one exactly once
    assert counts[0] == 2
    assert np.all(np.diff(counts) == 1)
    assert len(counts) == 600


def test_discrete_variables_are_refused_but_work_in_compound():
    with pm.Model() as model:
        x = pm.Normal("x", 0, 1)
        k = pm.Poisson("k", 3.0)
        assert KameleonStep.competence(model.rvs_to_values[k], False) == 0
        assert KameleonStep.competence(model.rvs_to_values[x], False) == 1
        with pytest.raises(ValueError, match=r"discrete variable\(s\) \['k'\]"):
            KameleonStep([k])
        idata = pm.sample(draws=200, tune=200, chains=1, step=[KameleonStep([x]),
                          pm.Metropolis([k])], random_seed=1, progressbar=False,
                          compute_convergence_checks=False)
    assert idata.posterior.k.dtype.kind == "i"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(gamma=-0.1), "gamma"),
        (dict(gamma=0.0), "gamma"),
        (dict(n_history=1), "n_history"),
        (dict(n_history=2.5), "n_history"),
        (dict(bandwidth=0.0), "bandwidth"),
        (dict(nu2=-1.0), "scale"),
        (dict(target_accept=1.2), "target_accept"),
        (dict(adapt_exponent=0.3), "exponent"),
        (dict(blocked=False), "blocked"),
    ],
)
def test_invalid_parameters(gauss, kwargs, match):
    with gauss, pytest.raises(ValueError, match=match):
        KameleonStep(**kwargs)


def test_nonfinite_proposals_are_rejected():
    """The density is -inf outside the box |x_i| < 1 and NaN in a corner: never accepted."""
    with pm.Model() as model:
        x = pm.Flat("x", shape=2, initval=np.zeros(2))
        inside = pt.all(pt.abs(x) < 1.0)
        corner = pt.all(x > 0.8)
        pm.Potential("box", pt.switch(corner, np.nan, pt.switch(inside, 0.0, -np.inf)))
    idata = sample(model, lambda: KameleonStep(gamma=0.5), draws=2000, tune=500, chains=1)
    x = idata.posterior.x.values.reshape(-1, 2)
    assert np.all(np.abs(x) < 1.0)
    assert not np.any(np.all(x > 0.8, axis=1))
    assert ks_pvalue(idata.posterior.x.values[..., 0], stats.uniform(-1, 2).cdf) > 1e-3


def test_nonfinite_start_is_a_clear_error():
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("obs", 0.0, sigma, observed=[0.5, 1.0])
        step = KameleonStep()
    point = model.initial_point()
    point["sigma_log__"] = np.array(-np.inf)
    with pytest.raises(ValueError, match=r"not finite at the current point .*sigma_log__"):
        step.step(point)


def test_tune_zero_is_a_random_walk(gauss):
    idata = sample(gauss, lambda: KameleonStep(gamma=1.0), draws=500, tune=0, chains=1)
    ss = idata.sample_stats
    assert np.all(ss.n_history == 0) and np.all(np.isnan(ss.scaling))
    assert 0 < float(ss.accepted.mean()) < 1


def test_sampling_state_round_trip(gauss):
    with gauss:
        step = KameleonStep(rng=3)
    point = gauss.initial_point()
    for _ in range(120):
        point, _ = step.step(point)
    state = step.sampling_state
    run1 = []
    p1 = point
    for _ in range(80):
        p1, _ = step.step(p1)
        run1.append(p1["x"].copy())
    step.sampling_state = state
    p2 = point
    for i in range(80):
        p2, _ = step.step(p2)
        np.testing.assert_array_equal(p2["x"], run1[i])


def test_reset_tuning_restores_initial_adaptation(gauss):
    with gauss:
        step = KameleonStep(rng=1)
    initial = step.sampling_state
    point = gauss.initial_point()
    for _ in range(200):
        point, _ = step.step(point)
    assert step._adapt.active
    step.reset_tuning()
    assert not step._adapt.active and step._adapt.t == 0 and step._chain is None
    assert step._adapt.scaler.value == initial._adapt.scaler.value


def test_compound_step_refreshes_stored_logp():
    """Another step changes ``mu``; the stored logp of ``x`` must follow (lp stat == logp)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pm.Normal("x", mu, 1.0, shape=2)
        idata = pm.sample(draws=300, tune=100, chains=1, step=[pm.Metropolis([mu]),
                          KameleonStep([x])], random_seed=2, progressbar=False,
                          compute_convergence_checks=False)
    logp = model.compile_logp()
    post = idata.posterior
    expected = [logp({"mu": post.mu.values[0, i], "x": post.x.values[0, i]})
                for i in range(post.sizes["draw"])]
    np.testing.assert_allclose(idata.sample_stats.lp.values[0], expected, rtol=1e-10)


# ----------------------------------------------------------------------------- known targets
def test_gaussian_moments(gauss_idata):
    x = gauss_idata.posterior.x.values
    for j in range(2):
        z_mean, z_var = moment_zscores(x[..., j], 0.0, COV[j, j])
        assert abs(z_mean) < 4 and abs(z_var) < 4, (j, z_mean, z_var)
        assert ks_pvalue(x[..., j], stats.norm(0, np.sqrt(COV[j, j])).cdf) > 1e-3
    corr = np.corrcoef(x.reshape(-1, 2).T)[0, 1]
    assert corr == pytest.approx(0.9, abs=0.05)


@pytest.fixture(scope="module")
def banana():
    return banana_model(dim=2, b=0.1, v=100.0)


def test_banana_strong_quantiles(banana):
    """2-d B(0.1, 100): |z|^2 coverage of chi2_2 quantiles within 0.05, R-hat < 1.1.

    Calibrated over 6 seeds: KameleonStep gave coverage errors 0.007-0.042 (R-hat <= 1.04);
    ``NoHastingsCorrection`` failed one of the two criteria for every seed (errors up to
    0.10, R-hat up to 1.8). ``test_banana_broken_variant_fails`` keeps one such seed.
    """
    idata = sample(banana, KameleonStep, draws=8000, tune=2000, chains=4, cores=2, seed=4)
    err, rhat = banana_check(idata, 0.1, 100.0)
    assert err < 0.05 and rhat < 1.1, (err, rhat)


@pytest.mark.slow
def test_banana_broken_variant_fails(banana):
    idata = sample(banana, NoHastingsCorrection, draws=8000, tune=2000, chains=4, cores=2,
                   seed=0)
    err, rhat = banana_check(idata, 0.1, 100.0)
    assert not (err < 0.05 and rhat < 1.1), (err, rhat)


def test_bounded_variables_beta_binomial():
    """Two Beta-Binomial posteriors and a HalfNormal in one block (logit/log transforms)."""
    with pm.Model() as model:
        p = pm.Beta("p", alpha=2.0, beta=3.0, shape=2)
        pm.Binomial("k", n=20, p=p, observed=[7, 15])
        pm.HalfNormal("s", 2.0)
    idata = sample(model, KameleonStep, draws=5000, tune=1000, chains=2, seed=7)
    post = idata.posterior
    assert ks_pvalue(post.p.values[..., 0], stats.beta(9, 16).cdf) > 1e-3
    assert ks_pvalue(post.p.values[..., 1], stats.beta(17, 8).cdf) > 1e-3
    assert ks_pvalue(post.s.values, stats.halfnorm(scale=2.0).cdf) > 1e-3
    # a wrong posterior is rejected by the same test
    assert ks_pvalue(post.p.values[..., 0], stats.beta(8, 16).cdf) < 1e-3


# ----------------------------------------------------------------------------- pseudo-marginal
def _noisy_loglik(mu, rng):
    """log of an unbiased estimate of N(1 | mu, 1) (up to a constant): log-normal noise."""
    sigma = 1.0
    return -0.5 * (1.0 - mu) ** 2 + sigma * rng.normal() - 0.5 * sigma**2


@pytest.fixture(scope="module")
def noisy_model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pseudo_marginal_potential("lik", _noisy_loglik, mu)
    return model  # exact posterior: N(0.5, 0.5)


def test_noisy_likelihood_gives_exact_posterior(noisy_model):
    idata = sample(noisy_model, KameleonStep, draws=5000, tune=1000, chains=2, seed=1)
    z_mean, z_var = moment_zscores(idata.posterior.mu.values, 0.5, 0.5)
    assert abs(z_mean) < 4 and abs(z_var) < 4, (z_mean, z_var)


def test_re_estimating_the_current_point_is_biased(noisy_model):
    """Same model and check: re-estimating the current point (MCWM) inflates the variance
    (about 0.68 instead of 0.5), which the check rejects."""
    idata = sample(noisy_model, ReEstimatingKameleon, draws=5000, tune=1000, chains=2, seed=1)
    z_mean, z_var = moment_zscores(idata.posterior.mu.values, 0.5, 0.5)
    assert z_var > 4, (z_mean, z_var)


def test_pymc_metropolis_warns_for_estimators(noisy_model):
    with noisy_model, pytest.warns(PseudoMarginalWarning, match="Metropolis"):
        pm.Metropolis()
    import warnings

    with noisy_model, warnings.catch_warnings():
        warnings.simplefilter("error", PseudoMarginalWarning)
        KameleonStep()
