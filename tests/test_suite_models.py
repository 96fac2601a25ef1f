"""Fast tests of the real-model benchmark suite (``benchmarks/suite``)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from benchmarks.suite import cli, runner
from benchmarks.suite.analytic import dirichlet_moments, gauss50_moments
from benchmarks.suite.data import MULTINOMIAL_COUNTS
from benchmarks.suite.metrics import accuracy, diagnostics, stack_posterior
from benchmarks.suite.models import MODELS, free_var_labels, gauss50_cov, set_glass_path
from benchmarks.suite.reference import KEEP_DRAWS, REFERENCE_DIR, load_reference
from benchmarks.suite.runner import DEFAULT_SAMPLERS, run_one
from pymc_kameleon import RandomWalkStep
from pymc_kameleon.models.counting import EvalCounter, add_counter, find_counter
from pymc_kameleon.models.synthetic import NumpyLogp

MODEL_PARAMS = [
    pytest.param(name, marks=pytest.mark.skipif(not spec.available(), reason="data absent"))
    for name, spec in MODELS.items()
]
SAMPLE_KW = dict(progressbar=False, compute_convergence_checks=False, random_seed=3)


# ----------------------------------------------------------------------------- models
@pytest.mark.parametrize("name", MODEL_PARAMS)
def test_model_builds_and_matches_its_reference(name):
    spec = MODELS[name]
    model = spec.factory()
    _, labels = free_var_labels(model)
    assert len(labels) == spec.dim
    assert np.isfinite(model.compile_logp()(model.initial_point()))
    ref = load_reference(name)
    assert ref.labels == labels
    assert ref.mean.shape == ref.sd.shape == (spec.dim,)
    assert np.all(np.isfinite(ref.mean)) and np.all(ref.sd > 0)
    assert ref.meta["method"] == spec.reference
    if ref.sample is not None:
        assert ref.sample.shape == (min(KEEP_DRAWS, ref.sample.shape[0]), spec.dim)
    if "max_rhat" in ref.meta:  # MCMC references must have converged themselves
        assert ref.meta["max_rhat"] <= 1.01 and ref.meta["min_ess_bulk"] >= 1000


def test_centred_eight_schools_chain_is_not_frozen_by_the_laplace_start():
    """On the centred eight schools the Laplace start's optimiser ran into the funnel's neck
    (tau ~ 1e-5) and stopped there on a slope it could not follow: the Gaussian it gave
    (theta sd 9e-6) kept tau constant to the last digit for the whole run (R-hat NaN, ESS
    0).  Now the point is seen not to be a maximum (the log density still rises along log
    tau), the user is warned and the warm-up starts from the initial point: tau moves.
    (Without that check, ``_RISE = inf``, this test fails: no warning, tau constant.)"""
    with MODELS["eight-schools-c"].factory():
        step = RandomWalkStep()
        with pytest.warns(UserWarning, match="no usable mode"):
            idata = pm.sample(draws=200, tune=300, chains=1, cores=1, step=step, **SAMPLE_KW)
    tau = idata.posterior["tau"].values.ravel()
    assert tau.std() > 0.1 * tau.mean() and tau.min() > 1e-3, (tau.min(), tau.std())


def test_centred_radon_warmup_does_not_start_in_the_funnels_neck():
    """The centred radon model's joint mode lies in the neck (sigma_a small, intercepts
    pulled together); the Laplace Gaussian there misses the posterior (sd of its log
    importance weights 55-860, bound sqrt(24)) and is not used.  With it, the warm-up
    never left the neck: seeds 3-5, RandomWalkStep, tune 1000, smallest posterior sd
    0.000-0.020 of the reference's and a mean 2.1 reference sds off; now 0.78-0.87 and
    0.25-0.36."""
    spec = MODELS["radon"]
    model = spec.factory()
    names, _ = free_var_labels(model)
    ref = load_reference("radon")
    with model:
        idata = pm.sample(draws=300, tune=1000, chains=1, cores=1, step=RandomWalkStep(),
                          **SAMPLE_KW)
    x = stack_posterior(idata.posterior, names).reshape(-1, spec.dim)
    ratio = x.std(axis=0) / ref.sd
    err = np.abs(x.mean(axis=0) - ref.mean) / ref.sd
    assert ratio.min() > 0.5 and err.max() < 1.0, (ratio.min(), err.max())


def test_metadata_marks_flower_multimodal_and_the_expensive_models():
    assert [n for n, s in MODELS.items() if s.multimodal] == ["flower"]
    assert {n for n, s in MODELS.items() if not s.cheap} == {"lotka-volterra", "gp-glass",
                                                               "hare-lynx", "pk"}
    assert {n for n, s in MODELS.items() if not s.has_gradient} == {
        "lotka-volterra", "gp-glass", "hare-lynx", "pk"}


@pytest.mark.parametrize("name", ["years", "collinear"])
def test_reference_parametrisation_has_the_same_posterior(name):
    """The NUTS reference runs on another parametrisation: its log density at the mapped
    points differs from the model's by one constant (a linear map has a constant Jacobian)."""
    from benchmarks.suite.hard_models import collinear_whitening, years_data

    spec = MODELS[name]
    model, ref_model = spec.factory(), spec.reference_factory()
    logp, ref_logp = model.compile_logp(), ref_model.compile_logp()
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(5):
        point = {k: v + rng.normal(0.0, 0.01, np.shape(v))
                 for k, v in model.initial_point().items()}
        ref_point = {"sigma_log__": point["sigma_log__"]}
        if name == "years":
            ref_point.update(a_c=point["alpha"] + point["beta"] * years_data()[0].mean(),
                             beta=point["beta"])
        else:
            coef = np.concatenate([[point["alpha"]], point["beta"]])
            ref_point["z"] = np.linalg.solve(collinear_whitening(), coef)
        diffs.append(float(logp(point)) - float(ref_logp(ref_point)))
    assert np.ptp(diffs) < 1e-6 * max(1.0, abs(diffs[0])), diffs


