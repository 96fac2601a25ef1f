"""KernelHMCStep-specific behaviour; the generic PyMC contract is in test_step_contract.py."""

import warnings
from functools import partial

import numpy as np
import pymc as pm
import pytest
from checks import (
    BANANA_CHAINS,
    BANANA_MIN_PASSING,
    banana_groups_passing,
    moment_zscores,
    sample,
    wrap_py,
)

from pymc_kameleon import KernelHMCStep, LogDensityError
from pymc_kameleon.adaptation import KernelHMCAdaptation
from pymc_kameleon.adaptation.kernel_hmc import HMCProposal
from pymc_kameleon.math.ard import search_lengths
from pymc_kameleon.math.score_matching import FiniteScoreEstimator, LiteScoreEstimator
from pymc_kameleon.models import banana_model


class ForgetsKineticEnergy(KernelHMCAdaptation):
    """Deliberately broken: accepts with the target ratio alone, forgetting |p|^2 / 2."""

    def propose(self, state, q0, rng, tune):
        p = super().propose(state, q0, rng, tune)
        corr = p.log_correction
        return HMCProposal(p.position, 0.0 if np.isfinite(corr) else corr, p.n_leapfrog,
                           p.diverged)


#: The broken step of the banana tests (also run by ``tests/calibration.py``).
NoKineticEnergy = partial(KernelHMCStep, adaptation_class=ForgetsKineticEnergy)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(surrogate="nystrom"), "unknown surrogate"),
        (dict(n_leapfrog=(0, 5)), "n_leapfrog"),
        (dict(n_leapfrog=(10, 5)), "n_leapfrog"),
        (dict(step_size=-0.1), "step_size"),
        (dict(step_size_jitter=1.0), "jitter"),
        (dict(n_history=5), "n_history"),
        (dict(bandwidth=0.0), "bandwidth"),
        (dict(lam=-1.0), "lam"),
        (dict(target_accept=0.0), "target"),
        (dict(surrogate="lite", ard=True), "ard"),
        (dict(bandwidth=1.0, ard=True), "ard"),
        (dict(random_walk_fraction=1.5), "random_walk_fraction"),
        (dict(random_walk_fraction=-0.1), "random_walk_fraction"),
    ],
)
def test_invalid_parameters(gauss, kwargs, match):
    with gauss, pytest.raises(ValueError, match=match):
        KernelHMCStep(**kwargs)


@pytest.mark.parametrize("surrogate", ["lite", "finite"])
def test_random_walk_until_the_first_fit_then_trajectories(gauss, surrogate):
    # one iteration per draw and a one-draw warm-up: kernel iteration t is draw t + 1.
    # Whether the fitted surrogate beats the random walk in its trial is up to the chain
    # (about 1 chain in 8 keeps the walk here): of 4 chains at least 2 must take over, a
    # false failure has probability about 0.002; every chain that does follows the schedule.
    make = partial(KernelHMCStep, surrogate=surrogate, n_steps=1, warmup_draws=1)
    idata = sample(gauss, make, draws=100, tune=500, chains=4, discard_tuned_samples=False)
    warm = idata.warmup_sample_stats
    code = {"lite": 1, "finite": 2}[surrogate]
    took = warm.surrogate.values[:, -1] == code
    assert took.sum() >= 2, warm.surrogate.values[:, -1]
    # the first fit happens at the draw boundary after 200 kernel iterations; the fitted
    # surrogate proposes every other iteration on trial and takes over after 50 of them
    # that follow the 50 of its step size's warm-up
    assert np.all(warm.surrogate.values[:, :400] == 0)
    assert np.all(warm.n_leapfrog.values[:, 1:201] == 1)
    assert np.all(warm.n_leapfrog.values[:, 201:400:2] >= 10)  # the candidate's trajectories
    assert np.all(warm.surrogate.values[took, 400:] == code)
    n_steps = idata.sample_stats.n_leapfrog.values[took]
    # after tuning, about a tenth of the iterations are the random walk (one step)
    walk = n_steps == 1
    assert 0.02 <= walk.mean() <= 0.25
    trajectories = n_steps[~walk]
    assert trajectories.min() >= 10 and trajectories.max() <= 50
    assert np.unique(trajectories).size > 10
    bw = idata.sample_stats.bandwidth.values[took]
    assert np.all(bw == bw[:, :1]) and np.all(bw > 0)
    assert np.all(idata.sample_stats.kernel_sigma.values[took] == 2 * bw**2)


