"""Bad input and PyMC's contract: NaN log densities, failing estimators, integral
arguments, the noise probe at the start, a bad initial point with ``cores=2``, and the tuned
``scaling`` at the end of tuning."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from checks import BACKENDS, SAMPLERS, sample
from pymc.exceptions import SamplingError
from pymc.sampling.parallel import ParallelSamplingError
from pymc.step_methods.compound import BlockedStep
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_kameleon import (
    FastKameleonStep,
    KameleonStep,
    RandomWalkStep,
    pseudo_marginal_potential,
)
from pymc_kameleon.adaptation.independence import EmulatorMoves
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.emulator import EmulatorSettings
from pymc_kameleon.smc.kernel import emulator_settings
from pymc_kameleon.steps.evaluations import LogDensityError, StartError
from pymc_kameleon.validation import check_integral

#: PyMC >= 6 tells a step the chain's length (``setup_chain``); PyMC 5 does not.
TELLS_CHAIN_LENGTH = hasattr(BlockedStep, "setup_chain")
_QUIET = {"progressbar": False, "compute_convergence_checks": False}


def _stats(idata, name: str) -> np.ndarray:
    """A stat over tuning and posterior draws (``discard_tuned_samples=False``)."""
    parts = [group_dataset(idata, g)[name].values.ravel()
             for g in ("warmup_sample_stats", "sample_stats")]
    return np.concatenate(parts)


def _reports(idata) -> list:
    """The ``SamplerWarning`` objects of the ``warning`` stat (``keep_warning_stat=True``)."""
    return [w for w in _stats(idata, "warning") if w is not None]


def _run(model, step_factory, **kwargs):
    return sample(model, step_factory, draws=100, tune=150, chains=1, seed=3,
                  discard_tuned_samples=False, keep_warning_stat=True, **kwargs)


@pytest.fixture(scope="module")
def nan_above_one():
    """N(0, 1) whose log density is NaN for x > 1 (e.g. a solver failing there)."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("solver", pt.switch(x > 1.0, np.nan, 0.0))
    return model


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_nan_log_density_is_counted_and_reported(name, nan_above_one):
    idata = _run(nan_above_one, lambda: SAMPLERS[name](warmup_draws=50))  # kernel too
    n_nan = _stats(idata, "n_nan")
    assert n_nan.dtype.kind == "i" and n_nan.sum() > 0
    assert (_stats(idata, "n_errors") == 0).all()
    assert np.all(idata.posterior["x"].values <= 1.0)  # still rejections
    [report] = _reports(idata)  # once per chain
    assert "NaN at" in report.message and "this chain" in report.message
    # at the chain's end when PyMC says when that is (6), else at the first NaN (5)
    assert report.extra["n_nan"] == (n_nan.sum() if TELLS_CHAIN_LENGTH else n_nan[0])
    assert 1.0 < report.extra["lo"][0] <= report.extra["hi"][0]  # where: the box


def test_minus_inf_stays_a_silent_rejection():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("cut", pt.switch(x > 1.0, -np.inf, 0.0))
    idata = _run(model, RandomWalkStep)
    assert _stats(idata, "n_nan").sum() == 0 and _reports(idata) == []
    assert np.all(idata.posterior["x"].values <= 1.0)


def _nan_estimator(mu, rng):
    """log N(1 | mu, 1) plus log-normal noise, NaN with probability 0.3 where mu > 0.5."""
    if mu > 0.5 and rng.uniform() < 0.3:
        return np.nan
    return -0.5 * (1.0 - mu) ** 2 + 0.3 * rng.normal() - 0.045


def test_nan_estimates_are_counted_and_reported():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pseudo_marginal_potential("lik", _nan_estimator, mu)
    idata = _run(model, KameleonStep)
    assert _stats(idata, "n_nan").sum() > 0
    [report] = _reports(idata)
    assert "NaN at" in report.message and report.extra["lo"][0] > 0.5


class Flaky:
    """An estimator that raises on about ``p`` of its calls; counts its calls."""

    def __init__(self, p: float = 0.01):
        self.p, self.calls = p, 0

    def __call__(self, mu, rng):
        self.calls += 1
        if rng.uniform() < self.p:
            raise FloatingPointError("the particle filter lost every particle")
        return -0.5 * (1.0 - mu) ** 2 + 0.3 * rng.normal() - 0.045


@pytest.mark.parametrize("mode", BACKENDS)
def test_a_raising_estimator_names_draw_chain_and_point(mode):
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        pseudo_marginal_potential("lik", Flaky(), mu)
        step = RandomWalkStep(compile_kwargs={"mode": mode})
        with pytest.raises(LogDensityError) as info:
            pm.sample(draws=300, tune=300, chains=1, step=step, random_seed=1, **_QUIET)
    message = str(info.value)
    assert isinstance(info.value, SamplingError)
    assert "at draw" in message and "of this chain" in message and "{mu:" in message
    assert "on_error='reject'" in message
    # the user's exception is the cause (PyTensor re-raises it with the same type)
    assert isinstance(info.value.__cause__, FloatingPointError)
    assert "lost every particle" in str(info.value.__cause__)