def test_hard_model_data_are_the_documented_simulations():
    """The constants typed into hard_models.py are what their seeds and true values give;
    the PK concentrations stay below Km (only Vm / Km is pinned by the data)."""
    from benchmarks.suite import hard_models as hm

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
    from benchmarks.suite import hard_models as hm

    if broken:
        monkeypatch.setattr(hm, "PK_RK4_STEPS", 2)
    logp = hm.pk_model().compile_logp()
    ref_logp = hm.pk_model_differentiable().compile_logp()
    diffs = [float(logp(p)) - float(ref_logp(p)) for p in _pk_points(8)]
    assert (np.max(np.abs(diffs)) < 1e-6) != broken, diffs


def test_pk_reference_gradient_matches_finite_differences():
    """The sensitivity equations' gradient is the derivative of the RK4 log density."""
    from benchmarks.suite.hard_models import pk_model_differentiable

    model = pk_model_differentiable()
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
    from benchmarks.suite import hard_models as hm

    logp = hm.gp_poisson_model().compile_logp()
    ref_logp = hm.gp_poisson_noncentred().compile_logp()
    rng = np.random.default_rng(2)
    diffs = []
    for _ in range(6):
        log_amp, log_ls = rng.normal(0.0, 0.7), rng.normal(np.log(2.0), 0.3)
        # the models' own correlation matrix (the one both parameterisations share)
        chol = np.exp(log_amp) * np.linalg.cholesky(hm._gp_correlation(np.exp(log_ls)).eval())
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

    from benchmarks.suite import hard_models as hm

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
    from benchmarks.suite import hard_models as hm

    rng = np.random.default_rng(6)
    rho, alpha = rng.gamma(25.0, 0.25, (2, 3)), np.abs(rng.normal(3.0, 0.8, (2, 3)))
    z = rng.normal(size=(2, 3, 11))
    draws = {"rho": rho, "alpha": alpha}
    f = np.empty_like(z)
    for idx in np.ndindex(rho.shape):
        f[idx] = np.linalg.cholesky(hm._gp_pois_regr_cov(alpha[idx], rho[idx])) @ z[idx]
    draws |= {f"f[{i + 1}]": f[..., i] for i in range(11)}
    out = hm.gp_pois_regr_from_posteriordb(draws)
    assert out.shape == (2, 3, 13)
    np.testing.assert_allclose(out[..., 0], rho)
    np.testing.assert_allclose(out[..., 1], alpha)
    np.testing.assert_allclose(out[..., 2:], z, atol=1e-8)