def _first_fit(model, **kwargs):
    """The surrogate of the first fit (after 200 kernel iterations), on trial or in use."""
    with model:
        step = KernelHMCStep(n_steps=1, warmup_draws=1, rng=3, **kwargs)
    point = model.initial_point()
    for _ in range(203):
        point, _ = step.step(point)
    fitted = step.surrogate_on_trial or step.current_surrogate
    assert fitted.estimator is not None
    return fitted


@pytest.mark.parametrize("kwargs", [dict(surrogate="lite"), dict(bandwidth=2.0),
                                    dict(ard=False), None],
                         ids=["lite", "bandwidth", "ard-off", "1-d"])
def test_per_coordinate_lengths_default(gauss, kwargs):
    """Per-coordinate lengths by default only for the finite surrogate in 2-16 dimensions
    without a given bandwidth (searched and used: the next test); not for the lite
    surrogate, a given bandwidth, ``ard=False`` or one coordinate (its length is the
    bandwidth): the first fit has none."""
    model = gauss
    if kwargs is None:  # the default in one dimension
        with pm.Model() as model:
            pm.Normal("x")
    fitted = _first_fit(model, **(kwargs or {}))
    assert fitted.lengths is None
    features = getattr(fitted.estimator, "features", None)  # finite surrogates
    assert features is None or features.lengths is None


def test_lengths_are_searched_and_used_by_the_surrogate(gauss):
    make = partial(KernelHMCStep, n_steps=1, warmup_draws=1, rng=3)
    with gauss:
        step, flat = make(), make(ard=False)
    for s in (step, flat):
        point = gauss.initial_point()
        for _ in range(500):
            point, _ = s.step(point)
    a, b = step.current_surrogate, flat.current_surrogate
    assert a.estimator is not None and a.lengths is not None
    np.testing.assert_allclose(np.exp(np.mean(np.log(a.lengths))), 1.0)
    np.testing.assert_array_equal(a.estimator.features.lengths, a.lengths)
    assert b.lengths is None and b.estimator.features.lengths is None


def test_lengths_respect_the_bandwidth_floor(gauss, monkeypatch):
    # every length search gets the floor of the bandwidth search (0.125 sqrt(2 d), against
    # pseudo-marginal histories collapsed on a lucky estimate), and what it returns keeps it
    import pymc_kameleon.adaptation.kernel_hmc_rules as rules

    floors = []

    def spy(*args, **kwargs):
        floors.append(kwargs["min_bandwidth"])
        return search_lengths(*args, **kwargs)

    monkeypatch.setattr(rules, "search_lengths", spy)
    with gauss:
        step = KernelHMCStep(n_steps=1, warmup_draws=1, rng=3)
    point = gauss.initial_point()
    for _ in range(500):
        point, _ = step.step(point)
    floor = 0.125 * np.sqrt(2.0 * step.dim)
    assert floors and np.allclose(floors, floor)
    a = step.current_surrogate
    assert np.min(a.lengths * a.bandwidth) >= floor * (1 - 1e-9)


def test_random_walk_fraction_one_is_the_tuned_walk_after_tuning(gauss):
    # 4 chains, at least 2 with a surrogate at the end of tuning (as in the test above)
    make = partial(KernelHMCStep, n_steps=1, warmup_draws=1, random_walk_fraction=1.0)
    idata = sample(gauss, make, draws=100, tune=500, chains=4, discard_tuned_samples=False)
    took = idata.warmup_sample_stats.surrogate.values[:, -1] == 2
    assert took.sum() >= 2
    assert np.all(idata.sample_stats.n_leapfrog.values == 1)
    assert np.all(idata.sample_stats.surrogate.values[took] == 2)  # it stays in use
    # while tuning the mixture is off: the trajectories of the surrogate in use
    assert np.all(idata.warmup_sample_stats.n_leapfrog.values[took, 400:] >= 10)


