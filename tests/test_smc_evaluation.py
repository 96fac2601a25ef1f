"""KameleonSMC for expensive models: batch evaluation on executors, counted evaluations, an
evaluation budget, waste-free stages, and starts that fail loudly instead of silently.

The evaluator is checked against a plain loop; parallel runs against the in-process run draw
for draw; the evaluation counts against a counter inside the model's Op; waste-free SMC against
a conjugate posterior (groups of chains, with a broken kernel that must fail).
"""

from __future__ import annotations

import logging
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.compile.ops import as_op

from pymc_kameleon import KameleonSMC, pseudo_marginal_potential
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.compat import smc_stat_per_chain as per_chain
from pymc_kameleon.parallel import BatchEvaluator
from pymc_kameleon.smc import MixtureMove

logging.getLogger("pymc").setLevel(logging.ERROR)

Y_OBS = np.array([1.5, 2.0, 0.7])
CALLS: list[int] = []  # appends are atomic: safe from worker threads


@as_op(itypes=[pt.dvector], otypes=[pt.dscalar])
def counted_lik(x):
    """log N(Y_OBS | x0 + x1^2 / 2, 1), counting its calls (module level: picklable)."""
    CALLS.append(1)
    mu = x[0] + 0.5 * x[1] ** 2
    return np.asarray(-0.5 * np.sum((Y_OBS - mu) ** 2))


@pytest.fixture(scope="module")
def curved():
    with pm.Model() as model:
        x = pm.Normal("x", 0, 3, shape=2)
        pm.Potential("lik", counted_lik(x))
    return model


def _smc(model, *, draws=200, chains=1, seed=1, kernel=KameleonSMC, **kwargs):
    with model:
        return pm.sample_smc(draws, kernel=kernel, chains=chains, cores=1, progressbar=False,
                             random_seed=seed, compute_convergence_checks=False, **kwargs)


def _stat(idata, name):
    """A per-stage stat of a one-chain run as a 1-d array."""
    return np.asarray(group_dataset(idata, "sample_stats")[name].values, dtype=float).ravel()


# ------------------------------------------------------------------ the evaluator
def _square(x):
    return float(np.sum(np.asarray(x) ** 2))


def _first(x):
    return float(np.asarray(x)[0])


def test_evaluator_matches_a_loop_on_threads_and_processes():
    X = np.random.default_rng(0).normal(size=(23, 3))
    expected = np.array([[_square(x), _first(x)] for x in X])
    np.testing.assert_array_equal(BatchEvaluator([_square, _first])(X), expected)
    with ThreadPoolExecutor(3) as ex:
        np.testing.assert_array_equal(BatchEvaluator([_square, _first], ex)(X), expected)
        # a second batch reuses the functions the workers hold
        np.testing.assert_array_equal(BatchEvaluator([_square, _first], ex)(X[:5]),
                                      expected[:5])
    with ProcessPoolExecutor(2) as ex:
        np.testing.assert_array_equal(BatchEvaluator([_square, _first], ex)(X), expected)


def test_evaluator_refuses_what_is_not_an_executor():
    with pytest.raises(TypeError, match="concurrent.futures.Executor"):
        BatchEvaluator([_square], executor=4)


def _noisy_model(noise_sd: float) -> pm.Model:
    """The curved model's likelihood estimated with log-normal noise, E[exp(noise)] = 1."""

    def estimator(x, rng):
        mu = x[0] + 0.5 * x[1] ** 2
        noise = rng.normal(-noise_sd**2 / 2, noise_sd)
        return float(-0.5 * np.sum((Y_OBS - mu) ** 2) + noise)

    with pm.Model() as model:
        x = pm.Normal("x", 0, 3, shape=2)
        pseudo_marginal_potential("lik", estimator, x)
    return model


@pytest.fixture(scope="module")
def estimator_model():
    return _noisy_model(0.4)


