"""Restoring ``sampling_state`` reproduces a step's continuation exactly, counters included.

PyMC checks its own step methods with ``StepMethodTester.step_continuous`` (its
``tests/helpers.py``, used by ``TestStepMetropolis.test_step_continuous``): deep-copy the
step, save its state, step once from the initial point, restore, step again, and require
equal states and equal draws; then sample ``mv_simple`` (tune 1000, 4000 draws, one chain)
and check the mean and sd within a tenth of the posterior sd.  :func:`test_pymc_step_continuous`
runs that pattern on every step of ours, with and without the surrogate screen.

The other tests go further than PyMC's: the round trip at the first draw, in the warm-up,
in the sampler's own tuning and after tuning, with an Op counting the log density's true
evaluations; and at a first draw that finds the incoming point's value stored by another
step of the model (the model's stored value is part of the state).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import fields

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.step_methods.state import equal_dataclass_values
from pymc_reference_models import mv_simple, mv_simple_cov

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep
from pymc_kameleon.models.counting import add_counter, find_counter

STEPS = {
    "RandomWalkStep": RandomWalkStep,
    "KameleonStep": KameleonStep,
    "FastKameleonStep": FastKameleonStep,
    "KernelHMCStep": KernelHMCStep,
}
CASES = [(name, screen) for name in STEPS for screen in (False, True)]
IDS = [f"{name}{'-screen' if screen else ''}" for name, screen in CASES]
# PyMC's pattern samples 5000 draws: with the screen's refits, 15-25 s a step (slow)
PATTERN_CASES = [pytest.param(name, screen, id=i, marks=[pytest.mark.slow] if screen else [])
                 for (name, screen), i in zip(CASES, IDS, strict=True)]


def equal_sampling_states(this, other) -> bool:
    """PyMC's helper of the same name (``tests/helpers.py``)."""
    if this.__class__ != other.__class__:
        return False
    names = {f.name for f in fields(this)}
    if names != {f.name for f in fields(other)}:
        return False
    return all(equal_dataclass_values(getattr(this, n), getattr(other, n)) for n in names)


def n_evals(step) -> int:
    """The chain's evaluations so far, as its state records them."""
    return int(step.sampling_state.chain["warm"].values["n_evals"])


@pytest.fixture(scope="module")
def mv():
    model, _ = mv_simple()
    return model


@pytest.mark.parametrize(("name", "screen"), PATTERN_CASES)
def test_pymc_step_continuous(name, screen, mv):
    """PyMC's ``StepMethodTester.step_continuous`` on ``mv_simple``, step for step."""
    mu, cov = np.array([-0.1, 0.5, 1.1]), mv_simple_cov()
    unc = np.sqrt(np.diag(cov))
    start = mv.initial_point()
    with mv:
        step = STEPS[name](blocked=True, screen=screen, rng=np.random.default_rng(1))
        orig_step = copy.deepcopy(step)
        orig_state = step.sampling_state
        assert equal_sampling_states(step.sampling_state, orig_state)

        ip = mv.initial_point()
        value1, _ = step.step(ip)
        final_state = step.sampling_state
        step.sampling_state = orig_state
        value2, _ = step.step(ip)
        assert equal_sampling_states(step.sampling_state, final_state)
        assert equal_dataclass_values(value1, value2)

        step.sampling_state = orig_state
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(tune=1000, draws=4000, chains=1, step=step, initvals=start,
                              random_seed=1, discard_tuned_samples=False, progressbar=False,
                              compute_convergence_checks=False)
    assert idata.warmup_posterior.sizes["chain"] == 1
    assert idata.warmup_posterior.sizes["draw"] == 1000
    assert idata.posterior.sizes["draw"] == 4000
    x = np.asarray(idata.posterior["x"].sel(chain=0).values)
    np.testing.assert_array_less(np.abs(x.mean(axis=0) - mu), unc / 10)
    np.testing.assert_array_less(np.abs(x.std(axis=0) - unc), unc / 10)

    curr_state = step.sampling_state
    assert not equal_sampling_states(orig_state, curr_state)
    orig_step.sampling_state = curr_state
    assert equal_sampling_states(orig_step.sampling_state, curr_state)
    assert orig_step.sampling_state is not curr_state