def test_finite_surrogate_learns_from_the_whole_tuning_history(gauss):
    with gauss:
        step = KernelHMCStep(rng=4, n_steps=1, warmup_draws=1)
    point = gauss.initial_point()
    for _ in range(500):
        point, _ = step.step(point)
    step.stop_tuning()
    estimator = step.current_surrogate.estimator
    assert isinstance(estimator, FiniteScoreEstimator)
    # refit on all 400 points at the last CV, then online in batches of 10 (a batch still
    # pending when tuning stops is dropped: the surrogate is frozen as last used)
    assert 489 < estimator.n_seen <= 499


def test_lite_surrogate_is_refitted_on_the_schedule(gauss):
    with gauss:
        step = KernelHMCStep(surrogate="lite", rng=4, n_steps=1, warmup_draws=1)
    point = gauss.initial_point()
    bases = []
    for _ in range(802):
        point, _ = step.step(point)
        c = step.surrogate_on_trial
        est = c.estimator if c is not None else None
        if est is not None and (not bases or bases[-1] is not est):
            bases.append(est)
    assert isinstance(bases[-1], LiteScoreEstimator)
    # each refit is on trial for 200 iterations (100 of its own: 50 to warm up its step
    # size, then 50 checked; kept only if it moves the chain at least as far as the
    # surrogate in use) and the next one waits for it: it comes at the draw boundary where
    # the trial ends, after the refit on trial at t = 200 its own iterations are t = 201,
    # 203, ..., 399
    assert [b.basis.shape[0] for b in bases] == [200, 399, 599, 799]


def test_fixed_hyperparameters_skip_cross_validation(gauss):
    make = partial(KernelHMCStep, bandwidth=1.5, lam=1e-3, warmup_draws=50)
    idata = sample(gauss, make, draws=50, tune=400, chains=1)
    assert np.all(idata.sample_stats.bandwidth == 1.5)
    assert np.all(idata.sample_stats["lambda"] == 1e-3)


def test_step_size_initialised_on_the_surrogate(gauss):
    """After a fit the step size restarts where surrogate trajectories reach the target
    acceptance: a doubled step would not."""
    with gauss:
        step = KernelHMCStep(rng=7, n_steps=1, warmup_draws=1)
    point = gauss.initial_point()
    for _ in range(202):
        point, _ = step.step(point)
    c = step.surrogate_on_trial  # the fitted surrogate
    eps = c.scaler.value
    assert c.scaler.t == 0 and eps != step.adaptation.step_size
    assert 0.05 < eps < 5.0  # the target's scales are 1 and 2


@pytest.fixture(scope="module")
def banana():
    return banana_model(dim=2, b=0.03, v=100.0)


@pytest.mark.slow
def test_banana_moderate_finite(banana):
    """2-d B(0.03, 100), default settings, 16 chains of 4000 draws (tune 1000), the group
    design of checks.py: a 4-chain group passes with a coverage error below 0.06 and R-hat
    below 1.1.  Group pass rates and the seed-by-seed history:
    docs/benchmarks/test_calibration.md.
    """
    idata = sample(banana, KernelHMCStep, draws=4000, tune=1000, chains=BANANA_CHAINS,
                   cores=2, seed=0)
    passing, groups = banana_groups_passing(idata, 0.03, 100.0, 0.06, 1.1)
    print("groups passing:", passing, "(error, R-hat):", groups)
    assert passing >= BANANA_MIN_PASSING, groups


@pytest.mark.slow
def test_banana_moderate_finite_broken_variant_fails(banana):
    """The negative control: without the kinetic energy in the ratio fewer than 2 of 4
    groups pass (coverage errors of about 0.2)."""
    idata = sample(banana, NoKineticEnergy, draws=4000, tune=1000, chains=BANANA_CHAINS,
                   cores=2, seed=0)
    passing, groups = banana_groups_passing(idata, 0.03, 100.0, 0.06, 1.1)
    print("groups passing:", passing, "(error, R-hat):", groups)
    assert passing < BANANA_MIN_PASSING, groups