@pytest.mark.parametrize("packed", [False, True])
def test_posteriordb_reference_reads_its_draws_folder(tmp_path, packed):
    """``--posteriordb DIR`` reads ``NAME.json`` or ``NAME.json.zip`` (posteriordb's list of
    chains, each a dict of parameter -> draws) into the model's free variables; the
    reference's means are those of the mapped draws; no folder, no reference."""
    import argparse
    import zipfile

    from benchmarks.suite.reference import make_reference

    spec = MODELS["gp-pois-regr"]
    rng = np.random.default_rng(7)
    chains = [{"rho": list(rng.gamma(25.0, 0.25, 40)), "alpha": list(rng.uniform(1, 4, 40)),
               **{f"f[{i}]": list(rng.normal(2.0, 1.0, 40)) for i in range(1, 12)}}
              for _ in range(4)]
    text = json.dumps(chains)
    if packed:
        with zipfile.ZipFile(tmp_path / f"{spec.posteriordb}.json.zip", "w") as z:
            z.writestr(f"{spec.posteriordb}.json", text)
    else:
        (tmp_path / f"{spec.posteriordb}.json").write_text(text)
    args = argparse.Namespace(seed=0, command="test", posteriordb=tmp_path)
    ref = make_reference(spec, args)
    draws = {k: np.array([c[k] for c in chains]) for k in chains[0]}
    expect = spec.from_posteriordb(draws).reshape(-1, 13)
    np.testing.assert_allclose(ref.mean, expect.mean(0))
    assert ref.meta["posteriordb"] == spec.posteriordb and ref.meta["chains"] == 4
    with pytest.raises(FileNotFoundError):
        make_reference(spec, argparse.Namespace(seed=0, command="t", posteriordb=tmp_path / "x"))


#: A prior draw of hare-lynx's (chain 4 of ``pm.sample_smc(random_seed=1)``) whose wild
#: cycle drives the predators below odeint's tolerance: the solver fails there.
HARE_LYNX_SOLVER_FAILS = {"rates_interval__": [-1.3115506, -2.31957774, 0.85062445, -3.5123017],
                          "z0_log__": [1.83017118, 3.23258255],
                          "sigma_log__": [-1.57450832, -0.75246848]}


def test_hare_lynx_solver_failure_is_zero_density_not_nan():
    """Where odeint fails the black box gives +inf populations, so the log likelihood is
    -inf: zero density, which pm.sample_smc's tempering weights as such, where a NaN stopped
    it ("cannot convert float NaN to integer"); the MCMC steps reject both alike."""
    from benchmarks.suite import hard_models as hm

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
    from benchmarks.suite import hard_models as hm

    assert np.all(np.isposinf(hm.solve_pk(np.array([0.0, 2.0, -800.0]))))
    model = hm.pk_model()
    likelihood = model.compile_fn(model.datalogp, point_fn=True)
    point = {"log_ka": 0.0, "log_Vm": 2.0, "log_Km": -800.0, "log_sigma": np.log(0.1)}
    assert float(likelihood(point)) == -np.inf
    assert np.isfinite(float(likelihood({**point, "log_Km": np.log(30.0)})))


def test_pk_reference_holds_its_tails():
    """The PK reference's 0.1 % and 99.9 % quantiles agree between the two halves of its
    chains within three Monte Carlo standard errors of their difference, and on the arm
    (``log_Vm``, ``log_Km``: the point of the model) within 0.15 of the reference's sd.
    The reference of 4 x 1250 draws failed the second (``log_Km``'s 99.9 % quantile 5.32
    against 6.07, 1.3 sd)."""
    ref = load_reference("pk")
    q1, q2 = (np.asarray(q) for q in ref.meta["tail_quantiles_halves"])
    se1, se2 = (np.asarray(s) for s in ref.meta["tail_quantiles_mcse_halves"])
    gap = np.abs(q1 - q2)
    assert np.all(gap <= 3.0 * np.hypot(se1, se2)), (gap, se1, se2)
    arm = [ref.labels.index("log_Vm"), ref.labels.index("log_Km")]
    assert np.all(gap[:, arm] < 0.15 * ref.sd[arm]), (gap, ref.sd)
    assert ref.meta["divergences"] <= 4


