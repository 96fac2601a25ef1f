"""Fast tests of the real-model suite's models and of the evaluation counter.

The models are the package's (:mod:`pymc_kameleon.models.classic`,
:mod:`~pymc_kameleon.models.hard`); their reference posteriors and the suite that compares
samplers on them are the benchmarks' (``benchmarks/suite``, tested in ``benchmarks/tests``).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_kameleon import RandomWalkStep
from pymc_kameleon.models import hard as hm
from pymc_kameleon.models.classic import eight_schools_centred
from pymc_kameleon.models.counting import EvalCounter, add_counter, find_counter
from pymc_kameleon.models.synthetic import NumpyLogp

SAMPLE_KW = dict(progressbar=False, compute_convergence_checks=False, random_seed=3)


# ----------------------------------------------------------------------------- models
def test_centred_eight_schools_chain_is_not_frozen_by_the_laplace_start():
    """On the centred eight schools the Laplace start's optimiser ran into the funnel's neck
    (tau ~ 1e-5) and stopped there on a slope it could not follow: the Gaussian it gave
    (theta sd 9e-6) kept tau constant to the last digit for the whole run (R-hat NaN, ESS
    0).  Now the point is seen not to be a maximum (the log density still rises along log
    tau), the user is warned and the warm-up starts from the initial point: tau moves.
    (Without that check, ``_RISE = inf``, this test fails: no warning, tau constant.)"""
    with eight_schools_centred():
        step = RandomWalkStep()
        with pytest.warns(UserWarning, match="no usable mode"):
            idata = pm.sample(draws=200, tune=300, chains=1, cores=1, step=step, **SAMPLE_KW)
    tau = idata.posterior["tau"].values.ravel()
    assert tau.std() > 0.1 * tau.mean() and tau.min() > 1e-3, (tau.min(), tau.std())


@pytest.mark.parametrize("name", ["years", "collinear"])
def test_reference_parametrisation_has_the_same_posterior(name):
    """The NUTS reference runs on another parametrisation: its log density at the mapped
    points differs from the model's by one constant (a linear map has a constant Jacobian)."""
    factories = {"years": (hm.years_regression_model, hm.years_regression_centred),
                 "collinear": (hm.collinear_regression_model, hm.collinear_regression_whitened)}
    model, ref_model = (make() for make in factories[name])
    logp, ref_logp = model.compile_logp(), ref_model.compile_logp()
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(5):
        point = {k: v + rng.normal(0.0, 0.01, np.shape(v))
                 for k, v in model.initial_point().items()}
        ref_point = {"sigma_log__": point["sigma_log__"]}
        if name == "years":
            ref_point.update(a_c=point["alpha"] + point["beta"] * hm.years_data()[0].mean(),
                             beta=point["beta"])
        else:
            coef = np.concatenate([[point["alpha"]], point["beta"]])
            ref_point["z"] = np.linalg.solve(hm.collinear_whitening(), coef)
        diffs.append(float(logp(point)) - float(ref_logp(ref_point)))
    assert np.ptp(diffs) < 1e-6 * max(1.0, abs(diffs[0])), diffs


def test_hard_model_data_are_the_documented_simulations():
    """The constants typed into pymc_kameleon/models/hard/ are what their seeds and true
    values give; the PK concentrations stay below Km (only Vm / Km is pinned by the data)."""
    np.testing.assert_array_equal(hm.pk_simulate(), hm.PK_CONC)
    np.testing.assert_array_equal(hm.gp_simulate(), hm.GP_COUNTS)
    assert hm.PK_CONC.max() < hm.PK_TRUE[2] / 4


def _pk_points(n: int) -> list[dict]:
    """Points around the PK posterior's bulk and along its arm (Km, Vm up together)."""
    rng = np.random.default_rng(1)
    base = {"log_ka": 0.0, "log_Vm": np.log(9.0), "log_Km": np.log(30.0),
            "log_sigma": np.log(0.1)}
    points = []
    for _ in range(n):
        up = rng.uniform(-1.0, 2.0)
        points.append({k: v + rng.normal(0.0, 0.2) + (up if k in ("log_Vm", "log_Km") else 0)
                       for k, v in base.items()})
    return points


@pytest.mark.parametrize("broken", [False, True])
def test_pk_reference_model_has_the_same_posterior(broken, monkeypatch):
    """NUTS's RK4-with-sensitivities version of the PK model and the black-box ``odeint``
    model agree to 1e-6 in log density; with an RK4 of 2 steps per quarter hour (a broken
    reference) they do not, so the check can fail."""
    if broken:
        # in the module whose solve_pk_sensitivities reads it (hm.PK_RK4_STEPS is a copy)
        monkeypatch.setattr("pymc_kameleon.models.hard.pk.PK_RK4_STEPS", 2)
    logp = hm.pk_model().compile_logp()
    ref_logp = hm.pk_model_differentiable().compile_logp()
    diffs = [float(logp(p)) - float(ref_logp(p)) for p in _pk_points(8)]
    assert (np.max(np.abs(diffs)) < 1e-6) != broken, diffs