def _lite_step_after_takeover(gauss):
    """A lite kernel HMC step whose first refit (t = 200) took over at t = 399, run to
    t = 420; returns the step and its current point."""
    with gauss:
        step = KernelHMCStep(surrogate="lite", rng=4, n_steps=1, warmup_draws=1)
    point = gauss.initial_point()
    for _ in range(420):
        point, _ = step.step(point)
    return step, point


def test_a_surrogate_in_use_that_falls_behind_the_random_walk_is_dropped(gauss):
    """The surrogate in use stays under review while tuning: with an ESJD below half the
    random walk's (as measured when it was replaced) the step goes back to that walk."""
    step, point = _lite_step_after_takeover(gauss)
    a = step.adaptation_state  # unit test of the review rule: sets the tally it reads
    assert a.current.estimator is not None and a.fallback is not None and a.fallback_esjd > 0
    walk = a.fallback
    a.tally.n, a.tally.jump = 50, 50 * 0.6 * a.fallback_esjd  # at 60 % of the walk: kept
    step.adaptation.review(a)
    assert a.current.estimator is not None and a.fallback is walk and a.tally.n == 0
    a.tally.n, a.tally.jump = 50, 50 * 0.4 * a.fallback_esjd  # at 40 %: back to the walk
    step.adaptation.review(a)
    assert step.current_surrogate is walk and a.fallback is None
    assert np.isnan(walk.bandwidth) and walk.estimator is None
    point, stats = step.step(point)
    assert stats[0]["surrogate"] == 0 and stats[0]["step_size"] == walk.scaler.value
    for _ in range(150):  # the next refit starts a new trial from the walk
        point, _ = step.step(point)
    assert step.surrogate_on_trial is not None or step.current_surrogate.estimator is not None


def test_a_surrogate_in_use_at_the_floor_of_its_step_size_band_is_dropped(gauss):
    """The trial's consistency check holds under review too: a surrogate whose step size
    sits on the floor of its band goes back to the walk even with a large ESJD."""
    step, _ = _lite_step_after_takeover(gauss)
    a = step.adaptation_state  # unit test of the review rule: sets the tally it reads
    walk, scaler = a.fallback, a.current.scaler
    assert a.current.estimator is not None and walk is not None and not scaler.at_floor
    a.tally.n, a.tally.jump = 50, 50 * 2.0 * a.fallback_esjd  # twice the walk's, off the floor
    step.adaptation.review(a)
    assert a.current.estimator is not None and a.fallback is walk
    scaler.log_value = scaler.log_anchor + np.log(scaler.lower)  # on the floor
    assert scaler.at_floor
    a.tally.n, a.tally.jump = 50, 50 * 2.0 * a.fallback_esjd
    step.adaptation.review(a)
    assert step.current_surrogate is walk and a.fallback is None


def test_a_refit_is_judged_after_its_step_size_warm_up(gauss):
    with gauss:
        step = KernelHMCStep(surrogate="lite", rng=4, n_steps=1, warmup_draws=1)
    point = gauss.initial_point()
    for _ in range(301):  # refit at t = 200; its 50 warm-up iterations are t = 201 ... 299
        point, _ = step.step(point)
    trial = step.adaptation_state.trial  # unit test of the trial's counts
    # both counts restart with the checked iterations (t = 300 was the walk's)
    assert trial is not None and trial.warmed and trial.tally.n == 0
    assert step.adaptation_state.tally.n == 1
    assert step.current_surrogate.estimator is None


