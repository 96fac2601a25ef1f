"""``emulator=True`` on the steps: the independence move's ratio, exactness (group design),
nothing adapting after tuning, the fallback, a likelihood estimator, the evaluation bill."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pymc as pm
import pytest
from checks import (
    GAUSS_COV,
    NOISY_POST_MEAN,
    NOISY_POST_SD,
    gaussian_groups_passing,
    mean_error_in_mcse,
    moment_zscores,
    noisy_model,
)
from scipy import stats

import pymc_kameleon as pk
from pymc_kameleon import EmulatorMoves, EmulatorSettings  # the package's own exports
from pymc_kameleon.adaptation.independence import (
    IndependenceProposal,
    independence_step,
    moves_pay,
    pair_acceptance,
    stage1_pass_rate,
    steps_for_acceptance,
    steps_for_screen,
    trial_acceptance,
)
from pymc_kameleon.adaptation.kernel import ChainState
from pymc_kameleon.adaptation.screen import DelayedMetropolis
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.emulator.surrogate import LogDensityEmulator
from pymc_kameleon.models.counting import add_counter
from pymc_kameleon.steps.emulated import run_warnings

TUNE, DRAWS = 200, 400
# the fast tests fit the emulator's posterior with fewer draws (its tempering is most of a
# chain's time); the slow ones run the defaults.  The cheap run screens its moves (delayed
# acceptance), so that its bill checks the screen's
CHEAP = EmulatorMoves(EmulatorSettings(search_starts=4, search_keep=1), posterior_draws=300,
                      delayed=True)
STEPS = [pk.KameleonStep, pk.FastKameleonStep, pk.KernelHMCStep, pk.RandomWalkStep]


def _gauss_model() -> pm.Model:
    with pm.Model() as model:
        pm.MvNormal("x", np.zeros(2), GAUSS_COV)
    return model


def _sample(model, step_factory, *, chains=2, tune=TUNE, draws=DRAWS, seed=1, **kwargs):
    with model:
        step = step_factory()
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=1, step=step,
                          random_seed=seed, progressbar=False,
                          compute_convergence_checks=False, **kwargs)
    return idata, step


# ------------------------------------------------------------------ (a) the ratio
class _Recorder:
    """A Metropolis of the protocol on an explicit log density, recording its decisions."""

    def __init__(self, logp, rng):
        self.logp, self.rng, self.log_accepts = logp, rng, []

    def evaluate(self, position):
        return ChainState(position, self.logp(position)), position

    def decide(self, state, new, x_new, log_accept):
        self.log_accepts.append(log_accept)
        return state, float(np.exp(min(log_accept, 0.0))), False


def _g_by_scipy(g: IndependenceProposal, x: np.ndarray) -> float:
    """``g``'s density at ``x`` from its parts in model coordinates, with SciPy."""
    m, L = g.whitening.mean, g.whitening.chol
    mix, t = g.mixture.mixture, g.mixture.t
    terms = [w * stats.multivariate_normal(m + L @ mu, L @ C @ C.T @ L.T).pdf(x)
             for w, mu, C in zip(mix.weights, mix.means, mix.chols, strict=True)]
    heavy = stats.multivariate_t(m + L @ t.mean, L @ t.chol @ t.chol.T @ L.T, df=t.df).pdf(x)
    return float(np.log((1 - g.mixture.weight) * sum(terms) + g.mixture.weight * heavy))


def test_independence_ratio_matches_an_independent_computation():
    rng = np.random.default_rng(3)
    X = np.vstack([rng.multivariate_normal([0, 0], GAUSS_COV, 300),
                   rng.multivariate_normal([6, -2], 0.3 * np.eye(2), 200)])
    g = IndependenceProposal.fit(X, rng, EmulatorSettings())
    target = stats.multivariate_normal(np.zeros(2), GAUSS_COV)
    mh = _Recorder(target.logpdf, None)
    starts = np.vstack([rng.multivariate_normal([0, 0], GAUSS_COV, 15), [[6.0, -2.0]]])
    log_weights = []
    for i, x in enumerate(starts):
        mh.rng = np.random.default_rng(i)
        y = g.sample(np.random.default_rng(i))  # the move's own draw
        independence_step(mh, ChainState(x, target.logpdf(x)), x, g, lambda v: v,
                          log_weights)
        expected = (target.logpdf(y) - target.logpdf(x) + _g_by_scipy(g, x)
                    - _g_by_scipy(g, y))
        assert mh.log_accepts[-1] == pytest.approx(expected, rel=1e-9, abs=1e-9)
        # the proposal's importance weight p / g, for the tails' k-hat
        want = target.logpdf(y) - _g_by_scipy(g, y)
        assert log_weights[-1] == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert len(log_weights) == len(starts)


