"""pseudo_marginal_potential: estimators as PyMC potentials, sampled exactly."""

import pickle
import warnings
from functools import partial

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from checks import BACKENDS, gaussian_posterior, mean_error_in_mcse, sample
from pytensor.compile.builders import OpFromGraph
from pytensor.gradient import NullTypeGradError

from pymc_kameleon import KameleonStep, PseudoMarginalWarning, pseudo_marginal_potential
from pymc_kameleon.pseudo_marginal import (
    LikelihoodEstimatorOp,
    estimator_states,
    find_estimators,
    reseed_estimators,
    set_estimator_states,
)

Y = np.array([0.3, 1.8, 1.1, -0.4, 0.9, 2.2])
NOISE = 0.4  # per observation: log-noise sd ~1 in total


def _noisy_vector_loglik(mu, sigma, rng):
    """Per-observation log N(y_i | mu, sigma) plus mean-corrected log-normal noise: the
    exponential of the sum is an unbiased estimate of the likelihood (vector output)."""
    assert sigma > 0, "the estimator must receive the constrained value"
    noise = NOISE * rng.normal(size=Y.size) - 0.5 * NOISE**2
    return -0.5 * ((Y - mu) / sigma) ** 2 - np.log(sigma) + noise


@pytest.fixture(scope="module")
def noisy_model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pseudo_marginal_potential("lik", _noisy_vector_loglik, mu, sigma)
    return model


@pytest.fixture(scope="module")
def exact_reference():
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 2.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", mu, sigma, observed=Y)
        return pm.sample(draws=4000, tune=1000, chains=2, random_seed=0, progressbar=False,
                         compute_convergence_checks=False)


def test_several_bounded_parameters_and_vector_output_are_exact(noisy_model, exact_reference):
    """Compared with NUTS on the exact likelihood.  Checked once: the re-estimating (MCWM)
    variant of KameleonStep fails this test (0.9-quantile of mu off by ~6.5 standard errors)."""
    idata = sample(noisy_model, KameleonStep, draws=6000, tune=1500, chains=2, seed=3)
    for name in ("mu", "sigma"):
        x, ref = idata.posterior[name].values, exact_reference.posterior[name].values
        se = np.sqrt(x.var() / float(az.ess(x)) + ref.var() / float(az.ess(ref)))
        assert abs(x.mean() - ref.mean()) < 4 * se, name
        for q in (0.1, 0.5, 0.9):  # P(x <= reference q-quantile) = q, in MC standard errors
            below = (x <= np.quantile(ref, q)).astype(float)
            ref_below = (ref <= np.quantile(ref, q)).astype(float)
            se = np.sqrt(q * (1 - q) * (1 / float(az.ess(below)) + 1 / float(az.ess(ref_below))))
            assert abs(below.mean() - q) < 4 * se, (name, q)


def test_seeded_runs_reproduce_and_chains_differ(noisy_model):
    a = sample(noisy_model, KameleonStep, draws=150, tune=100, chains=2, seed=9)
    b = sample(noisy_model, KameleonStep, draws=150, tune=100, chains=2, seed=9)
    mp = sample(noisy_model, KameleonStep, draws=150, tune=100, chains=2, cores=2, seed=9)
    c = sample(noisy_model, KameleonStep, draws=150, tune=100, chains=2, seed=10)
    lp_a = a.sample_stats.lp.values  # the stored estimates themselves reproduce
    np.testing.assert_array_equal(lp_a, b.sample_stats.lp.values)
    np.testing.assert_array_equal(lp_a, mp.sample_stats.lp.values)
    assert not np.array_equal(lp_a, c.sample_stats.lp.values)
    assert not np.array_equal(lp_a[0], lp_a[1])


def test_no_gradient_and_a_clear_message(noisy_model):
    with pytest.raises(NullTypeGradError, match="gradient-free step"):
        noisy_model.dlogp()
    with noisy_model, pytest.raises(Exception, match="gradient-free step"):
        pm.NUTS()