# one iteration per draw, a one-draw warm-up: kernel iteration t ends draw t; the refits
# and cross-validations of kernel iteration 200 * 2^k happen at the start of draw 200 * 2^k + 1
@pytest.mark.parametrize("surrogate, n_tune", [("finite", 802), ("lite", 802), ("lite", 1002)])
def test_frozen_step_size_was_adapted_on_the_frozen_surrogate(gauss, surrogate, n_tune):
    """With tune = 200 * 2^k the step cross-validates (and lite refits) on the last tuning
    iteration; the frozen step size must still be one adapted against the target on the
    frozen surrogate for at least 50 iterations."""
    with gauss:
        step = KernelHMCStep(surrogate=surrogate, rng=5, n_steps=1, warmup_draws=1)
    point = gauss.initial_point()
    proposed = {}  # estimator id -> tuning iterations it proposed
    for _ in range(n_tune):
        point, _ = step.step(point)
        # the surrogate that made the last proposal: not reported (the stat is the one in use)
        est = step.adaptation_state.proposer()[0].estimator
        proposed[id(est)] = proposed.get(id(est), 0) + 1
    step.stop_tuning()
    a = step.current_surrogate
    assert a.estimator is not None and step.surrogate_on_trial is None
    assert a.scaler.t >= 50, a.scaler.t
    assert proposed.get(id(a.estimator), 0) >= 50
    eps = a.scaler.value
    for _ in range(20):
        point, _ = step.step(point)
    assert step.current_surrogate.scaler.value == eps
    assert step.current_surrogate.estimator is a.estimator


@pytest.mark.parametrize("surrogate, n_tune", [("finite", 802), ("lite", 802), ("lite", 1002)])
def test_frozen_stats_equal_the_last_tuned_ones_without_tune_length(gauss, surrogate, n_tune):
    """PyMC's stats convention where PyMC does not tell the step how long tuning is (PyMC
    5: no ``setup_chain``): with a refit at the last tuning iteration, every draw after
    tuning reports the step size, bandwidth and lambda of the last tuning draw."""
    with gauss:  # driven by step.step(), not pm.sample: not told the tuning length
        step = KernelHMCStep(surrogate=surrogate, rng=5, n_steps=1, warmup_draws=1)
    point = gauss.initial_point()
    for _ in range(n_tune):
        point, stats = step.step(point)
    names = ("step_size", "bandwidth", "lambda", "surrogate")
    last = {k: stats[0][k] for k in names}
    assert last["surrogate"] > 0
    step.stop_tuning()
    for _ in range(20):
        point, stats = step.step(point)
        assert {k: stats[0][k] for k in names} == last


def test_later_cross_validations_search_near_the_last_bandwidth(gauss):
    # the grid of each cross-validation is the object under test (no stat reports it)
    grids = []

    class Spy(KernelHMCAdaptation):
        def cross_validate(self, state, s_med, rng):
            result = super().cross_validate(state, s_med, rng)
            grids.append(state.cv_index)
            return result

    with gauss:
        # driven by hand: tuning as long as the test (PyMC 5 would assume 1000 draws)
        step = KernelHMCStep(rng=5, n_steps=1, warmup_draws=1, adaptation_class=Spy,
                             tune_draws=1202)
    point = gauss.initial_point()
    for _ in range(1202):
        point, _ = step.step(point)
    # at 200, then at the first refit after 400 (599) and after 2 * 599 (1199): refits wait
    # for the trial of 200 iterations before them
    assert len(grids) == 3
    assert all(abs(b - a) <= 2 for a, b in zip(grids, grids[1:], strict=False))


@pytest.fixture(scope="module")
def gauss9():
    """Standard 9-d Gaussian: ceil(sqrt(d)) = 3 and the random walk's count d = 9 differ."""
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=9)
    return model


def _sample_keeping_step(model, make, **kwargs):
    """``sample`` (one chain, tuning draws kept) that also returns the step it used."""
    steps = []

    def factory():
        steps.append(make())
        return steps[-1]

    idata = sample(model, factory, chains=1, discard_tuned_samples=False, **kwargs)
    return idata, steps[0]


def _iteration_counts(idata):
    """Evaluations per draw (tuning, then after tuning) and the surrogate codes of tuning."""
    warm = idata.warmup_sample_stats
    return (warm.n_evals.values[0, 1:], idata.sample_stats.n_evals.values[0],
            warm.surrogate.values[0, 1:])