def test_screened_independence_ratios_match_an_independent_computation():
    """With the emulator's screen, stage 1 passes ``y`` iff ``log u < s(y) - s(x) + log
    g(x) - log g(y)`` (no evaluation otherwise) and stage 2 accepts with ``log p(y) -
    log p(x) - (s(y) - s(x))``, every ``g`` density from SciPy; the screen's own
    acceptance of ``g`` (:func:`stage1_pass_rate`) is the mean of ``min(1, r1)``."""
    rng = np.random.default_rng(5)
    X = rng.multivariate_normal([0, 0], GAUSS_COV, 400)
    g = IndependenceProposal.fit(X, rng, EmulatorSettings())
    target = stats.multivariate_normal(np.zeros(2), GAUSS_COV)
    s_model = stats.multivariate_normal([0.4, -0.3], 1.5 * GAUSS_COV)  # a wrong emulator
    mh = _Recorder(target.logpdf, None)
    mh.to_x = lambda u: u
    passed, log_weights = 0, []
    for i, x in enumerate(rng.multivariate_normal([0, 0], GAUSS_COV, 40)):
        mh.rng = np.random.default_rng(i)
        screen = DelayedMetropolis(mh, s_model.logpdf)
        replay = np.random.default_rng(i)
        y, u = g.sample(replay), replay.random()
        before = len(mh.log_accepts)
        it, _ = independence_step(mh, ChainState(x, target.logpdf(x)), x, g, lambda v: v,
                                  log_weights, screen)
        r1 = s_model.logpdf(y) - s_model.logpdf(x) + _g_by_scipy(g, x) - _g_by_scipy(g, y)
        assert it.n_evals == int(np.log(u) < r1) == len(mh.log_accepts) - before
        if it.n_evals:
            passed += 1
            r2 = (target.logpdf(y) - target.logpdf(x) - s_model.logpdf(y)
                  + s_model.logpdf(x))
            assert mh.log_accepts[-1] == pytest.approx(r2, rel=1e-9, abs=1e-9)
            want = target.logpdf(y) - _g_by_scipy(g, y)
            assert log_weights[-1] == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert 0 < passed < 40 and len(log_weights) == passed
    # the screen's acceptance of g, against a direct average over the same pairs
    D = s_model.rvs(500, random_state=1)
    rate = stage1_pass_rate(g, s_model.logpdf, D, np.random.default_rng(2), n=300)
    pick = np.random.default_rng(2)
    Xs = D[pick.integers(len(D), size=300)]
    Y = g.sample_rows(300, pick)
    r1 = np.array([s_model.logpdf(y) - s_model.logpdf(x) + _g_by_scipy(g, x)
                   - _g_by_scipy(g, y) for x, y in zip(Xs, Y, strict=True)])
    assert rate == pytest.approx(np.mean(np.exp(np.minimum(r1, 0.0))), rel=1e-9)