@pytest.mark.parametrize("mode", [None, *BACKENDS])
@pytest.mark.parametrize("step", [pm.Metropolis, pm.Slice, pm.DEMetropolisZ])
def test_inexact_pymc_steps_warn(noisy_model, step, mode):
    """On every backend (Numba never calls ``make_thunk``; the C and Python VMs do)."""
    kwargs = {} if mode is None else {"compile_kwargs": {"mode": mode}}
    with noisy_model, pytest.warns(PseudoMarginalWarning, match="NOT target the exact"):
        step(**kwargs)


def test_default_pm_sample_assignment_warns(noisy_model):
    with noisy_model, pytest.warns(PseudoMarginalWarning):
        pm.sample(draws=5, tune=5, chains=1, progressbar=False, compute_convergence_checks=False)


def test_model_without_estimator_does_not_warn():
    with pm.Model(), warnings.catch_warnings():
        warnings.simplefilter("error", PseudoMarginalWarning)
        pm.Normal("x")
        pm.Metropolis()


def _gaussian_estimate(mu, data, rng):
    return -0.5 * float(np.sum((data - mu) ** 2)) + rng.normal() - 0.5


def test_set_data_then_a_new_run_does_not_keep_an_estimate_of_the_old_data():
    """A noisy estimate stored at the last draw under the old data is not the current value
    of a new run after ``pm.set_data`` (a second evaluation cannot tell a changed density
    from noise: the stored value's key holds a fingerprint of the data).  Kept, an estimate
    of about 0 against new ones of about -250 held the chain at its start."""
    kw = {"chains": 1, "cores": 1, "progressbar": False, "compute_convergence_checks": False}
    with pm.Model():
        data = pm.Data("data", np.zeros(20))
        mu = pm.Normal("mu", 0.0, 10.0)
        pseudo_marginal_potential("lik", _gaussian_estimate, mu, data)
        step = KameleonStep()
        first = pm.sample(tune=150, draws=20, step=step, random_seed=1, **kw)
        start = {"mu": float(first.posterior.mu.values[0, -1])}
        pm.set_data({"data": np.full(20, 5.0)})
        idata = pm.sample(tune=150, draws=100, step=step, random_seed=2, initvals=start, **kw)
    z = mean_error_in_mcse(idata.posterior.mu.values, *gaussian_posterior(10.0, 20, 100.0))
    assert abs(z) < 4, z


def test_nan_estimates_are_rejections():
    def estimator(x, rng):
        return np.nan if x > 1.0 else -0.5 * x**2

    with pm.Model() as model:
        x = pm.Flat("x", initval=0.0)
        pseudo_marginal_potential("lik", estimator, x)
    assert np.isnan(model.compile_logp()({"x": 2.0}))  # a NaN the steps count (n_nan)
    idata = sample(model, KameleonStep, draws=500, tune=200, chains=1)
    assert idata.posterior.x.values.max() <= 1.0


# ----------------------------------------------------------------------------- compiled graphs
def _estimate(x, rng):
    """Module level, so that compiled functions holding it can be pickled."""
    return -0.5 * float(np.sum(x**2)) + rng.normal() - 0.5


def _scan(fn, x):
    try:
        return pytensor.scan(fn, sequences=[x], return_updates=False)
    except TypeError:  # PyTensor without return_updates
        return pytensor.scan(fn, sequences=[x])[0]


def _graph(op, where):
    """``(input, output)`` with ``op`` applied in the outer graph or inside inner graphs."""
    x = pt.dmatrix("x")
    y = pt.dvector("y")
    wrapped = OpFromGraph([y], [2.0 * op(y)])
    if where == "outer":
        return x, op(x)
    if where == "OpFromGraph":
        return x, wrapped(x[0]) + 1.0
    if where == "Scan":
        return x, _scan(op, x).sum()
    if where == "Scan of OpFromGraph":
        return x, _scan(wrapped, x).sum()
    raise ValueError(where)