# ----------------------------------------------------------------------------- counted
@pytest.fixture(scope="module")
def counted():
    """A correlated 3-d Gaussian whose log density counts its evaluations."""
    with pm.Model() as model:
        pm.MvNormal("x", pt.constant(np.zeros(3)), cov=pt.constant(mv_simple_cov()))
    add_counter(model)
    return model


def run(step, point, draws: int, stop_at: int | None = None):
    """``draws`` calls of ``step.step`` from ``point`` (``stop_tuning`` before draw
    ``stop_at``); the points visited."""
    visited = []
    for i in range(draws):
        if i == stop_at:
            step.stop_tuning()
        point, _ = step.step(point)
        visited.append({k: v.copy() for k, v in point.items()})
    return point, visited


#: where the state is saved: draws stepped before it, and whether tuning has stopped then
MOMENTS = {"first draw": (0, False), "warm-up": (20, False), "kernel tuning": (60, False),
           "after tuning": (90, True)}


@pytest.mark.parametrize(("name", "screen"), CASES, ids=IDS)
def test_restore_reproduces_true_evaluations(name, screen, counted):
    """Save at each moment and step on (through the end of tuning where it comes); restore
    and step again: the same draws, the same state and the same number of true
    evaluations, counted by the Op in the model and by the chain."""
    op = find_counter(counted)
    with counted:
        step = STEPS[name](screen=screen, warmup_draws=40, rng=np.random.default_rng(5))
    point, done = counted.initial_point(), 0
    for label, (at, tuned) in MOMENTS.items():
        point, _ = run(step, point, at - done)
        done = at
        if tuned:
            step.stop_tuning()
        saved = step.sampling_state
        runs = []
        for restore in (False, True):
            if restore:
                step.sampling_state = saved
            op.reset()
            before = n_evals(step)
            _, visited = run(step, point, 20, stop_at=None if tuned else 10)
            runs.append((op.count, n_evals(step) - before, step.sampling_state, visited))
        (count1, chain1, state1, draws1), (count2, chain2, state2, draws2) = runs
        assert count1 == chain1, f"{label}: the chain's count misses evaluations"
        assert (count2, chain2) == (count1, chain1), label
        assert equal_sampling_states(state2, state1), label
        for a, b in zip(draws1, draws2, strict=True):
            np.testing.assert_array_equal(a["x"], b["x"], err_msg=label)
        step.sampling_state = saved  # on from the saved moment


@pytest.fixture(scope="module")
def counted_normal():
    """A standard normal in 3-d whose log density counts its evaluations."""
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, size=3)
    add_counter(model)
    return model


@pytest.mark.parametrize("name", list(STEPS))
def test_restore_keeps_the_value_another_step_stored(name, counted_normal):
    """A first draw that finds its point's value stored by another step of the model
    evaluates once less; restoring the state saved before it finds the value again (the
    stored value is part of the state), so the restored draw evaluates as often."""
    model = counted_normal
    ip = model.initial_point()
    start = ip["x"].astype(float)

    def stays_put(logp):  # every proposal rejected: the other step leaves its start stored
        return lambda x: logp(x) if np.array_equal(x, start) else np.array(-np.inf)

    with model:
        other = RandomWalkStep(logp_wrapper=stays_put, laplace=False, rng=1)
        step = STEPS[name](laplace=False, n_steps=10, rng=2)
    other.step(ip)
    op = find_counter(model)
    saved = step.sampling_state
    op.reset()
    moved, _ = step.step(ip)
    first, final = op.count, step.sampling_state
    assert not np.array_equal(moved["x"], ip["x"])  # the store now holds another point
    step.sampling_state = saved
    op.reset()
    step.step(ip)
    assert op.count == first
    assert equal_sampling_states(step.sampling_state, final)