@pytest.mark.parametrize("name", ["gp-poisson", "gp-poisson-nc"])
def test_gp_poisson_reference_has_few_divergences(name):
    assert load_reference(name).meta["divergences"] <= 4


def test_reference_files_are_small():
    files = {p.stem: p.stat().st_size for p in REFERENCE_DIR.glob("*.npz")}
    assert set(files) == set(MODELS)  # every model has its cached reference
    assert sum(files.values()) < 600e3 and max(files.values()) < 60e3


def _grid_moments(grid: np.ndarray, logp: np.ndarray, axis: int) -> tuple[float, float]:
    w = np.exp(logp - logp.max())
    marg = w.sum(axis=1 - axis) if w.ndim == 2 else w
    marg = marg / marg.sum()
    mean = float(np.sum(grid * marg))
    return mean, float(np.sqrt(np.sum((grid - mean) ** 2 * marg)))


def test_scales_closed_form_matches_quadrature_of_the_model():
    """The conjugate formulas agree with grid integration of the PyMC model's own density."""
    ref = load_reference("scales")
    mean, sd = dict(zip(ref.labels, ref.mean, strict=True)), dict(zip(ref.labels, ref.sd,
                                                                      strict=True))
    model = MODELS["scales"].factory()
    logp = model.compile_logp(jacobian=False)  # density of the constrained values

    def at(**kw):
        v = {**mean, **kw}
        return logp({"lam_log__": np.log(v["lam"]), "p_logodds__": np.log(v["p"] / (1 - v["p"])),
                     "sigma2_log__": np.log(v["sigma2"]), "mu": v["mu"], "c": v["c"]})

    for name in ("lam", "p", "c"):  # independent blocks: conditional = marginal
        grid = np.linspace(max(mean[name] - 8 * sd[name], 1e-9), mean[name] + 8 * sd[name], 801)
        got = _grid_moments(grid, np.array([at(**{name: g}) for g in grid]), 0)
        assert got == pytest.approx((mean[name], sd[name]), rel=2e-3)
    s2 = np.linspace(mean["sigma2"] / 6, mean["sigma2"] * 5, 160)
    mu = np.linspace(mean["mu"] - 8 * sd["mu"], mean["mu"] + 8 * sd["mu"], 160)
    table = np.array([[at(sigma2=a, mu=b) for b in mu] for a in s2])
    assert _grid_moments(s2, table, 0) == pytest.approx((mean["sigma2"], sd["sigma2"]), rel=2e-2)
    assert _grid_moments(mu, table, 1) == pytest.approx((mean["mu"], sd["mu"]), rel=2e-2)


def test_dirichlet_closed_form_is_the_models_posterior():
    """The model's density is Dirichlet(1 + counts) up to a constant; its moments are SciPy's."""
    alpha = 1.0 + MULTINOMIAL_COUNTS
    model = MODELS["dirichlet"].factory()
    logp = model.compile_logp(jacobian=False)
    vv = model.rvs_to_values[model["p"]]
    transform = model.rvs_to_transforms[model["p"]]
    points = np.random.default_rng(0).dirichlet(alpha, size=3)

    def model_logp(p):
        return logp({vv.name: transform.forward(pt.as_tensor(p)).eval()})

    got = [model_logp(p) - model_logp(points[0]) for p in points[1:]]
    want = [stats.dirichlet.logpdf(p, alpha) - stats.dirichlet.logpdf(points[0], alpha)
            for p in points[1:]]
    np.testing.assert_allclose(got, want, rtol=1e-8)
    mean, sd = dirichlet_moments()
    np.testing.assert_allclose(mean, stats.dirichlet.mean(alpha), rtol=1e-12)
    np.testing.assert_allclose(sd**2, stats.dirichlet.var(alpha), rtol=1e-12)


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
    model = MODELS["eight-schools-c"].factory()
    counter = add_counter(model)
    assert find_counter(model) is counter
    logp = model.compile_logp()
    nodes = logp.f.maker.fgraph.apply_nodes
    assert any(isinstance(node.op, EvalCounter) for node in nodes)  # not folded away
    counter.reset()
    value = logp(model.initial_point())
    assert counter.count == 1
    assert value == pytest.approx(MODELS["eight-schools-c"].factory().compile_logp()(
        model.initial_point()))
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