def test_estimates_depend_on_the_point_seed_only(estimator_model):
    """Each point's estimators are seeded from its own seed: the same values in any chunking,
    on any worker; other seeds give other estimates."""
    with estimator_model:
        kernel = KameleonSMC(draws=10, model=estimator_model, random_seed=1)
    ev = BatchEvaluator([kernel.likelihood_logp_func])
    assert ev.has_estimators
    X = np.random.default_rng(1).normal(size=(12, 2))
    seeds = np.arange(12) + 100
    a = ev(X, seeds)
    np.testing.assert_array_equal(ev(X[::-1], seeds[::-1])[::-1], a)
    assert not np.array_equal(ev(X, seeds + 1), a)


# ------------------------------------------------------------------ through pm.sample_smc
@pytest.fixture(scope="module")
def serial(curved):
    CALLS.clear()
    idata = _smc(curved, seed=3)
    return idata, len(CALLS)


def test_evaluations_are_counted_per_stage(serial):
    """The ``n_evals`` stat sums to the calls of the model's Op (prior draws included),
    and is the particles times the MH steps of each stage."""
    idata, calls = serial
    n_evals, n_steps = _stat(idata, "n_evals"), _stat(idata, "n_steps")
    assert n_evals.sum() == calls
    np.testing.assert_array_equal(n_evals, 200 * (n_steps + np.eye(len(n_steps))[0]))
    assert group_dataset(idata, "sample_stats").attrs["executor"] == "none"