def test_pk_reference_gradient_matches_finite_differences():
    """The sensitivity equations' gradient is the derivative of the RK4 log density."""
    model = hm.pk_model_differentiable()
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    names = [v.name for v in model.value_vars]
    for point in _pk_points(3):
        grad = dlogp(point)
        for i, name in enumerate(names):
            h = 1e-5
            up, down = dict(point), dict(point)
            up[name], down[name] = point[name] + h, point[name] - h
            fd = (float(logp(up)) - float(logp(down))) / (2 * h)
            assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-4), (name, grad[i], fd)


@pytest.mark.parametrize("broken", [False, True])
def test_gp_noncentred_reference_has_the_same_posterior(broken):
    """The non-centred GP model's density in ``z = L^-1 f`` is the centred one's plus
    ``log det L`` (the Jacobian of ``f = L z``), to 1e-4 (the correlation matrix's
    condition number reaches ~1e6 at long lengthscales); without the Jacobian (broken)
    they differ by O(1), so the check can fail."""
    logp = hm.gp_poisson_model().compile_logp()
    ref_logp = hm.gp_poisson_noncentred().compile_logp()
    rng = np.random.default_rng(2)
    diffs = []
    for _ in range(6):
        log_amp, log_ls = rng.normal(0.0, 0.7), rng.normal(np.log(2.0), 0.3)
        # the models' own correlation matrix (the one both parameterisations share)
        chol = np.exp(log_amp) * np.linalg.cholesky(hm.gp_correlation(np.exp(log_ls)).eval())
        f = rng.normal(0.0, 0.5, hm.GP_X.size)
        z = np.linalg.solve(chol, f)
        jacobian = 0.0 if broken else np.sum(np.log(np.diag(chol)))
        diffs.append(float(logp({"log_amp": log_amp, "log_ls": log_ls, "f": f}))
                     - float(ref_logp({"log_amp": log_amp, "log_ls": log_ls, "z": z}))
                     + jacobian)
    assert (np.max(np.abs(diffs)) < 1e-4) != broken, diffs


def test_gp_pois_regr_is_posteriordbs_stan_model():
    """The model's density (constrained values, no Jacobian) is the Stan model's, written
    with SciPy: Gamma(25, rate 4), half-normal(2), N(0, 1) and Poisson(exp(L f_tilde))
    with Stan's ``gp_exp_quad_cov`` (``alpha^2 exp(-d^2 / (2 rho^2))``) + 1e-10 I, up to
    one constant; with ``rho`` where ``rho^2`` belongs (broken) it is not."""
    from scipy.linalg import cholesky
    logp = hm.gp_pois_regr_model().compile_logp(jacobian=False)
    x, k = np.arange(-10.0, 11.0, 2.0), np.array([40, 37, 29, 12, 4, 3, 9, 19, 77, 82, 33])
    rng = np.random.default_rng(5)
    for broken in (False, True):
        diffs = []
        for _ in range(5):
            rho, alpha, z = rng.gamma(25.0, 0.25), abs(rng.normal(3.0, 0.5)), rng.normal(size=11)
            scale = 2 * rho if broken else 2 * rho**2
            cov = alpha**2 * np.exp(-((x[:, None] - x[None, :]) ** 2) / scale) + 1e-10 * np.eye(11)
            f = cholesky(cov, lower=True) @ z
            stan = (stats.gamma.logpdf(rho, 25.0, scale=0.25) + stats.halfnorm.logpdf(alpha, 0, 2)
                    + stats.norm.logpdf(z).sum() + stats.poisson.logpmf(k, np.exp(f)).sum())
            diffs.append(float(logp({"rho_log__": np.log(rho), "alpha_log__": np.log(alpha),
                                     "f_tilde": z})) - stan)
        assert (np.ptp(diffs) < 1e-6) != broken, diffs


def test_gp_pois_regr_reference_maps_f_back_to_f_tilde():
    """posteriordb stores ``f = L f_tilde``; the reference's map recovers ``f_tilde`` (to
    1e-8) from draws of ``rho``, ``alpha`` and ``f`` shaped as posteriordb's chains."""
    rng = np.random.default_rng(6)
    rho, alpha = rng.gamma(25.0, 0.25, (2, 3)), np.abs(rng.normal(3.0, 0.8, (2, 3)))
    z = rng.normal(size=(2, 3, 11))
    draws = {"rho": rho, "alpha": alpha}
    f = np.empty_like(z)
    for idx in np.ndindex(rho.shape):
        f[idx] = np.linalg.cholesky(hm.gp_pois_regr_cov(alpha[idx], rho[idx])) @ z[idx]
    draws |= {f"f[{i + 1}]": f[..., i] for i in range(11)}
    out = hm.gp_pois_regr_from_posteriordb(draws)
    assert out.shape == (2, 3, 13)
    np.testing.assert_allclose(out[..., 0], rho)
    np.testing.assert_allclose(out[..., 1], alpha)
    np.testing.assert_allclose(out[..., 2:], z, atol=1e-8)