# ----------------------------------------------------------------------------- metrics
def _gauss_draws(rng, shift=0.0, scale=1.0, chains=4, draws=1000):
    mean, cov = gauss50_cov()
    x = rng.multivariate_normal(mean, cov, size=(chains, draws))
    return mean + scale * (x - mean) + shift * np.sqrt(np.diag(cov))


def test_iid_reference_draws_pass_and_distorted_ones_fail():
    rng = np.random.default_rng(0)
    mean, sd = gauss50_moments()
    labels = [f"x[{i}]" for i in range(50)]
    good = accuracy(diagnostics(_gauss_draws(rng)), mean, sd, labels)
    assert good.all_ok and good.min_ess_bulk > 2000
    shifted = accuracy(diagnostics(_gauss_draws(rng, shift=0.3)), mean, sd, labels)
    assert shifted.rhat_ok and shifted.sd_ok and not shifted.mean_ok
    assert shifted.mean_err == pytest.approx(0.3, abs=0.1)
    wide = accuracy(diagnostics(_gauss_draws(rng, scale=1.3)), mean, sd, labels)
    assert wide.mean_ok and not wide.sd_ok and wide.sd_ratio == pytest.approx(1.3, abs=0.1)
    apart = _gauss_draws(rng)
    apart[0] += 0.5 * sd  # one chain elsewhere
    assert not accuracy(diagnostics(apart), mean, sd, labels).rhat_ok
    stuck = np.repeat(apart[:, :1], 1000, axis=1)  # every chain stuck at its start
    assert accuracy(diagnostics(stuck), mean, sd, labels).max_rhat > 10
    frozen = np.broadcast_to(mean, (4, 1000, 50))  # never moved, at the right mean
    bad = accuracy(diagnostics(frozen), mean, sd, labels)
    assert bad.min_ess_bulk == 0 and np.isnan(bad.max_rhat) and not bad.all_ok


def test_stack_posterior_orders_scalars_like_the_labels():
    post = {"a": np.zeros((2, 5)), "b": np.arange(2 * 5 * 3).reshape(2, 5, 3)}
    out = stack_posterior(post, ["a", "b"])
    assert out.shape == (2, 5, 4) and out[1, 4, 3] == post["b"][1, 4, 2]


# ------------------------------------------------- metrics against an independent numpy code
def _split(x: np.ndarray) -> np.ndarray:
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, half:2 * half]])


def _znorm(x: np.ndarray) -> np.ndarray:
    """Rank normalisation of Vehtari et al. (2021), eq. 14: ranks over all draws."""
    ranks = stats.rankdata(x, method="average").reshape(x.shape)
    return stats.norm.ppf((ranks - 0.375) / (x.size + 0.25))


def _classic_rhat(x: np.ndarray) -> float:
    n = x.shape[1]
    within = x.var(axis=1, ddof=1).mean()
    between = n * x.mean(axis=1).var(ddof=1)
    return float(np.sqrt(((n - 1) / n * within + between / n) / within))