def test_threads_give_the_same_draws(curved, serial):
    with ThreadPoolExecutor(4) as ex:
        par = _smc(curved, seed=3, executor=ex)
    for a, b in ((group_dataset(serial[0], "posterior")["x"], group_dataset(par, "posterior")["x"]),
                 (_stat(serial[0], "log_marginal_likelihood"),
                  _stat(par, "log_marginal_likelihood"))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_processes_give_the_same_draws_with_an_estimator(estimator_model):
    """Likelihood estimates are seeded per point in the main process: a process pool
    reproduces the in-process run exactly, pseudo-marginal values included."""
    a = _smc(estimator_model, draws=100, seed=4)
    with ProcessPoolExecutor(2) as ex:
        b = _smc(estimator_model, draws=100, seed=4, executor=ex)
    np.testing.assert_array_equal(group_dataset(a, "posterior")["x"].values,
                                  group_dataset(b, "posterior")["x"].values)


def test_an_executor_with_chain_processes_is_refused(curved):
    with ThreadPoolExecutor(2) as ex, pytest.raises(TypeError, match="pass cores=1"):
        with curved:
            pm.sample_smc(50, kernel=KameleonSMC, chains=2, cores=2, progressbar=False,
                          random_seed=1, executor=ex, compute_convergence_checks=False)


def test_budget_stops_tempering_says_so_and_is_kept(curved):
    with pytest.warns(RuntimeWarning, match="budget max_evals=500 is spent"):
        idata = _smc(curved, seed=3, max_evals=500)
    assert _stat(idata, "n_evals").sum() <= 500
    assert _stat(idata, "beta")[-1] == 1.0
    assert np.isfinite(_stat(idata, "log_marginal_likelihood")[-1])
    with pytest.raises(ValueError, match="max_evals=300 cannot pay"):
        _smc(curved, seed=3, max_evals=300)


# ------------------------------------------------------------------ waste-free SMC
def test_waste_free_spends_one_evaluation_per_new_state(curved):
    CALLS.clear()
    idata = _smc(curved, seed=2, waste_free=4)
    n_evals, n_steps = _stat(idata, "n_evals"), _stat(idata, "n_steps")
    assert n_evals.sum() == len(CALLS)
    # M = 50 chains of P = 4 states: 3 steps of 50 proposals per stage
    assert np.all(n_steps == 3)
    np.testing.assert_array_equal(n_evals[1:], 150)
    assert n_evals[0] == 200 + 150
    assert group_dataset(idata, "sample_stats").attrs["waste_free"] == 4


class _DroppedReverseDensity(MixtureMove):
    """Deliberately broken: MH ratio without the proposal densities (as if symmetric)."""

    @staticmethod
    def log_ratio(prop_logp, cur_logp, *args):
        r = prop_logp - cur_logp
        return np.where(np.isnan(r), -np.inf, r)


@pytest.fixture(scope="module")
def conjugate():
    """x ~ N(0, 3^2), 8 observations N(x, 1) with mean 1.6: posterior N(1.5790, 0.3482^2)."""
    with pm.Model() as model:
        x = pm.Normal("x", 0, 3)
        pm.Normal("y", x, 1, observed=np.linspace(0.2, 3.0, 8))
    return model


POST_MEAN, POST_SD = 1.6 * 8 / (8 + 1 / 9), (8 + 1 / 9) ** -0.5


@pytest.mark.parametrize("kernel", [KameleonSMC, _DroppedReverseDensity])
def test_waste_free_conjugate_groups(conjugate, kernel):
    """Twelve waste-free chains of 400 particles in four groups of three; three groups must
    have the pooled sd within 8 % of the posterior's and the mean within 0.15 sd (calibration
    in docs/benchmarks/test_calibration.md).  Without the reverse density the independent
    moves shrink the spread: it must fail."""
    move = None if kernel is KameleonSMC else kernel()
    idata = _smc(conjugate, draws=400, chains=12, seed=7, waste_free=True,
                 independent_weight=0.5, move=move)
    x = group_dataset(idata, "posterior")["x"].values
    ok = [abs(x[g].std() / POST_SD - 1) < 0.08 and abs(x[g].mean() - POST_MEAN) < 0.15 * POST_SD
          for g in (slice(i, i + 3) for i in range(0, 12, 3))]
    assert (sum(ok) >= 3) == (kernel is KameleonSMC), ok


# ------------------------------------------------------------------ starts that fail loudly
def _mixture_model(ordered_prior):
    data = np.concatenate([np.full(20, -2.0), np.full(20, 3.0)]) + np.tile([-0.3, 0.3], 20)
    with pm.Model() as model:
        mu = ordered_prior()
        pm.NormalMixture("y", w=[0.5, 0.5], mu=mu, sigma=1.0, observed=data)
    return model


def test_iid_ordered_prior_draws_are_sorted_and_sampled():
    """PyMC's prior draws of an ordered variable are not ordered (NaN after the transform):
    an iid prior's draws are sorted, which is exact, and the run finds both components."""
    model = _mixture_model(lambda: pm.Normal(
        "mu", 0, 5, shape=2, transform=pm.distributions.transforms.ordered,
        initval=[-1.0, 1.0]))
    idata = _smc(model, draws=300, seed=5)
    mu = group_dataset(idata, "posterior")["mu"].values.reshape(-1, 2)
    assert np.all(mu[:, 0] < mu[:, 1])
    np.testing.assert_allclose(mu.mean(0), [-2.0, 3.0], atol=0.3)
    assert np.all(mu.std(0) > 0.1)


def test_ordered_prior_that_cannot_be_sorted_is_refused_naming_it():
    model = _mixture_model(lambda: pm.Normal(
        "mu", [2.0, -2.0], 1.0, shape=2, transform=pm.distributions.transforms.ordered,
        initval=[-1.0, 1.0]))
    with pytest.raises(ValueError, match=r"'mu_ordered__' \(transform ordered: .* not finite"):
        _smc(model, draws=200, seed=5)


# ------------------------------------------------------------------ recycling
def test_mixture_log_weights_match_a_direct_computation():
    from scipy import stats as st

    from pymc_kameleon.math.importance import kish_ess, mixture_log_weights

    rng = np.random.default_rng(3)
    g1 = st.multivariate_normal([0, 0], np.eye(2))
    g2 = st.multivariate_normal([1, -1], 4 * np.eye(2))
    Y = np.vstack([g1.rvs(30, random_state=rng), g2.rvs(10, random_state=rng)])
    target = st.multivariate_normal([0.5, 0], [[1, 0.3], [0.3, 2]])
    got = mixture_log_weights(target.logpdf(Y) + 2.0, [g1.logpdf(Y), g2.logpdf(Y)], [30, 10])
    expected = target.logpdf(Y) + 2.0 - np.log(0.75 * g1.pdf(Y) + 0.25 * g2.pdf(Y))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    w = np.exp(expected)
    assert kish_ess(got) == pytest.approx(w.sum() ** 2 / (w**2).sum())


def _log_evidence_conjugate() -> float:
    from scipy import stats as st

    y = np.linspace(0.2, 3.0, 8)
    return float(st.multivariate_normal(np.zeros(8), np.eye(8) + 9.0).logpdf(y))


def _target_only(log_target, log_proposals, counts):
    """Deliberately broken weights: the target alone, as if every proposal were flat."""
    return np.asarray(log_target, dtype=float)


@pytest.mark.parametrize("broken", [False, True])
def test_recycled_draws_and_evidence_on_a_conjugate_model(conjugate, monkeypatch, broken):
    """Eight recycled chains (400 particles, 3000 recycled draws each) in four groups of two;
    three groups must have the pooled sd within 6 %, the mean within 0.1 sd and the mean
    recycled log evidence within 0.05 nats of the exact one (calibration in
    docs/benchmarks/test_calibration.md).  Weights without the proposals' density must fail."""
    if broken:
        monkeypatch.setattr("pymc_kameleon.particles.recycling.mixture_log_weights", _target_only)
    idata = _smc(conjugate, draws=400, chains=8, seed=9, recycle=3000)
    x = group_dataset(idata, "posterior")["x"].values
    assert x.shape == (8, 3000)
    stats_ = group_dataset(idata, "sample_stats")
    stages = stats_.attrs.get("chain_stages")  # where the chains' stage counts differ
    lev = np.array([c[-1] for c in per_chain(stats_["log_evidence_recycled"].values, 8, stages)])
    ess = np.array([c[-1] for c in per_chain(stats_["recycled_ess"].values, 8, stages)])
    assert np.all(ess > 300)
    exact = _log_evidence_conjugate()
    ok = [abs(x[g].std() / POST_SD - 1) < 0.06 and abs(x[g].mean() - POST_MEAN) < 0.1 * POST_SD
          and abs(lev[g].mean() - exact) < 0.05 for g in (slice(i, i + 2) for i in range(0, 8, 2))]
    assert (sum(ok) >= 3) != broken, (ok, lev, exact)


def test_recycling_costs_exactly_recycle_more_evaluations(curved):
    """``recycle=R`` leaves the stages as they are and adds exactly ``R`` evaluations (the
    rounds), within a budget: the cost a user plans with."""
    plain, recycled = _smc(curved, seed=5), _smc(curved, seed=5, recycle=700)
    np.testing.assert_array_equal(_stat(plain, "beta"), _stat(recycled, "beta"))
    assert _stat(recycled, "n_evals").sum() == _stat(plain, "n_evals").sum() + 700
    assert group_dataset(recycled, "posterior")["x"].shape[1] == 700
    budget = int(_stat(plain, "n_evals").sum()) + 300
    capped = _smc(curved, seed=5, recycle=700, max_evals=budget)
    assert _stat(capped, "n_evals").sum() == budget


def test_progress_bar_shows_the_chain_evaluations(curved):
    """PyMC's progress-bar hooks: each chain's live cell reads "-" before the chain runs
    here, then its evaluations; PyMC's update at each stage sets beta only."""
    with curved:
        kernel = KameleonSMC(draws=50, model=curved, random_seed=1)
    columns, stats = kernel.progress_config(2)
    (update,) = kernel.progress_update_functions()
    cells = stats["chain"]
    assert [str(c) for c in cells] == ["-", "-"] and len(columns) == 3
    assert update({"beta": 0.0}) == {"beta": 0.0}
    kernel.initialize(None, np.random.default_rng(1))
    assert [str(c) for c in cells] == ["50", "-"] and cells[0].phase == "stages"


def test_vectorised_log_density_matches_the_loop_and_skips_black_boxes(curved):
    """A pure PyTensor model gets one compiled call per batch, equal to the per-point values;
    a model with an as_op Op (a black box) keeps one call per point."""
    from pymc_kameleon.smc import vectorised_logp

    with pm.Model() as pure:
        x = pm.Normal("x", 0, 3, shape=2)
        pm.Normal("y", x[0] + 0.5 * x[1] ** 2, 1, observed=Y_OBS)
        kernel = KameleonSMC(draws=20, model=pure, random_seed=1)
    batched = vectorised_logp(pure, pure.value_vars)
    X = np.random.default_rng(2).normal(size=(20, 2))
    loop = np.array([[kernel.prior_logp_func(x), kernel.likelihood_logp_func(x)] for x in X])
    np.testing.assert_allclose(batched(X), loop, rtol=1e-12)
    assert vectorised_logp(curved, curved.value_vars) is None
    a = _smc(pure, seed=6, vectorize=True)
    b = _smc(pure, seed=6)
    np.testing.assert_allclose(group_dataset(a, "posterior")["x"].values,
                               group_dataset(b, "posterior")["x"].values, rtol=1e-9)


# ------------------------------------------------------------------ particles that lag behind
def _warned_drift(model, seed: int, **kwargs) -> tuple[bool, float]:
    import warnings

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        idata = _smc(model, draws=300, seed=seed, **kwargs)
    drift = float(np.asarray(group_dataset(idata, "sample_stats")["drift"].values,
                             dtype=float).ravel()[-1])
    return any("still moving toward the posterior" in str(w.message) for w in record), drift


@pytest.fixture(scope="module")
def collinear():
    from pymc_kameleon.models.hard import collinear_regression_model

    return collinear_regression_model()


def test_particles_still_moving_at_the_end_are_reported(collinear):
    """A 26-d regression with collinear predictors (posterior correlations near 1): the MH
    steps the stopping rules allow leave the particles lagging behind the posterior, and the
    last stage says so; on 8 schools (the particles keep up) it stays silent.  Three seeds
    each; at most one may disagree."""
    from pymc_kameleon.models.classic import eight_schools_noncentred

    lagging = [_warned_drift(collinear, seed) for seed in (1, 2, 3)]
    assert sum(w for w, _ in lagging) >= 2, lagging
    schools = eight_schools_noncentred()
    keeping_up = [_warned_drift(schools, seed) for seed in (1, 2, 3)]
    assert sum(w for w, _ in keeping_up) <= 1, keeping_up


class RecordedLevels:
    """A callback recording per stage its steps, the particles' mean tempered log density
    before the first step and after each, and the standard error of a difference of two
    such means after the last."""

    def __init__(self):
        self.stages = []

    def __call__(self, record):
        if record.n_steps == 1:
            self.stages.append(None)
        se = float(np.sqrt(2 / len(record.logp)) * np.std(record.logp))
        self.stages[-1] = (record.n_steps, list(record.levels), se)


def _stages(curved, seed, **kwargs):
    recorded = RecordedLevels()
    with curved:
        k = KameleonSMC(draws=200, model=curved, random_seed=2, refresh_fraction=0.0,
                        callback=recorded, **kwargs)
    k.initialize(None, np.random.default_rng(seed))
    while k.beta < 1:
        k.update_beta_and_weights()
        k.resample()
        k.tune()
        k.mutate()
    return recorded.stages


@pytest.mark.parametrize("stationarity", [1.0, None])
def test_stage_ends_only_when_the_mean_log_density_has_levelled(curved, stationarity):
    """The stationarity rule: a stage ends (before ``max_steps``) only once its particles'
    mean log density rose over the last (up to) three steps by at most one standard error of
    such a difference; and not before ``min_steps``.  Without the rule some stage of three
    runs ends while still rising (the test of the test)."""
    levelled = []
    for seed in (6, 7, 8):
        for n_steps, levels, se in _stages(curved, seed, stationarity=stationarity,
                                           min_steps=2):
            assert n_steps >= 2 and len(levels) == n_steps + 1
            rise = levels[-1] - levels[max(0, len(levels) - 4)]
            levelled.append(rise <= se)
    assert all(levelled) == (stationarity is not None), levelled


@pytest.mark.parametrize("pass_client", [False, True])
def test_dask_client_executor_gives_the_same_draws(curved, serial, pass_client):
    """A Dask cluster as the evaluator's engine: its ``Client.get_executor()``, or the client
    itself, which also gives each worker its own PyTensor compiledir (the plugin of
    ``distributed.sample``)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        par = _smc(curved, seed=3, executor=client if pass_client else client.get_executor())
        plugins = client.run(lambda dask_worker: any("compiledir" in name
                                                     for name in dask_worker.plugins))
    np.testing.assert_array_equal(group_dataset(serial[0], "posterior")["x"].values,
                                  group_dataset(par, "posterior")["x"].values)
    assert all(plugins.values()) == pass_client


def test_noisy_estimator_does_not_make_stages_run_away():
    """With log-noise sd 2, stored estimates favour upward noise, so the particles' mean log
    density may creep up; the stationarity rule must still end every stage well before
    ``max_steps`` (a rule that never sees a level, the broken variant, runs to it)."""

    model = _noisy_model(2.0)
    for stationarity, bounded in ((1.0, True), (-1e9, False)):
        idata = _smc(model, draws=300, seed=2, max_steps=60, stationarity=stationarity)
        n_steps = _stat(idata, "n_steps")
        assert (n_steps.max() <= 20) == bounded, n_steps


@pytest.fixture(scope="module")
def cheap():
    """Pure PyTensor (no Op of this module): its chains run in PyMC's worker processes."""
    with pm.Model() as model:
        pm.Normal("y", pm.Normal("mu", 0, 3), 1, observed=Y_OBS)
    return model


@pytest.mark.parametrize("cores", [1, 2])
def test_attrs_hold_the_evaluations_of_every_chain(cheap, cores):
    """``n_evals_total`` in ``sample_stats.attrs`` is the sum of every chain's per-stage
    evaluations, whether the chains run here one after another or in worker processes."""
    with cheap:
        idata = pm.sample_smc(100, kernel=KameleonSMC, chains=3, cores=cores,
                              progressbar=False, random_seed=2,
                              compute_convergence_checks=False)
    stats = group_dataset(idata, "sample_stats")
    each = [c.sum() for c in per_chain(stats["n_evals"].values, 3,
                                       stats.attrs.get("chain_stages"))]
    assert len(each) == 3 and min(each) > 0
    assert stats.attrs["n_evals_chains"] == 3
    assert stats.attrs["n_evals_total"] == sum(each)


def test_likelihood_estimators_compile_without_the_inexact_sampler_warning():
    """KameleonSMC keeps every particle's estimate, so compiling (and PyMC's per-chain
    copies of) the log density for it raises no PseudoMarginalWarning."""
    import warnings

    from pymc_kameleon import PseudoMarginalWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", PseudoMarginalWarning)
        _smc(_noisy_model(0.5), draws=100, chains=2)


def _arviz_ess_over_worth(adjacent: bool, seed: int, along: bool = False) -> float:
    """ArviZ's bulk ESS of 1000 draws resampled from 2000 weighted iid N(0, 1) points,
    over what they are worth (Kish's ESS of the weights, at most the draws); ``along``:
    resampled along the points' Hilbert curve, as the returned draws are."""
    import arviz as az

    from pymc_kameleon.math.importance import kish_ess, resample_indices

    rng = np.random.default_rng(seed)
    x, log_w = rng.normal(size=2000), rng.normal(scale=1.2, size=2000)
    points = x[:, None] if along else None
    y = x[resample_indices(log_w, 1000, rng, adjacent=adjacent, points=points)]
    return float(az.ess(y[None, :], method="bulk")) / min(kish_ess(log_w), 1000)


@pytest.mark.parametrize("along", [False, True])
def test_returned_draws_show_arviz_what_they_are_worth(along):
    """Copies of a point next to each other: ArviZ's ESS within 1.5x of the weighted
    sample's worth in at least 5 of 7 groups (about 0.95 each); shuffled copies, the
    broken variant, count every copy (ratio about 1.9) and fail."""
    ratios = [_arviz_ess_over_worth(True, seed, along) for seed in range(7)]
    assert sum(1 / 1.5 <= r <= 1.5 for r in ratios) >= 5, ratios
    broken = [_arviz_ess_over_worth(False, seed, along) for seed in range(7)]
    assert sum(1 / 1.5 <= r <= 1.5 for r in broken) < 5, broken


@pytest.mark.parametrize(("target", "rounds"), [(100.0, 0), (1e9, 5), (600.0, None)])
def test_recycling_tops_up_only_until_the_pool_is_worth_the_target(target, rounds):
    """With ``target_ess`` the rounds (``draws`` points each, within ``extra``) stop once
    the pool's Kish ESS reaches the target: none where it already does, every round the
    budget pays for where it never does, and otherwise fewer."""
    from scipy import stats as st

    from pymc_kameleon.particles.proposal import StageProposal
    from pymc_kameleon.particles.recycling import RecycledPool, recycle
    from pymc_kameleon.smc import SMCOptions

    rng, count = np.random.default_rng(0), [0]

    def evaluate(X):
        count[0] += len(X)
        return st.norm.logpdf(X).sum(axis=1), np.zeros(len(X))

    proposal = StageProposal.fit(rng.standard_normal((400, 2)), 0.0, rng, SMCOptions())
    pool = RecycledPool()
    pool.new_stage(proposal.whitening, proposal.mixture)
    Y = proposal.whitening.rows_to_x(proposal.mixture.sample(300, rng))
    pool.add(Y, *evaluate(Y))
    out = recycle(pool, proposal, 1000, 200, 200, evaluate, rng, lambda x: x, SMCOptions(),
                  target_ess=target)
    added = count[0] - 300
    assert out.X.shape == (200, 2) and added % 200 == 0
    if rounds is not None:
        assert added == 200 * rounds
    else:
        assert 0 < added < 1000
    assert (out.ess >= target) == (target < 1e9)


@pytest.mark.parametrize("extra", [0, 400])
def test_recycling_an_empty_pool_tops_it_up_or_returns_nothing(extra):
    """A budget spent before any stage leaves the pool empty: with evaluations left the
    top-up rounds fill it (a fallback's target included), without any ``recycle`` returns
    None with a warning (the particles stay), where it raised ``ValueError``."""
    from scipy import stats as st

    from pymc_kameleon.particles.proposal import StageProposal
    from pymc_kameleon.particles.recycling import RecycledPool, recycle
    from pymc_kameleon.smc import SMCOptions

    rng = np.random.default_rng(1)

    def evaluate(X):
        return st.norm.logpdf(X).sum(axis=1), np.zeros(len(X))

    proposal = StageProposal.fit(rng.standard_normal((400, 2)), 0.0, rng, SMCOptions())
    pool = RecycledPool()
    if extra:
        out = recycle(pool, proposal, extra, 200, 200, evaluate, rng, lambda x: x,
                      SMCOptions(), target_ess=400.0)
        assert pool.size == extra and out.X.shape == (200, 2)
    else:
        with pytest.warns(RuntimeWarning, match="no evaluation is left to recycle"):
            out = recycle(pool, proposal, extra, 200, 200, evaluate, rng, lambda x: x,
                          SMCOptions(), target_ess=400.0)
        assert out is None