@pytest.mark.parametrize("mode", BACKENDS)
def test_on_error_reject_counts_failures_as_rejections(mode):
    flaky = Flaky()
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pseudo_marginal_potential("lik", flaky, mu)
    idata = _run(model, lambda: RandomWalkStep(on_error="reject",
                                               compile_kwargs={"mode": mode}))
    n_errors = _stats(idata, "n_errors")
    assert n_errors.sum() > 0 and len(idata.posterior.draw) == 100
    [report] = _reports(idata)
    assert "an exception at" in report.message and "lost every particle" in report.message
    # every call is one counted evaluation: none repeated at the current point
    assert flaky.calls == _stats(idata, "n_evals").sum()


def test_on_error_is_validated():
    with pm.Model():
        pm.Normal("x")
        with pytest.raises(ValueError, match="on_error"):
            RandomWalkStep(on_error="ignore")


# ----------------------------------------------------------------------- integral arguments
@pytest.mark.parametrize("value, error", [
    (True, TypeError), (float("nan"), ValueError), (float("inf"), ValueError),
    (2.5, ValueError), (0, ValueError), ("3", TypeError), (None, TypeError),
])
def test_check_integral(value, error):
    with pytest.raises(error, match="n_steps must be an integer >= 1"):
        check_integral("n_steps", value)


def test_check_integral_accepts_integral_numbers():
    assert check_integral("n", np.int64(3)) == 3 and check_integral("n", 4.0) == 4


@pytest.mark.parametrize("cls, kwargs, name, error", [
    (RandomWalkStep, {"n_steps": True}, "n_steps", TypeError),
    (RandomWalkStep, {"n_steps": float("nan")}, "n_steps", ValueError),
    (KameleonStep, {"warmup_draws": np.True_}, "warmup_draws", TypeError),
    (KameleonStep, {"warmup_draws": 10.5}, "warmup_draws", ValueError),
    (KameleonStep, {"n_history": True}, "n_history", TypeError),
    (FastKameleonStep, {"n_features": float("nan")}, "n_features", ValueError),
    (FastKameleonStep, {"n_bandwidth": False}, "n_bandwidth", TypeError),
])
def test_integral_step_arguments_are_checked(cls, kwargs, name, error):
    with pm.Model():
        pm.Normal("x", shape=2)
        with pytest.raises(error, match=name):
            cls(**kwargs)


# ----------------------------------------------------------------------- emulator settings
@pytest.mark.parametrize("kwargs, name, error", [
    ({"batch": 0}, "batch", ValueError),
    ({"search_starts": True}, "search_starts", TypeError),
    ({"max_rounds": 2}, "max_rounds", ValueError),  # below min_rounds=3
    ({"settle": float("nan")}, "settle", ValueError),
    ({"tail_probe": -1.0}, "tail_probe", ValueError),
    ({"target_ess": float("nan")}, "target_ess", ValueError),
    ({"defensive_weight": 1.0}, "defensive_weight", ValueError),
    ({"global_weight": 1.5}, "global_weight", ValueError),
    ({"mean_df": 0.0}, "mean_df", ValueError),
    ({"widen": "2"}, "widen", ValueError),
    ({"keep_draws": 1}, "keep_draws", TypeError),
])
def test_emulator_settings_are_checked(kwargs, name, error):
    """A bad field is an error naming it when the settings are made (before any true
    evaluation), also through ``KameleonSMC``'s dict form."""
    with pytest.raises(error, match=name):
        EmulatorSettings(**kwargs)
    with pytest.raises(error, match=name):
        emulator_settings(kwargs)


def test_emulator_settings_keep_their_open_and_limit_values():
    """None (a front end's default), infinity and zero where they mean something (the
    tests' "never settles" and "settles at once"), and integral floats as ints."""
    s = EmulatorSettings(settle=math.inf, window=math.inf, n_initial=10.0, tail_probe=0)
    assert s.settle == math.inf and s.n_initial == 10 and isinstance(s.n_initial, int)
    assert EmulatorSettings(settle=0.0).defensive_weight is None


@pytest.mark.parametrize("kwargs, name, error", [
    ({"weight": 1.5}, "weight", ValueError),
    ({"min_accept": -0.1}, "min_accept", ValueError),
    ({"trial": 1}, "trial", ValueError),
    ({"posterior_draws": 10.5}, "posterior_draws", ValueError),
    ({"delayed": "yes"}, "delayed", TypeError),
    ({"settings": {"batch": 3}}, "settings", TypeError),
])
def test_emulator_moves_are_checked(kwargs, name, error):
    with pytest.raises(error, match=name):
        EmulatorMoves(**kwargs)