def test_settings_and_iterations_per_draw():
    assert EmulatorMoves.of(False) is None and EmulatorMoves.of(True) == EmulatorMoves()
    # settings a user passes keep the steps' own values of the fields left at None
    # (the search's starts, the heavier defensive component); a field set is kept as set
    moves = EmulatorMoves.of(EmulatorSettings(max_dim=3, defensive_df=7.0))
    assert moves.settings.max_dim == 3 and moves.settings.defensive_df == 7.0
    assert moves.settings.search_starts == 4 and moves.settings.defensive_weight == 0.3
    assert moves.settings.defensive_scale == EmulatorMoves().settings.defensive_scale == 4.0
    with pytest.raises(TypeError):
        EmulatorMoves.of("yes")
    nan = float("nan")
    # one iteration when the estimate at stationarity reaches 0.43, more below; the
    # trial's own acceptance (noisy, from the best design point) only without an estimate
    assert steps_for_acceptance(0.4, 0.43, 4) == 1 and steps_for_acceptance(0.6, 0.42, 4) == 2
    assert steps_for_acceptance(0.39, 0.6, 4) == 1 and steps_for_acceptance(0.15, 0.5, 4) == 1
    assert steps_for_acceptance(0.5, 0.15, 4) == 3 and steps_for_acceptance(0.5, 0.0, 3) == 5
    assert steps_for_acceptance(0.7, nan, 4) == 1 and steps_for_acceptance(0.39, nan, 4) == 2
    assert steps_for_acceptance(0.01, nan, 8) == 8 and steps_for_acceptance(nan, nan, 2) == 5
    # a likelihood estimator: either below its bound adds iterations (the trial 0.4)
    assert steps_for_acceptance(0.39, 0.6, 4, noisy=True) == 2
    assert steps_for_acceptance(0.15, 0.5, 4, noisy=True) == 3
    assert steps_for_acceptance(0.4, 0.43, 4, noisy=True) == 1
    assert steps_for_acceptance(nan, 0.5, 2, noisy=True) == 5
    # the screen: evaluations per iteration 0.8 * 0.5 + 0.2 = 0.6, so 1 -> 2, 3 -> 5
    assert steps_for_screen(1, 0.5, 0.8) == 2 and steps_for_screen(3, 0.5, 0.8) == 5
    assert steps_for_screen(2, 1.0, 0.8) == 2 and steps_for_screen(2, float("nan"), 0.8) == 2
    assert steps_for_screen(2, 0.0, 1.0) == 8  # at most four times


def test_the_moves_pay_unless_the_trial_and_its_estimate_both_say_no():
    """A chain samples without the emulator only when the trial's own acceptance and the
    control-variate estimate are both below ``min_accept``: a predator-prey chain's trial
    from the best design point accepted 0.14 where the estimate was 0.38 (the old rule,
    the trial alone, sent it to sample without the emulator), and on ``truncated`` an
    emulator far off where ``g`` proposes put the estimate at 0.01 where the trial
    accepted 0.53 (the estimate alone would have).  For a likelihood estimator the trial
    alone decides (``test_likelihood_estimator_stays_exact`` fails with the estimate)."""
    nan = float("nan")
    assert moves_pay(0.14, 0.38, 0.2) and moves_pay(0.53, 0.01, 0.2)
    assert not moves_pay(0.15, 0.1, 0.2) and not moves_pay(0.9, 0.99, 1.0)
    assert moves_pay(0.2, nan, 0.2) and not moves_pay(0.19, nan, 0.2)
    assert not moves_pay(nan, nan, 0.2)
    assert not moves_pay(0.14, 0.38, 0.2, noisy=True) and moves_pay(0.2, 0.0, 0.2, noisy=True)


def _pairs_by_loops(log_w) -> float:
    """The self-normalised all-pairs acceptance by a double loop over the weights."""
    w = np.exp(np.asarray(log_w, dtype=float))
    n = len(w)
    total = sum(w[i] / w.sum() * min(1.0, w[j] / w[i]) for i in range(n) for j in range(n)
                if i != j and w[i] > 0)
    return total / (n - 1)