def test_default_iterations_of_a_random_walk_are_the_random_walks(gauss9):
    # tuning ends before the first fit (20 kernel-phase draws x 3 < 200 iterations): the
    # step ends tuning as a random walk and samples with RandomWalkStep's d iterations per
    # draw, as in its warm-up; its kernel phase has ceil(sqrt(d)) iterations per draw
    make = partial(KernelHMCStep, warmup_draws=20)
    idata, step = _sample_keeping_step(gauss9, make, draws=30, tune=40)
    tuning, draws, surrogate = _iteration_counts(idata)
    assert np.all(surrogate == 0)
    assert np.all(tuning[:19] == 9) and np.all(tuning[19:] == 3)
    assert np.all(draws == 9) and step.n_steps == 9
    accepted = idata.sample_stats.accepted.values
    np.testing.assert_allclose(accepted * 9, np.round(accepted * 9), atol=1e-9)


def test_default_iterations_follow_the_surrogate_in_use_and_freeze(gauss9):
    # d = 9 iterations per draw in the warm-up, ceil(sqrt(9)) = 3 in the kernel phase and,
    # with a surrogate in use at the end of tuning, after it
    make = partial(KernelHMCStep, surrogate="lite", warmup_draws=20)
    idata, step = _sample_keeping_step(gauss9, make, draws=30, tune=300)
    tuning, draws, surrogate = _iteration_counts(idata)
    assert surrogate[-1] == 1 and np.any(surrogate == 0)  # a surrogate took over in tuning
    # (the work per draw, measured late in tuning, may raise the count: the stat n_steps)
    n = int(idata.sample_stats.n_steps.values.flat[0])
    assert np.all(tuning[:19] == 9)
    assert np.all(tuning[19:] <= n) and tuning[19:].max() == n and tuning[19:100].max() == 3
    assert np.all(idata.sample_stats.surrogate.values == 1)
    assert n >= 3 and np.all(idata.sample_stats.n_steps.values == n)
    assert np.all(draws <= n) and draws.max() == n and step.n_steps == n  # frozen
    accepted = idata.sample_stats.accepted.values
    np.testing.assert_allclose(accepted * n, np.round(accepted * n), atol=1e-9)


def test_default_iterations_in_two_dimensions(gauss):
    # d = 2: max(2, d) = 2 in the warm-up (its draws are discarded, the base's floor of 5
    # would only add evaluations) and ceil(sqrt(2)) = 2 in the kernel phase; a step that
    # ends tuning as a random walk takes the random walk's max(5, d) = 5, also when tuning
    # ends within the warm-up
    make = partial(KernelHMCStep, warmup_draws=20)
    idata, step = _sample_keeping_step(gauss, make, draws=30, tune=40)
    tuning, draws, surrogate = _iteration_counts(idata)
    assert np.all(surrogate == 0)
    assert np.all(tuning == 2)
    assert np.all(draws == 5) and step.n_steps == 5
    idata, step = _sample_keeping_step(gauss, make, draws=30, tune=10)  # within the warm-up
    tuning, draws, _ = _iteration_counts(idata)
    assert np.all(tuning == 2) and np.all(draws == 5) and step.n_steps == 5