def _np_ess(x: np.ndarray) -> float:
    """Multi-chain ESS (Stan): combined autocorrelations, Geyer's initial monotone sequence."""
    m, n = x.shape
    centred = x - x.mean(axis=1, keepdims=True)
    acov = np.array([np.correlate(c, c, mode="full")[n - 1:] / n for c in centred])
    within = acov[:, 0].mean() * n / (n - 1)
    var_plus = within * (n - 1) / n + x.mean(axis=1).var(ddof=1)
    rho = 1.0 - (within - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    pairs = rho[: 2 * (n // 2)].reshape(-1, 2).sum(axis=1)
    stop = np.argmax(pairs <= 0) if np.any(pairs <= 0) else pairs.size
    pairs = np.minimum.accumulate(pairs[:stop])
    return m * n / (-1.0 + 2.0 * pairs.sum())


def _np_diagnostics(x: np.ndarray) -> tuple[float, float, float]:
    """Rank-normalised split R-hat, bulk ESS and tail ESS (5 % and 95 %) of ``x (m, n)``."""
    split = _split(x)
    folded = np.abs(split - np.median(split))
    rhat = max(_classic_rhat(_znorm(split)), _classic_rhat(_znorm(folded)))
    tails = [_np_ess((split <= np.quantile(x, q)).astype(float)) for q in (0.05, 0.95)]
    return rhat, _np_ess(_znorm(split)), min(tails)


def _ar1_chains(rng, phi: float, offsets: np.ndarray, n: int = 2000) -> np.ndarray:
    eps = rng.normal(size=(offsets.size, n))
    x = np.empty_like(eps)
    x[:, 0] = eps[:, 0] / np.sqrt(1 - phi**2)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + eps[:, t]
    return x + offsets[:, None]


@pytest.mark.parametrize(("phi", "offsets"), [(0.0, [0.0, 0.0, 0.0, 0.0]),
                                              (0.7, [0.0, 0.0, 0.0, 0.0]),
                                              (0.9, [0.0, 0.3, -0.2, 1.0])])
def test_diagnostics_agree_with_an_independent_numpy_computation(phi, offsets):
    rng = np.random.default_rng(int(10 * phi) + 1)
    draws = np.stack([_ar1_chains(rng, phi, np.asarray(offsets)),
                      np.exp(_ar1_chains(rng, phi, np.asarray(offsets)))], axis=2)
    diag = diagnostics(draws)
    for j in range(draws.shape[2]):
        rhat, bulk, tail = _np_diagnostics(draws[:, :, j])
        assert diag.rhat[j] == pytest.approx(rhat, abs=1e-6)
        # ArviZ, like Stan, adds one autocorrelation after Geyer's truncation; we do not
        assert diag.ess_bulk[j] == pytest.approx(bulk, rel=0.01)
        assert diag.ess_tail[j] == pytest.approx(tail, rel=0.01)
    flat = draws.reshape(-1, 2)
    np.testing.assert_allclose(diag.mean, flat.mean(axis=0))
    np.testing.assert_allclose(diag.sd, flat.std(axis=0, ddof=1))
    if phi == 0.0:  # independent draws: ESS near the number of draws
        assert np.all(np.abs(diag.ess_bulk / draws[..., 0].size - 1) < 0.1)


def test_accuracy_is_the_worst_standardised_error_and_sd_ratio():
    rng = np.random.default_rng(5)
    draws = rng.normal(size=(4, 500, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, -1.0]
    ref_mean, ref_sd = np.array([0.05, 1.0, -1.0]), np.array([1.0, 1.5, 0.5])
    got = accuracy(diagnostics(draws), ref_mean, ref_sd, ["a", "b", "c"])
    flat = draws.reshape(-1, 3)
    z = np.abs(flat.mean(axis=0) - ref_mean) / ref_sd
    ratio = flat.std(axis=0, ddof=1) / ref_sd
    assert got.mean_err == pytest.approx(z.max()) and got.worst_mean == "abc"[z.argmax()]
    assert got.sd_ratio == pytest.approx(ratio[1]) and got.worst_sd == "b"
    assert not got.sd_ok and got.rhat_ok and got.ess_ok


# ----------------------------------------------------------------------------- runner
def test_failing_model_is_recorded_not_raised():
    def broken():
        raise RuntimeError("boom")

    spec = dataclasses.replace(MODELS["funnel"], factory=broken)
    run = run_one(spec, "rw", load_reference("funnel"), 10, 10, 1, 0)
    assert not run.ok and "boom" in run.error


def test_smc_run_with_a_different_number_of_stages_per_chain(monkeypatch):
    """pm.sample_smc stores per-stage stats as an object array when its chains ran different
    numbers of stages; the runner reads them (it failed with "setting an array element with
    a sequence" on gp-poisson).  200 particles instead of 2000 to keep it short: at seed 1
    the chains run 5, 4, 4 and 4 stages."""
    sample_smc, seen = pm.sample_smc, {}

    def short_smc(**kwargs):
        idata = sample_smc(draws=200, **kwargs)
        seen["accept"] = idata.sample_stats["accept_rate"].values
        return idata

    monkeypatch.setattr(runner.pm, "sample_smc", short_smc)
    run = run_one(MODELS["gp-poisson"], "smc", load_reference("gp-poisson"), 1000, 1000, 4, 1)
    lengths = [np.size(row) for row in np.ravel(seen["accept"])]
    assert seen["accept"].dtype == object and len(set(lengths)) > 1, lengths  # ragged
    assert run.ok, run.error
    assert 0.0 < run.accept < 1.0 and run.evals > 4 * 200


def test_the_process_is_warmed_up_before_the_first_run_is_timed(monkeypatch):
    """The first compilation of a process is not charged to the first sampler: run_one
    warms up before the model is built (no clock is asserted: the order of the calls)."""
    calls = []
    monkeypatch.setattr(runner, "warm_up", lambda: calls.append("warm up"))

    def factory():
        calls.append("model")
        raise RuntimeError("stop here")

    spec = dataclasses.replace(MODELS["funnel"], factory=factory)
    run_one(spec, "rw", load_reference("funnel"), 10, 10, 1, 0)
    assert calls == ["warm up", "model"]
    monkeypatch.undo()
    runner.warm_up()  # the real one: idempotent, and it leaves the flag set
    assert runner._WARMED_UP
    runner.warm_up()


def test_json_keeps_the_models_finished_before_a_run_is_stopped(monkeypatch, tmp_path):
    """The ``--json`` file is written after each model: Ctrl-C in the second model keeps
    the first model's runs, marked unfinished (before, a stopped run lost them all)."""
    def fake_run_one(spec, sampler, ref, *args):
        if spec.name != "funnel":
            raise KeyboardInterrupt
        return run_one(dataclasses.replace(spec, factory=None), sampler, ref, 10, 10, 1, 0)

    monkeypatch.setattr(cli, "run_one", fake_run_one)
    out = tmp_path / "suite.json"
    with pytest.raises(KeyboardInterrupt):
        cli.main(["--models", "funnel,censored", "--steps", "rw", "--json", str(out)])
    saved = json.loads(out.read_text())
    assert [(r["model"], r["sampler"]) for r in saved["runs"]] == [("funnel", "rw")]
    assert saved["meta"]["finished"] is False and list(saved["models"]) == ["funnel"]


def test_runs_on_cheap_models_have_a_time_limit_by_default():
    assert cli.run_timeout(MODELS["timeseries"], None) == cli.CHEAP_TIMEOUT
    assert cli.run_timeout(MODELS["lotka-volterra"], None) is None  # expensive: none
    assert cli.run_timeout(MODELS["timeseries"], 30.0) == 30.0  # --timeout wins


def test_default_steps_are_ours_with_defaults_and_pymcs():
    assert DEFAULT_SAMPLERS == ("kamh", "fkamh", "khmc", "rw", "metropolis", "demz", "slice",
                                "nuts", "smc")


def test_gp_glass_is_skipped_cleanly_without_its_data(tmp_path, capsys):
    set_glass_path(tmp_path / "glass.data")  # does not exist
    try:
        assert not MODELS["gp-glass"].available()
        assert cli.main(["--models", "gp-glass", "--steps", "rw", "--quick"]) == []
        assert "### gp-glass: skipped (data not available)" in capsys.readouterr().out
    finally:
        set_glass_path(None)


def test_quick_cli_on_two_cheap_models(tmp_path, capsys):
    samplers = ["rw", "kamh", "metropolis", "slice", "nuts"]
    json_path, md_path = tmp_path / "run.json", tmp_path / "run.md"
    results = cli.main(["--models", "banana-moderate,poisson", "--steps", ",".join(samplers),
                        "--quick", "--json", str(json_path), "--markdown", str(md_path)])
    out = capsys.readouterr().out
    assert "### poisson" in out and "### banana-moderate" in out and "## Summary" in out
    assert len(results) == 2 * len(samplers)
    errors = [(r.model, r.sampler, r.error) for r in results if not r.ok]
    assert not errors
    for r in results:
        assert r.evals > 0 and r.wall > 0 and r.accuracy["min_ess_bulk"] > 0
        assert np.shape(r.tail_quantiles) == (2, MODELS[r.model].dim)
        assert np.shape(r.quantiles) == (2, MODELS[r.model].dim)
        assert np.all(np.asarray(r.quantiles[0]) >= np.asarray(r.tail_quantiles[0]))
    runs = {(r.model, r.sampler): r for r in results}
    # d = 5 MH iterations per draw, plus the start and the Laplace start from 5 points in
    # the first draw of each chain; the counting potential agrees with the n_evals stat
    rw = runs["poisson", "rw"]
    assert 5.0 < rw.evals_per_iteration < 7.0
    metropolis = runs["banana-moderate", "metropolis"].evals_per_iteration  # 2 per update
    assert metropolis >= 2 and metropolis == pytest.approx(round(metropolis / 2) * 2, abs=0.01)
    data = json.loads(json_path.read_text())
    assert data["meta"]["chains"] == cli.QUICK[2] and len(data["runs"]) == len(results)
    assert "### poisson" in md_path.read_text()

    # --reuse: run only ours again, PyMC's runs come from the file; other budgets are ignored
    again = cli.main(["--models", "poisson", "--steps", "rw", "--quick",
                      "--reuse", str(json_path)])
    out = capsys.readouterr().out
    assert sorted(r.sampler for r in again) == ["kamh", "metropolis", "nuts", "rw", "slice"]
    reused = {r.sampler: r for r in again}["metropolis"]
    assert reused.to_dict() == runs["poisson", "metropolis"].to_dict()
    assert "reused from `run.json`" in out and "| pm.Metropolis" in out
    other_seed = cli.main(["--models", "poisson", "--steps", "rw", "--quick", "--seed", "7",
                           "--reuse", str(json_path)])
    assert [r.sampler for r in other_seed] == ["rw"]


def test_nuts_twin_samples_the_differentiable_model_and_keeps_the_suite_format(
        monkeypatch, tmp_path, capsys):
    """``benchmarks.suite.twin`` runs NUTS on pk's RK4-with-sensitivities twin (same free
    variables, so the pk reference judges it) and writes JSON the comparison tools read."""
    from benchmarks.suite import compare, twin

    spec = twin.twin_spec("pk")
    assert spec.factory is MODELS["pk"].reference_factory and spec.has_gradient
    assert free_var_labels(spec.factory())[1] == load_reference("pk").labels
    for name in ("poisson", "lotka-volterra"):  # a gradient; no twin
        with pytest.raises(ValueError, match="twin"):
            twin.twin_spec(name)

    seen = {}

    def fake_run_one(spec, sampler, ref, *args):
        seen.update(factory=spec.factory, sampler=sampler, args=args)
        return run_one(dataclasses.replace(spec, factory=None), sampler, ref, 10, 10, 1, 0)

    monkeypatch.setattr(twin, "run_one", fake_run_one)
    out = tmp_path / "twin.json"
    twin.main(["--model", "pk", "--seed", "3", "--json", str(out)])
    assert seen["factory"] is MODELS["pk"].reference_factory and seen["sampler"] == "nuts"
    assert seen["args"] == (1000, 1000, 4, 3, None)  # pm.sample's defaults, the seed
    assert "### pk" in capsys.readouterr().out
    assert list(compare.load([str(out)])) == [("pk", "nuts", 0)]
    saved = json.loads(out.read_text())
    assert saved["meta"]["command"] == ("python -m benchmarks.suite.twin --model pk --seed 3 "
                                        f"--json {out}")
    assert saved["meta"]["finished"] and saved["meta"]["cpus"] >= 1
    assert saved["models"]["pk"]["has_gradient"] is False  # the black box's own entry