# ----------------------------------------------------------------------- the noise probe
class RepeatsTwice:
    """Deterministic-looking: the first two values are equal, then noise."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        noise = 0.0 if self.calls <= 2 else np.random.default_rng(self.calls).normal()
        return np.asarray(-0.5 * float(x) ** 2 + noise)


def _skips_laplace(step, point) -> bool:
    """Whether the step's first draw took its log density for noisy: no Laplace start
    (finite differences of noise), so the draw spends only the start's evaluations (two,
    and the five of the noise check of a density that looked deterministic: "seven against
    the Laplace start's hundreds", docs/robustness.md) and one per iteration."""
    _, stats = step.step(point)
    return stats[0]["laplace_start"] == -1 and stats[0]["n_evals"] <= 7 + step.n_steps


def _probe(logp_of_x, **kwargs) -> bool:
    """Whether the step takes its log density for noisy after the first draw."""
    with pm.Model():
        x = pm.Normal("x", 0.0, 10.0)
        pm.Potential("lik", logp_of_x(x))
        step = RandomWalkStep(**kwargs)
    return _skips_laplace(step, {"x": np.array(0.3)})


class RepeatsTwiceOp(Op):
    """A Python Op (not an estimator the package knows) around :class:`RepeatsTwice`."""

    def __init__(self):
        self.fn = RepeatsTwice()

    def make_node(self, x):
        return Apply(self, [pt.as_tensor_variable(x)], [pt.dscalar()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = self.fn(inputs[0])


def test_the_noise_probe_is_not_fooled_by_two_equal_values():
    op = RepeatsTwiceOp()
    assert _probe(op, compile_kwargs={"mode": "FAST_COMPILE"})
    assert op.fn.calls > 2
    assert not _probe(lambda x: -0.5 * x**2)  # a deterministic density stays one


def test_an_estimator_is_noisy_by_construction():
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        # the same estimate every time: still an estimator (the package knows it)
        pseudo_marginal_potential("lik", lambda mu, rng: -0.5 * mu**2, mu)
        step = RandomWalkStep()
    assert _skips_laplace(step, {"mu": np.array(0.1)})


# ----------------------------------------------------------------------- bad initial point
#: PyMC's ``test_bad_init_parallel`` model: the initval -1 is outside HalfNormal's support.
#: Per chain: chain 0 starts well, chain 1 does not (the model's initval is then 0.5).
BAD_INIT = {"model": (-1.0, None), "per-chain initvals": (0.5, [{"a": 0.5}, {"a": -1.0}])}


@pytest.mark.parametrize("where", list(BAD_INIT))
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_bad_initial_point_with_two_cores_is_a_sampling_error(name, where):
    """PyMC's ``test_bad_init_parallel`` with our step as ``step=``: what PyMC raises for a
    ``SamplingError`` of a chain's process (``pm.NUTS``' too), its ``ParallelSamplingError``
    naming the chain, from our :class:`StartError` with PyMC's message: the starting values
    and the terms whose log density is not finite."""
    initval, initvals = BAD_INIT[where]
    with pm.Model():
        pm.HalfNormal("a", sigma=1, initval=initval, default_transform=None)
        step = SAMPLERS[name]()
        with pytest.raises(ParallelSamplingError, match="Initial evaluation") as info:
            pm.sample(draws=20, tune=20, chains=2, cores=2, step=step, random_seed=1,
                      initvals=initvals, **_QUIET)
    error = info.value.__cause__
    assert type(error) is StartError and isinstance(error, SamplingError)
    message = str(error)
    assert "{'a': array(-1.)}" in message and "{'a': " in message.split("Logp")[1]
    assert "-inf" in message.split("Logp")[1]
    if initvals is not None:  # PyMC's wrapper names the chain
        assert str(info.value).startswith("Chain 1 failed with: ")
    # the chain process's traceback comes along, as PyMC attaches it
    assert "_raise_bad_start" in str(error.__cause__)


def test_a_start_error_pickles_as_an_exception():
    """A pickled copy (PyMC's pipe from a chain's process, a Dask client) is the same
    ordinary exception: nothing raises while it is unpickled."""
    error = StartError("Initial evaluation of model at starting point failed!")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is StartError and copy.args == error.args


# ----------------------------------------------------------------------- tuned scaling
@pytest.mark.parametrize("cls", [KameleonStep, FastKameleonStep])
def test_tuned_scaling_of_the_last_tuning_draw_is_the_one_in_use(cls):
    """PyMC's ``test_tuning_reset`` pattern: the last tuning draw reports the value every
    later draw uses.  tune=400 on PyMC 5 (the step plans for 1000 tuning draws) cuts the
    gamma trials short, the case where the choice at ``stop_tuning`` changed the value
    unreported."""
    with pm.Model() as model:
        pm.Normal("x", 0.0, 2.0, shape=3)
    idata = sample(model, lambda: cls(warmup_draws=300), draws=50, tune=400, chains=1,
                   seed=1, discard_tuned_samples=False)
    for stat in ("scaling", "gamma"):
        tuning = group_dataset(idata, "warmup_sample_stats")[stat].values.ravel()
        after = group_dataset(idata, "sample_stats")[stat].values.ravel()
        assert np.all(after == after[0]), stat
        assert math.isclose(tuning[-1], after[0]), (stat, tuning[-1], after[0])