def test_a_step_left_a_random_walk_says_so(gauss):
    """Kernel HMC whose surrogate never took over (a kernel phase of 20 draws) samples as the
    random walk: a UserWarning says so when tuning ends; none while the warm-up
    warning already covers it (tuning within the warm-up) is added."""
    make = partial(KernelHMCStep, warmup_draws=20)
    with pytest.warns(UserWarning, match="no score-matching surrogate beat the random walk"):
        idata, _ = _sample_keeping_step(gauss, make, draws=5, tune=40)
    assert np.all(idata.sample_stats.surrogate.values == 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _sample_keeping_step(gauss, make, draws=5, tune=10)
    assert not [w for w in caught if "no score-matching surrogate" in str(w.message)]


@pytest.mark.parametrize("n_steps", [1, 4])
def test_user_iterations_are_respected(gauss9, n_steps):
    """A user's n_steps holds in the warm-up, the random-walk phase and with a surrogate.

    Whether the lite surrogate takes over within this budget depends on the chain, and the
    chains differ between machines (other rounding in the linear algebra); so n_steps is
    checked on six chains, and at least one of them must have run with the surrogate
    (rates in ``docs/benchmarks/test_calibration.md``)."""
    make = partial(KernelHMCStep, surrogate="lite", warmup_draws=20, n_steps=n_steps)
    with_surrogate = 0
    for seed in range(6):
        idata, step = _sample_keeping_step(gauss9, make, draws=30, tune=20 + 600 // n_steps,
                                           seed=seed)
        tuning, draws, surrogate = _iteration_counts(idata)
        with_surrogate += bool(surrogate[-1] == 1 and np.any(surrogate == 0))
        both = np.concatenate([tuning, draws])
        assert np.all(both <= n_steps) and np.all(tuning[:20] == n_steps)
        assert step.n_steps == n_steps
    assert with_surrogate >= 1


_CORR_MEAN = np.array([1.0, -2.0])
_CORR_COV = np.array([[4.0, 1.2], [1.2, 1.0]])


def _corr_gaussian(name: str = "x"):
    """``gauss_corr``'s Gaussian, in the model being built (the variable is returned)."""
    return pm.MvNormal(name, mu=_CORR_MEAN, cov=_CORR_COV)


def _corr_zscores(x: np.ndarray) -> list[float]:
    """z-scores of the means and variances of both coordinates of draws ``x`` (chain,
    draw, 2) of ``gauss_corr`` against the truth."""
    return [z for i in range(2)
            for z in moment_zscores(x[..., i], _CORR_MEAN[i], _CORR_COV[i, i])]


@pytest.fixture(scope="module")
def gauss_corr():
    """2-d Gaussian with unequal scales and correlation 0.6 (a known answer)."""
    with pm.Model() as model:
        _corr_gaussian()
    return model


class _DriftingWalk(KernelHMCAdaptation):
    """Deliberately broken: the random-walk iterations after tuning drift (an asymmetric
    proposal scored as a symmetric one) by the walk's step size."""

    def propose(self, state, q0, rng, tune):
        p = super().propose(state, q0, rng, tune)
        if not tune and p.n_leapfrog == 1:
            p = HMCProposal(p.position + state.fallback.scaler.value, 0.0, 1, False)
        return p


def _walk_mixture_zscores(model, adaptation_class):
    make = partial(KernelHMCStep, random_walk_fraction=0.5, adaptation_class=adaptation_class)
    idata = sample(model, make, draws=2000, tune=1000, chains=2, seed=5)
    x = idata.posterior["x"].values
    assert (idata.sample_stats.n_leapfrog.values == 1).mean() > 0.3  # the walk's share
    return _corr_zscores(x)


def test_random_walk_mixture_samples_the_target(gauss_corr):
    # half of the iterations after tuning are the walk: means and variances of a known
    # Gaussian within 3.5 standard errors (figures: docs/benchmarks/test_calibration.md)
    z = _walk_mixture_zscores(gauss_corr, KernelHMCAdaptation)
    assert np.max(np.abs(z)) < 3.5, z


def test_random_walk_mixture_broken_variant_fails(gauss_corr):
    # the same check catches a walk that drifts by one step size
    z = _walk_mixture_zscores(gauss_corr, _DriftingWalk)
    assert np.max(np.abs(z)) > 3.5, z


# ---------------------------------------------------------------- trajectories sent far away
_FAR = 1e3  # whitened sds: where a surrogate extrapolating outside its history sent pk


@pytest.fixture(scope="module")
def fragile_gauss():
    """``gauss_corr``'s Gaussian times a black-box term that raises beyond |x| > 50 (an ODE
    solver failing at absurd rates, as on pk: docs/algorithms/kernel_hmc.md)."""
    import pytensor.tensor as pt

    @wrap_py(itypes=[pt.dvector], otypes=[pt.dscalar])
    def fragile(x):
        if np.max(np.abs(x)) > 50.0:
            raise RuntimeError("solver failed")
        return np.asarray(0.0)

    with pm.Model() as model:
        pm.Potential("solver", fragile(_corr_gaussian()))
    return model


def _shooting(monkeypatch, every: int) -> None:
    """Every ``every``-th surrogate trajectory ends ``_FAR`` away (as an extrapolating
    surrogate's did on pk)."""
    calls = {"n": 0}
    real = FiniteScoreEstimator.leapfrog

    def leapfrog(self, q, p, eps, n_steps):
        q1, p1 = real(self, q, p, eps, n_steps)
        calls["n"] += 1
        return (q1 + _FAR, p1) if calls["n"] % every == 0 else (q1, p1)

    monkeypatch.setattr(FiniteScoreEstimator, "leapfrog", leapfrog)


def test_a_trajectory_sent_far_away_is_rejected_unevaluated(fragile_gauss, monkeypatch):
    """With on_error="raise" (the default) the run completes: each far trajectory is
    rejected without an evaluation and counted in n_diverged, so after tuning every draw
    spends exactly n_steps - n_diverged evaluations.  Control: max_jump=inf evaluates the
    far point, and the solver's failure stops sampling."""
    _shooting(monkeypatch, every=5)
    idata = sample(fragile_gauss, KernelHMCStep, draws=300, tune=1000, chains=1, seed=3)
    st = idata.sample_stats
    diverged = st.n_diverged.values
    assert diverged.sum() > 50
    assert int(st.n_errors.sum()) == 0
    np.testing.assert_array_equal(st.n_evals.values, st.n_steps.values - diverged)
    with pytest.raises(LogDensityError, match="raised at draw"):
        sample(fragile_gauss, partial(KernelHMCStep, max_jump=np.inf), draws=300,
               tune=1000, chains=1, seed=3)


def test_max_jump_must_be_positive(gauss):
    with gauss:
        for bad in (0.0, -1.0, np.nan):
            with pytest.raises(ValueError, match="max_jump"):
                KernelHMCStep(max_jump=bad)
        assert KernelHMCStep().max_jump == 10.0 * (1.0 + np.sqrt(2.0))


class _OutwardBound(KernelHMCAdaptation):
    """Deliberately broken: rejects long trajectories only when they lead away from the
    centre (an asymmetric rule), which pulls the chain inward."""

    def propose(self, state, q0, rng, tune):
        p = super().propose(state, q0, rng, tune)
        q1 = np.asarray(p.position)
        if (np.linalg.norm(q1 - q0) > _SHORT_BOUND
                and np.linalg.norm(q1) > np.linalg.norm(q0)):
            p = HMCProposal(q0, -np.inf, p.n_leapfrog, False)
        return p


_SHORT_BOUND = 1.0  # whitened sds: shorter than most trajectories, so the rule acts often
_BOUND_CHAINS, _BOUND_MIN_PASSING = 8, 6


def _chains_passing_moments(model, make) -> tuple[int, list]:
    """Chains (each a group) whose means and variances of both coordinates of gauss_corr
    are within 3.5 standard errors of the truth."""
    idata = sample(model, make, draws=2000, tune=1000, chains=_BOUND_CHAINS, cores=2,
                   seed=11)
    x = idata.posterior["x"].values
    worst = [round(float(np.max(np.abs(_corr_zscores(x[c:c + 1])))), 2)
             for c in range(_BOUND_CHAINS)]
    return sum(w < 3.5 for w in worst), worst


@pytest.mark.slow
def test_a_short_jump_bound_keeps_the_target(gauss_corr):
    """The bound rejects a trajectory symmetrically, so even one shorter than most
    trajectories (1 sd) leaves the target exact: at least 6 of 8 chains have every mean and
    variance within 3.5 standard errors (calibration: docs/benchmarks/test_calibration.md)."""
    passing, worst = _chains_passing_moments(
        gauss_corr, partial(KernelHMCStep, max_jump=_SHORT_BOUND))
    print("chains passing:", passing, "max |z| per chain:", worst)
    assert passing >= _BOUND_MIN_PASSING, worst


@pytest.mark.slow
def test_a_short_jump_bound_broken_variant_fails(gauss_corr):
    """The negative control: rejecting only long trajectories that lead outward (no
    symmetric rule) shrinks the variances, and fewer than 6 of 8 chains pass."""
    passing, worst = _chains_passing_moments(
        gauss_corr, partial(KernelHMCStep, adaptation_class=_OutwardBound, max_jump=np.inf))
    print("chains passing:", passing, "max |z| per chain:", worst)
    assert passing < _BOUND_MIN_PASSING, worst