def test_pair_acceptance_is_the_all_pairs_average():
    """Against a double loop (weights with ties and a failed evaluation), the limits
    (equal weights accept always), and the stationary acceptance of an independence
    sampler on two Gaussians, which it estimates from draws of ``g`` alone."""
    rng = np.random.default_rng(4)
    log_w = np.concatenate([rng.normal(0, 1.5, 60), [0.3, 0.3, -np.inf]])
    assert pair_acceptance(log_w) == pytest.approx(_pairs_by_loops(log_w), rel=1e-12)
    assert pair_acceptance(np.full(5, 2.0)) == pytest.approx(1.0)
    assert np.isnan(pair_acceptance(np.array([1.0]))) and np.isnan(
        pair_acceptance(np.array([-np.inf, -np.inf])))
    # p = N(0, 1), g = N(0.5, 1.5^2): E min(1, w(y) / w(x)) by direct Monte Carlo
    p, g = stats.norm(0, 1), stats.norm(0.5, 1.5)
    x, y = p.rvs(400_000, random_state=1), g.rvs(400_000, random_state=2)
    direct = np.mean(np.minimum(1.0, np.exp(p.logpdf(y) - g.logpdf(y) - p.logpdf(x)
                                            + g.logpdf(x))))
    ys = g.rvs(20_000, random_state=3)
    assert pair_acceptance(p.logpdf(ys) - g.logpdf(ys)) == pytest.approx(direct, abs=0.01)


def test_trial_acceptance_uses_the_emulator_as_control_variate():
    """Unbiased as the trial alone, about three times less spread when the emulator is
    close: over 20 disjoint groups of 40 trial draws the control-variate estimate is within
    0.035 of the truth in at least 16 (each with probability about 0.97; the trial alone
    about 0.58); variants that drop the control (the free draws only: the emulator's
    bias; the trial only) or flip its sign fail."""
    p, g = stats.norm(0, 1), stats.norm(0.3, 1.6)
    emulator = stats.norm(0.15, 1.15)  # near p, its acceptance 0.09 too high

    def estimate(rng, variant=None):
        y, free = g.rvs(40, random_state=rng), g.rvs(2000, random_state=rng)
        lw, lw_e = p.logpdf(y) - g.logpdf(y), emulator.logpdf(y) - g.logpdf(y)
        lw_free = emulator.logpdf(free) - g.logpdf(free)
        if variant == "free only":
            return pair_acceptance(lw_free)
        if variant == "trial only":
            return pair_acceptance(lw)
        if variant == "wrong sign":
            return pair_acceptance(lw_free) - pair_acceptance(lw) + pair_acceptance(lw_e)
        return trial_acceptance(lw, lw_e, lw_free)

    ys = g.rvs(200_000, random_state=9)
    truth = pair_acceptance(p.logpdf(ys) - g.logpdf(ys))

    def close_groups(variant=None):
        rng = np.random.default_rng(11)
        return sum(abs(estimate(rng, variant) - truth) < 0.035 for _ in range(20))

    assert close_groups() >= 16
    for variant in ("free only", "trial only", "wrong sign"):
        assert close_groups(variant) < 16, variant
    # clipped to [0, 1]: equal true and free weights, an emulator spread on the trial
    equal = np.zeros(40)
    assert trial_acceptance(equal, np.linspace(-3, 3, 40), np.zeros(2000)) == 1.0


# ------------------------------------------------------------------ a cheap run
@pytest.fixture(scope="module")
def gauss_run(tmp_path_factory):
    """Two chains of KameleonStep(emulator=True) on the correlated 2-d Gaussian, every
    evaluation counted independently, with the emulator's proposal, the map and the
    iterations per draw seen at every iteration after tuning."""
    model = _gauss_model()
    counter = add_counter(model, tmp_path_factory.mktemp("count") / "evals")
    seen, holder = [], []

    def record(info):
        step = holder[0]
        if not info.tune:
            g = step.emulator_state.g
            seen.append((g, step.n_steps, step.preconditioner.mean.copy(),
                         float(g.logpdf(np.zeros((1, 2)))[0])))

    def factory():
        holder.append(pk.KameleonStep(emulator=CHEAP, tune_draws=TUNE, callback=record))
        return holder[0]

    counter.reset()
    idata, _ = _sample(model, factory)
    return idata, counter.count, seen