@pytest.mark.parametrize("mode", BACKENDS)
@pytest.mark.parametrize("where", ["outer", "OpFromGraph", "Scan", "Scan of OpFromGraph"])
def test_estimators_in_inner_graphs_are_found_and_reseeded(mode, where):
    op = LikelihoodEstimatorOp(_estimate, "lik", seed=0)
    x, out = _graph(op, where)
    fn = pytensor.function([x], out, mode=mode)
    assert find_estimators(fn) == [op]
    value = np.ones((3, 2))

    def run(seed):
        assert reseed_estimators(fn, np.random.default_rng(seed)) == 1
        return [float(fn(value)) for _ in range(4)]

    first = run(1)
    assert len(set(first)) == 4  # a new estimate at every call
    assert run(1) == first
    assert run(2) != first


def _two_estimators(mode):
    """A function of two estimator Ops, one of them inside a Scan."""
    outer = LikelihoodEstimatorOp(_estimate, "outer", seed=1)
    inner = LikelihoodEstimatorOp(_estimate, "inner", seed=2)
    x = pt.dmatrix("x")
    fn = pytensor.function([x], outer(x) + _scan(inner, x).sum(), mode=mode)
    assert {op.name for op in find_estimators(fn)} == {"outer", "inner"}
    return fn


@pytest.mark.parametrize("mode", BACKENDS)
def test_estimator_states_round_trip(mode):
    fn = _two_estimators(mode)
    value = np.ones((3, 2))
    saved = estimator_states(fn)
    first = [float(fn(value)) for _ in range(3)]
    set_estimator_states(fn, saved)
    assert [float(fn(value)) for _ in range(3)] == first
    with pytest.raises(ValueError, match="2 estimator Op"):
        set_estimator_states(fn, saved[:1])


def test_estimator_states_restore_a_pickled_copy():
    """As a step sent to a worker process: plain data, restored into copies of the Ops."""
    fn = _two_estimators("FAST_COMPILE")
    value = np.ones((3, 2))
    saved = pickle.loads(pickle.dumps(estimator_states(fn)))
    first = [float(fn(value)) for _ in range(3)]
    copy = pickle.loads(pickle.dumps(fn))
    set_estimator_states(copy, saved)
    assert [float(copy(value)) for _ in range(3)] == first


def test_estimator_states_keep_the_bit_generator():
    op = LikelihoodEstimatorOp(_estimate, "lik", seed=np.random.Generator(np.random.MT19937(3)))
    x = pt.dvector("x")
    fn = pytensor.function([x], op(x))
    saved = estimator_states(fn)
    first = [float(fn(np.zeros(2))) for _ in range(3)]
    set_estimator_states(fn, saved)
    assert isinstance(op.rng.bit_generator, np.random.MT19937)
    assert [float(fn(np.zeros(2))) for _ in range(3)] == first


def test_estimates_are_never_constant_folded():
    op = LikelihoodEstimatorOp(_estimate, "lik", seed=0)
    fn = pytensor.function([], op(pt.constant(np.zeros(2))))
    assert find_estimators(fn) == [op]
    assert fn() != fn()


@pytest.mark.parametrize("mode", BACKENDS[1:])
def test_chains_are_identical_on_every_backend(mode):
    """Same seeds, same estimates, same draws whichever backend compiled the step's log
    density: exactness and reproducibility checked on one backend carry over to all.

    The backends round the deterministic terms (the priors) differently in the last bits,
    and the adaptive warm-up (scale and covariance updates) amplifies such differences
    (as any two runs of a chaotic map whose inputs differ by one ulp; figures in
    ``docs/benchmarks/test_calibration.md``).  So identity is checked on the first 40 draws
    of 2 iterations each: the same estimates in the same order, the same decisions."""

    def run(mode):
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 2.0)
            sigma = pm.HalfNormal("sigma", 2.0)
            pseudo_marginal_potential("lik", _noisy_vector_loglik, mu, sigma, seed=4)
        step = partial(KameleonStep, n_steps=2, compile_kwargs={"mode": mode})
        return sample(model, step, draws=5, tune=40, chains=2, seed=8,
                      discard_tuned_samples=False)

    ref, other = run(BACKENDS[0]), run(mode)
    np.testing.assert_allclose(other.warmup_sample_stats.lp.values,
                               ref.warmup_sample_stats.lp.values, rtol=1e-12)
    np.testing.assert_allclose(other.warmup_posterior.mu.values,
                               ref.warmup_posterior.mu.values, rtol=1e-12)