#: A prior draw of hare-lynx's (chain 4 of ``pm.sample_smc(random_seed=1)``) whose wild
#: cycle drives the predators below odeint's tolerance: the solver fails there.
HARE_LYNX_SOLVER_FAILS = {"rates_interval__": [-1.3115506, -2.31957774, 0.85062445, -3.5123017],
                          "z0_log__": [1.83017118, 3.23258255],
                          "sigma_log__": [-1.57450832, -0.75246848]}


def test_hare_lynx_solver_failure_is_zero_density_not_nan():
    """Where odeint fails the black box gives +inf populations, so the log likelihood is
    -inf: zero density, which pm.sample_smc's tempering weights as such, where a NaN stopped
    it ("cannot convert float NaN to integer"); the MCMC steps reject both alike."""
    model = hm.hare_lynx_model()
    point = {k: np.asarray(v) for k, v in HARE_LYNX_SOLVER_FAILS.items()}
    likelihood, prior = model.compile_fn([model.datalogp, model.varlogp], point_fn=True)(point)
    assert float(likelihood) == -np.inf and np.isfinite(prior)  # a prior draw
    # the same point's rates and initial states, rounded: the solver's failure value
    params = np.array([0.2694, 0.0983, 2.3411, 0.0298, 6.235, 25.345])
    assert np.all(np.isposinf(hm.solve_hare_lynx(params)))
    # the global mode's neighbourhood is finite (the failure value is not returned there)
    assert np.isfinite(hm.solve_hare_lynx(np.concatenate(
        [hm.HARE_LYNX_START["rates"], hm.HARE_LYNX_START["z0"]]))).all()


def test_pk_black_box_is_zero_density_where_km_underflows():
    """Below log Km = -745, Km is 0 and the right-hand side 0 / 0 at C(0) = 0: the black box
    gives +inf concentrations (log likelihood -inf) instead of raising ZeroDivisionError
    (pm.Slice on pk stopped there at seed 1); a point in the bulk stays finite."""
    assert np.all(np.isposinf(hm.solve_pk(np.array([0.0, 2.0, -800.0]))))
    model = hm.pk_model()
    likelihood = model.compile_fn(model.datalogp, point_fn=True)
    point = {"log_ka": 0.0, "log_Vm": 2.0, "log_Km": -800.0, "log_sigma": np.log(0.1)}
    assert float(likelihood(point)) == -np.inf
    assert np.isfinite(float(likelihood({**point, "log_Km": np.log(30.0)})))


# ----------------------------------------------------------------------------- counting
class _DirectCount(NumpyLogp):
    """A standard normal NumPy log density counting its own calls."""

    def __init__(self):
        super().__init__(lambda x: -0.5 * float(x @ x), name="direct")
        self.count = 0

    def perform(self, node, inputs, output_storage):
        self.count += 1
        super().perform(node, inputs, output_storage)


def _two_var_model():
    """Two free variables with a direct count (a counting NumPy density) next to the suite's
    counter."""
    direct = _DirectCount()
    with pm.Model() as model:
        a = pm.Flat("a", shape=2)
        b = pm.Flat("b")
        pm.Potential("lp", direct(pt.concatenate([a, b[None]])))
    return model, direct, add_counter(model)


def test_counter_counts_one_per_compiled_logp_call_and_survives_rewrites():
    model = eight_schools_centred()
    counter = add_counter(model)
    assert find_counter(model) is counter
    logp = model.compile_logp()
    nodes = logp.f.maker.fgraph.apply_nodes
    assert any(isinstance(node.op, EvalCounter) for node in nodes)  # not folded away
    counter.reset()
    value = logp(model.initial_point())
    assert counter.count == 1
    assert value == pytest.approx(eight_schools_centred().compile_logp()(model.initial_point()))
    x = pt.dvector("x")
    f = pytensor.function([x], pytensor.grad(EvalCounter()(x) + (x**2).sum(), x))
    assert f(np.array([3.0, 1.0])) == pytest.approx([6.0, 2.0])  # zero gradient


@pytest.mark.parametrize("make_step", [pm.Metropolis, pm.Slice, pm.DEMetropolisZ,
                                       RandomWalkStep])
def test_counter_matches_a_direct_count(make_step):
    model, direct, counter = _two_var_model()
    with model:
        step = make_step()
        direct.count, counter.count = 0, 0
        pm.sample(draws=30, tune=30, chains=2, cores=1, step=step, **SAMPLE_KW)
    assert counter.count == direct.count > 0


def test_nuts_counts_gradient_evaluations():
    """NUTS: one count per logp-and-gradient evaluation: the leapfrog steps (``n_steps``),
    plus one at the start of every iteration and a few during initialisation."""
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=3)
    counter = add_counter(model)
    with model:
        idata = pm.sample(draws=40, tune=40, chains=2, cores=1, discard_tuned_samples=False,
                          **SAMPLE_KW)
    n_steps = int(idata.sample_stats["n_steps"].sum() + idata.warmup_sample_stats[
        "n_steps"].sum())
    assert n_steps + 160 <= counter.count <= n_steps + 160 + 10