def test_cheap_run_uses_the_emulator_and_counts_every_evaluation(gauss_run):
    idata, count, _ = gauss_run
    ss = group_dataset(idata, "sample_stats")
    assert ss["n_evals_total"].values[:, -1].sum() == count  # an independent counter
    assert ss["emulator_active"].values.all()
    assert (ss["emulator_phase"].values == 2).all()  # independence moves after tuning
    assert np.nanmean(ss["accept_independent"].values) > 0.5
    # about one evaluation per draw after tuning; the build and the trial below 1000
    assert (ss["n_evals_total"].values[:, -1] < 1000 + DRAWS * ss["n_steps"].values[:, -1]).all()
    x = group_dataset(idata, "posterior")["x"].values
    z = [moment_zscores(x[:, :, j], 0.0, GAUSS_COV[j, j]) for j in range(2)]
    assert np.max(np.abs(z)) < 5


def test_nothing_adapts_after_tuning(gauss_run):
    """``g``, the map and the iterations per draw are those of the first draw after tuning
    until the last (per chain: the second chain starts with its own)."""
    _, _, seen = gauss_run
    assert len(seen) >= 2 * DRAWS
    for chain in (seen[: len(seen) // 2], seen[len(seen) // 2:]):
        g0, n0, mean0, logg0 = chain[0]
        for g, n, mean, logg in chain:
            assert g is g0 and n == n0 and logg == logg0
            np.testing.assert_array_equal(mean, mean0)


def test_tuning_ends_at_a_truly_evaluated_point(gauss_run):
    """Tuning ran on the emulator; the first draw after it evaluates the chain's point
    truly once before its moves (one evaluation more than its iterations), and from then on
    the stored value (the stat ``lp``) is the true log density of the chain's point.  (The
    variant that kept the emulator's value at the end of tuning failed here.)"""
    idata, _, _ = gauss_run
    x = group_dataset(idata, "posterior")["x"].values
    ss = group_dataset(idata, "sample_stats")
    lp, n_evals, n_steps, passed = (ss[k].values for k in ("lp", "n_evals", "n_steps",
                                                           "emulator_stage1"))
    # one evaluation per iteration the emulator's screen passed
    evaluated = np.rint(passed * n_steps).astype(int)
    np.testing.assert_array_equal(n_evals[:, 0], evaluated[:, 0] + 1)
    np.testing.assert_array_equal(n_evals[:, 1:], evaluated[:, 1:])
    with _gauss_model() as model:
        true_logp = model.compile_logp()
    want = np.array([[true_logp({"x": p}) for p in chain] for chain in x])
    np.testing.assert_allclose(lp, want, rtol=1e-10, atol=1e-10)


def test_without_the_screen_every_iteration_evaluates(tmp_path):
    """``delayed=False``: after tuning one true evaluation per iteration (no screen)."""
    model = _gauss_model()
    counter = add_counter(model, tmp_path / "evals")
    counter.reset()
    moves = EmulatorMoves(CHEAP.settings, posterior_draws=300, delayed=False)
    idata, _ = _sample(model, lambda: pk.KameleonStep(emulator=moves, tune_draws=60),
                       chains=1, tune=60, draws=30)
    ss = group_dataset(idata, "sample_stats")
    n_evals, n_steps = ss["n_evals"].values, ss["n_steps"].values
    np.testing.assert_array_equal(n_evals[:, 1:], n_steps[:, 1:])
    assert np.isnan(ss["emulator_stage1"].values).all()
    assert ss["n_evals_total"].values[:, -1].sum() == counter.count
    # the build's measures of g are stats that stand through the run and set n_steps
    trial, estimate = ss["trial_accept"].values, ss["accept_estimate"].values
    assert (ss["emulator_phase"].values == 2).all()
    assert np.ptp(trial) == 0 and np.ptp(estimate) == 0 and 0 < trial[0, 0] <= 1
    assert (n_steps == steps_for_acceptance(trial[0, 0], estimate[0, 0], 2)).all()


# ------------------------------------------------------------------ thin tails: a warning
def _stats(khat, accept, phase=2):
    """``sample_stats`` of chains with these last k-hats and mean acceptances."""
    import xarray as xr

    n = 5
    k = np.repeat(np.asarray(khat, float)[:, None], n, axis=1)
    a = np.repeat(np.asarray(accept, float)[:, None], n, axis=1)
    return xr.Dataset({"independence_khat": (("chain", "draw"), k),
                       "accept_independent": (("chain", "draw"), a),
                       "emulator_phase": (("chain", "draw"), np.full(k.shape, phase))})


def test_run_warnings_name_the_chains():
    assert run_warnings(_stats([0.3, np.nan], [0.6, 0.5])) == []
    assert run_warnings(_stats([0.9, 0.9], [0.01, 0.01], phase=3)) == []  # fallen back
    thin, rare = run_warnings(_stats([0.3, 0.92, 0.75], [0.6, 0.5, 0.05]))
    assert "chain(s) 1 (0.92), 2 (0.75)" in thin and "tails thinly" in thin
    assert "chain(s) 2 (5%)" in rare


def test_thin_tails_warn_and_covered_tails_do_not(gauss_run):
    """On a 2-d Gaussian ``g`` of the defaults has tails heavier than the target's
    (bounded weights, k-hat below 0); one Gaussian at 0.4 of the posterior's sd without a
    defensive component has weights ``exp(0.42 chi^2)``, whose Pareto tail has k = 0.84:
    each chain's estimate from about 500 proposals exceeded 0.7 in 13 of 16 chains, so
    all four below it happens about once in 500 runs; the defaults' run does not warn."""
    idata, _, _ = gauss_run
    ss = group_dataset(idata, "sample_stats")
    assert (ss["independence_khat"].values[:, -1] < 0.5).all()
    assert run_warnings(ss) == []
    narrow = EmulatorMoves(EmulatorSettings(search_starts=4, search_keep=1, widen=0.4,
                                            defensive_weight=0.0, n_clusters=1),
                           posterior_draws=300, min_accept=0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata, _ = _sample(_gauss_model(),
                           lambda: pk.KameleonStep(emulator=narrow, tune_draws=TUNE),
                           chains=4, draws=600)
    ss = group_dataset(idata, "sample_stats")
    assert (ss["emulator_phase"].values == 2).all()  # the trial accepted the narrow g
    assert np.max(ss["independence_khat"].values[:, -1]) > 0.7
    assert sum("tails thinly" in str(w.message) for w in caught) == 1


# ------------------------------------------------------------------ (d) the fallback
@pytest.mark.parametrize("emulator", [EmulatorSettings(max_dim=1),
                                      EmulatorMoves(min_accept=1.0, posterior_draws=300)],
                         ids=["max_dim", "trial"])
def test_fallback_warns_once_and_samples_as_without(emulator):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata, _ = _sample(_gauss_model(),
                           lambda: pk.KameleonStep(emulator=emulator, tune_draws=TUNE))
    ours = [w for w in caught if "emulator=..." in str(w.message)]
    assert len(ours) == 1 and "without the emulator" in str(ours[0].message)
    ss = group_dataset(idata, "sample_stats")
    assert (ss["emulator_phase"].values == 3).all() and not ss["emulator_active"].values.any()
    assert np.isnan(ss["accept_independent"].values).all()
    x = group_dataset(idata, "posterior")["x"].values
    z = [moment_zscores(x[:, :, j], 0.0, GAUSS_COV[j, j]) for j in range(2)]
    assert np.max(np.abs(z)) < 5


# ------------------------------------------------------------------ every step, the bill
@pytest.mark.parametrize("step_class", STEPS[1:], ids=lambda c: c.__name__)
def test_every_step_uses_it_and_counts_every_evaluation(step_class, tmp_path):
    model = _gauss_model()
    counter = add_counter(model, tmp_path / "evals")
    counter.reset()
    idata, step = _sample(model, lambda: step_class(emulator=CHEAP, tune_draws=60), chains=1,
                          tune=60, draws=30)
    ss = group_dataset(idata, "sample_stats")
    assert ss["n_evals_total"].values[:, -1].sum() == counter.count
    assert (ss["emulator_phase"].values == 2).all()
    pickle.loads(pickle.dumps(step.sampling_state))  # the saved state holds the emulator


def test_multiprocess_run_and_pymc_checks():
    """Two processes (the step pickled), PyMC's convergence checks on."""
    with _gauss_model():
        idata = pm.sample(draws=30, tune=40, chains=2, cores=2, random_seed=4,
                          step=pk.RandomWalkStep(emulator=CHEAP, tune_draws=40),
                          progressbar=False)
    ss = group_dataset(idata, "sample_stats")
    assert ss["emulator_active"].values.all() and ss["n_evals_total"].dtype == np.int64


# ------------------------------------------------------------------ exactness
@pytest.mark.slow
@pytest.mark.parametrize("step_class", STEPS, ids=lambda c: c.__name__)
def test_exact_on_a_correlated_gaussian_group_design(step_class):
    """Eight chains, four disjoint pairs: at least three pairs have every mean and variance
    z-score below 4 (a correct sampler fails a pair with probability below 1e-3 per
    coordinate and moment; the variant without ``log g(x) - log g(y)`` passed none).  Half
    the iterations are the step's own moves (``weight=0.5``): the mixture of the two
    kernels, each step's; the default's independence moves alone are the other tests'."""
    moves = EmulatorMoves(weight=0.5)
    idata, _ = _sample(_gauss_model(),
                       lambda: step_class(emulator=moves, tune_draws=TUNE), chains=8,
                       draws=1000, seed=11)
    x = group_dataset(idata, "posterior")["x"].values
    assert gaussian_groups_passing(x, GAUSS_COV, n_groups=4) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("delayed", [False, True], ids=["unscreened", "screened"])
def test_a_wrong_emulator_costs_evaluations_not_correctness(monkeypatch, delayed):
    """An emulator shifted by one sd in each coordinate: the tuning moves, ``g`` and (with
    ``delayed``) the screen follow it, the true evaluations decide.  Eight chains, four
    disjoint pairs, at least three pass as in the test above, while the shifted
    emulator's own posterior (``g``'s draws) fails the criterion; the variant whose ratio
    drops ``log g(x) - log g(y)`` failed the pairs' count, and so did (0 of 4 pairs) the
    screened variant whose second stage drops the emulator's ``s(x) - s(y)``."""
    shift = np.sqrt(np.diag(GAUSS_COV))
    right = LogDensityEmulator.__call__
    monkeypatch.setattr(LogDensityEmulator, "__call__",
                        lambda self, X: right(self, np.asarray(X, float) - shift))
    drawn = []
    sample = IndependenceProposal.sample
    monkeypatch.setattr(IndependenceProposal, "sample",
                        lambda self, rng: drawn.append(sample(self, rng)) or drawn[-1])
    moves = EmulatorMoves(delayed=delayed)
    idata, _ = _sample(_gauss_model(), lambda: pk.KameleonStep(emulator=moves, tune_draws=TUNE),
                       chains=8, draws=1000, seed=12)
    x = group_dataset(idata, "posterior")["x"].values
    assert gaussian_groups_passing(x, GAUSS_COV, n_groups=4) >= 3
    ss = group_dataset(idata, "sample_stats")
    # most chains sampled with the emulator (a chain whose trial of the shifted g accepted
    # too rarely falls back, which is right too)
    assert (ss["emulator_phase"].values[:, -1] == 2).sum() >= 4
    g_draws = np.array(drawn)[None, :, :]
    assert gaussian_groups_passing(g_draws, GAUSS_COV, n_groups=1) == 0
    assert np.all(g_draws[0].mean(0) > 0.5 * shift)


@pytest.mark.slow
@pytest.mark.parametrize("delayed", [False, True], ids=["unscreened", "screened"])
def test_likelihood_estimator_stays_exact(delayed):
    """A noisy (pseudo-marginal) log likelihood: the stored estimate travels with its
    point (also through the screen's second stage), so the chains target the exact
    posterior."""
    moves = EmulatorMoves(delayed=delayed)
    idata, _ = _sample(noisy_model(1.0),
                       lambda: pk.KameleonStep(emulator=moves, tune_draws=TUNE), chains=4,
                       draws=1000, seed=2)
    mu = group_dataset(idata, "posterior")["mu"].values
    assert abs(mean_error_in_mcse(mu, NOISY_POST_MEAN, NOISY_POST_SD)) < 4
    z_var = moment_zscores(mu, NOISY_POST_MEAN, NOISY_POST_SD**2)[1]
    assert abs(z_var) < 4
