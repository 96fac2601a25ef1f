"""PyMC's step-method contract, held for every step of the package.

Each test is parametrised over our steps (RandomWalkStep, KameleonStep, FastKameleonStep,
KernelHMCStep lite and finite) and over ``pm.Metropolis`` as a *reference* entry: PyMC's own
step must pass every check that applies to it, which is how the checks themselves were
verified.  The checks come from PyMC's own tests (read for PyMC 5.28 / 6.x):

``tests/step_methods/test_metropolis.py``
    * ``test_tuning_reset`` (and DEMetropolisZ ``test_tuning_lambda_sequential``,
      ``test_tuning_epsilon_parallel``): first warm-up value of the tuning stat equals the
      initial value in every chain, the last warm-up value differs, every posterior draw
      reports the last warm-up value; ``cores=1`` (one step object reused) and ``cores=2``
      -> :func:`test_tuning_stat_convention`, :func:`test_tuning_stat_convention_parallel`.
    * ``TestStepMetropolis.test_step_continuous`` -> ``StepMethodTester`` below.
    * ``TestRVsAssignmentMetropolis.test_continuous_steps`` -> :func:`test_rvs_assignment`.
    * ``test_demcmc_tune_parameter`` / ``test_invalid_tune`` / ``test_competence``: competence
      is covered by ``test_step_contract.py``; the ``tune=`` argument of DEMetropolis does
      not exist here (our steps always adapt while PyMC tunes).
    * Not applicable: ``test_proposal_choice`` / ``test_mv_proposal`` (Metropolis' proposal
      classes), ``test_elemwise_update*`` and ``test_multinomial_no_elemwise_update``
      (element-wise acceptance of batched *discrete* variables: our steps refuse discrete
      variables; the batched continuous case is the 80-d Dirichlet below),
      ``test_step_discrete`` / ``test_step_categorical`` (discrete targets),
      ``test_tune_drop_fraction`` (DEMetropolisZ history), ``TestMetropolisUniform``
      (its 50 000-draw budget; the Uniform-like ``non_normal`` / Beta targets are here).
``tests/step_methods/test_compound.py``
    * ``test_non_blocked`` / ``test_blocked`` / ``test_name`` / ``test_stats_from_steps`` /
      ``test_all_stepmethods_emit_tune_stat`` -> :func:`test_blocked_false_builds_compound`,
      :func:`test_blocked_true_and_names`.
    * ``TestStepCompound.test_step_continuous`` (a CompoundStep of a blocked and a
      non-blocked step) -> :func:`test_compound_sampling_state_round_trip` and the
      blocked=False sampling test.
    * Not applicable: ``TestStatsMetadata.test_infer_warn_stats_info`` and
      ``TestStatsBijection`` (PyMC internals, independent of the step).
``tests/step_methods/test_state.py``
    * ``test_sampling_state_rng`` (default_rng, default_rng(1), Philox) ->
      :func:`test_sampling_state_round_trip`; ``test_sampling_state`` /
      ``test_dataclass_state_eq`` -> :func:`test_sampling_state_is_a_pymc_dataclass_state`
      (the frozen-field error is PyMC's own code once the state is a DataClassState).
``tests/helpers.py``
    * ``StepMethodTester.step_continuous`` (state save/restore, deepcopy, pm.sample on
      ``mv_simple`` with warm-up and posterior sizes, stats dtypes, state changed by
      sampling) -> :func:`test_sampling_state_round_trip`, :func:`test_stats_and_dtypes`,
      :func:`test_mv_simple_ill_conditioned` (slow) and :func:`test_small_pymc_models`.
      PyMC's fixed tolerance (``sd / 10`` from one chain) is replaced by a tolerance from
      the ESS (``5 sd / sqrt(ESS)``), since our steps' ESS differs from Metropolis with the
      true covariance that PyMC gives it (``S=C``).
    * ``RVsAssignmentStepsTester.continuous_steps`` -> :func:`test_rvs_assignment`.
``tests/sampling/test_mcmc.py``
    * ``test_parallel_start`` -> :func:`test_each_chain_starts_at_its_initvals` (no state
      leaks from one chain into the next when the step object is reused with cores=1).
    * ``test_sample_does_not_rely_on_external_global_seeding`` /
      ``test_default_sample_does_not_set_global_seed`` ->
      :func:`test_no_global_numpy_seeding`.
    * ``test_random_seed`` (same seed, same draws; cores=1 equals cores=2) ->
      :func:`test_pm_sample_reproducible_after_state_restore`.
    * ``TestType.test_float32`` -> :func:`test_float32_model`.
    * ``test_reset_tuning`` (the NUTS version checks adaptation counters) ->
      :func:`test_reset_tuning_restores_initial_value`, :func:`test_reused_step_tunes_again`.
    * ``TestSampleReturn.test_sample_return_lengths`` -> warm-up/posterior sizes in
      :func:`test_tuning_stat_convention`.
    * Not applicable (PyMC machinery that never calls into the step differently, or NUTS
      only): ``TestInitNuts``, ``test_sample_init``, ``test_exec_nuts_init``,
      ``test_init_jitter``, ``test_step_args`` (``nuts=`` / ``target_accept``),
      ``test_sample_args``, ``test_sample_start_*_shape``, ``test_sample_callback`` /
      ``test_callback_can_cancel`` (callbacks are used throughout this module),
      ``test_sequential_backend``, deterministics and transforms with RV dependencies,
      warning-stat logging (our steps emit no ``warning`` stat), ``test_empty_model``,
      ``test_blas_cores``, var_names / partial traces, ``TestAssignStepMethods`` (our steps
      are not in ``pm.STEP_METHODS``), shared variables, quiet mode, nutpie selection.
``tests/sampling/test_parallel.py``
    * ``test_context`` (``mp_ctx="spawn"`` pickles the step) -> :func:`test_pickle_round_trip`
      (cloudpickle round trip, same state and draws) and :func:`test_spawn_context` (slow).
    * Not applicable: ``test_bad_unpickle``, ``test_remote_pipe_closed``, ``test_abort``,
      ``test_explicit_sample``, ``test_iterator`` and the CustomDist spawn tests exercise
      ``ProcessAdapter`` / ``ParallelSampler`` plumbing, which treats every step alike;
      ``cores=2`` runs below go through that plumbing with our steps.

The contract's points and where they are held: (1) blocked=False -> ``test_blocked_false_*``;
(2) DataClassState -> ``test_sampling_state_*``, ``test_compound_sampling_state_round_trip``,
``test_pm_sample_reproducible_after_state_restore``; (3) stats -> ``test_tuning_stat_*``,
``test_reset_tuning_*``, ``test_reused_step_tunes_again``, ``test_stats_and_dtypes``;
(4) bad start -> ``test_zero_probability_start_*``; (5)-(7) -> the ``slow`` tests
``test_batched_dirichlet_80d``, ``test_mv_simple_ill_conditioned``, and
``test_small_pymc_models``.

Semantic choices (where the issue is silent, PyMC's own behaviour decides):

* The bad-start reference: **pm.Metropolis raises nothing** at a zero-probability start
  (PyMC 5.28.5 and 6.4.0: it stays at the start forever, every proposal is rejected because
  ``delta = logp(x*) - (-inf)`` is not finite).  The reference class is therefore taken from
  the first of ``pm.Metropolis``, ``pm.NUTS`` that raises in the same situation: pm.NUTS
  raises ``SamplingError`` at its first step (cores=1) and, with cores=2,
  ``ParallelSamplingError`` whose ``__cause__`` is that ``SamplingError`` (PyMC's parallel
  sampler forwards a ``SamplingError`` raised inside a chain this way).  Ours raise the
  same, before any draw is recorded (see
  ``test_bad_initial_point_with_two_cores_is_a_sampling_error`` in ``test_bad_input.py``).
* ``reset_tuning`` must set ``tune = True`` for our steps (pm.Metropolis' does not; pm.sample
  sets ``step.tune`` itself before calling it).
* ``n_evals`` is a per-draw integer stat of our steps (not of pm.Metropolis).
* Budgets of the hard targets: pm.Metropolis misses R-hat <= 1.01 at pm.sample's defaults
  on both (see ``DIRICHLET_BUDGET`` / ``MV_SIMPLE_BUDGET``): mv_simple gets the 3000 draws
  pm.Metropolis needs; the 80-d Dirichlet keeps the defaults and must do at least as well
  as pm.Metropolis (max R-hat <= max(1.01, Metropolis' max R-hat)).  Means and variances
  are checked per coordinate against the exact posterior with ``|z| < 5`` from the ESS and
  an ESS floor of 100 (50 for the Dirichlet, where pm.Metropolis' smallest ESS is 83).
* Checks of our steps that pm.Metropolis is exempt from: ``accept`` in [0, 1] (Metropolis
  reports the unclipped ratio), ``accepted`` a multiple of ``1 / n_steps`` (its element-wise
  update reports another fraction), a ``tune`` stat (5.28's Metropolis has none), the
  bad-start error.

Failures on code that does not honour the contract are reported as assertion failures
(``contract(...)`` turns an exception raised by the step into ``pytest.fail``), never as
errors of this module.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import unittest.mock as mock
import warnings
from dataclasses import dataclass, field, fields, is_dataclass

import arviz as az
import cloudpickle
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.exceptions import SamplingError
from pymc.step_methods.compound import CompoundStep, get_stats_dtypes_shapes_from_steps
from pymc.step_methods.state import DataClassState, equal_dataclass_values
from pymc_reference_models import SMALL_MODELS, batched_dirichlet, mv_simple

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep

logging.getLogger("pymc").setLevel(logging.ERROR)

SEED = 20


# ----------------------------------------------------------------------------- entries
@dataclass(frozen=True)
class Entry:
    """One step under test: class, fixed kwargs, tuning stat and its initial-value kwarg."""

    cls: type
    stat: str
    init_kwarg: str
    init_value: float
    kwargs: dict = field(default_factory=dict)
    ours: bool = True

    def __call__(self, *args, with_init=True, **kwargs):
        extra = {self.init_kwarg: self.init_value} if with_init else {}
        return self.cls(*args, **{**self.kwargs, **extra, **kwargs})


ENTRIES = {
    "RandomWalkStep": Entry(RandomWalkStep, "scaling", "scale", 0.1),
    "KameleonStep": Entry(KameleonStep, "scaling", "nu2", 0.5),
    "FastKameleonStep": Entry(FastKameleonStep, "scaling", "eta2", 0.5),
    # shorter trajectories than the default keep the module fast (tests/checks.py does too)
    "KernelHMCStep-lite": Entry(KernelHMCStep, "step_size", "step_size", 0.1,
                                {"surrogate": "lite", "n_leapfrog": (5, 20)}),
    "KernelHMCStep-finite": Entry(KernelHMCStep, "step_size", "step_size", 0.1,
                                  {"surrogate": "finite", "n_leapfrog": (5, 20)}),
    "pm.Metropolis": Entry(pm.Metropolis, "scaling", "scaling", 0.1, ours=False),
}
OURS = [k for k, e in ENTRIES.items() if e.ours]


@pytest.fixture(params=list(ENTRIES), scope="module")
def entry(request) -> Entry:
    return ENTRIES[request.param]


@pytest.fixture(params=OURS, scope="module")
def ours(request) -> Entry:
    return ENTRIES[request.param]


# ----------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def contract(what: str):
    """Report an exception raised by the step under test as a contract failure."""
    try:
        yield
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001 - every exception here is a broken contract
        pytest.fail(f"contract: {what} raised {type(exc).__name__}: {exc}", pytrace=False)


class Outcome:
    """Result of a module-scoped run, or the exception it raised (reported by ``get``)."""

    def __init__(self, fn, what: str):
        self.what = what
        try:
            self.value, self.error = fn(), None
        except Exception as exc:  # noqa: BLE001
            self.value, self.error = None, exc

    def get(self):
        if self.error is not None:
            pytest.fail(f"contract: {self.what} raised {type(self.error).__name__}: "
                        f"{self.error}", pytrace=False)
        return self.value


def short_warmup(entry) -> dict:
    """Our steps tune their own values after the warm-up (500 draws with PyMC 5): the tests of
    the tuning-stat convention run a few hundred tuning draws, so they shorten it."""
    return {"warmup_draws": 100} if entry.ours else {}


def quiet_sample(**kwargs):
    kwargs = {"progressbar": False, "compute_convergence_checks": False, **kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pm.sample(**kwargs)


def values(group, name) -> np.ndarray:
    """``idata.<group>[name]`` as a NumPy array (InferenceData and ArviZ 1 DataTree)."""
    return np.asarray(group[name].values)


def run_steps(step, point, n_tune: int, n_draws: int):
    """Call ``step.step`` like ``pm.sample`` does; return the last point and the record."""
    record = []
    for i in range(n_tune + n_draws):
        if i == n_tune:
            step.stop_tuning()
        point, stats = step.step(point)
        record.append(({k: np.array(v, copy=True) for k, v in point.items()},
                       copy.deepcopy(stats)))
    return point, record


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fciub" and b.dtype.kind in "fciub":
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    return bool(np.all(a == b))


def assert_same_record(r1, r2):
    assert len(r1) == len(r2)
    for i, ((p1, s1), (p2, s2)) in enumerate(zip(r1, r2, strict=True)):
        assert _same(p1, p2), f"draw {i} differs after restoring the sampling state"
        assert _same(s1, s2), f"stats of draw {i} differ after restoring the sampling state"


def states_equal(s1, s2) -> bool:
    with contract("pymc.step_methods.state.equal_dataclass_values on the sampling state"):
        return equal_dataclass_values(s1, s2)


def non_pymc_dataclasses(value, path="state") -> list[str]:
    """Paths of dataclass instances inside ``value`` that are not PyMC DataClassStates."""
    found = []
    if isinstance(value, DataClassState):
        for f in fields(value):
            found += non_pymc_dataclasses(getattr(value, f.name), f"{path}.{f.name}")
    elif is_dataclass(value) and not isinstance(value, type):
        found.append(f"{path} ({type(value).__name__})")
    elif isinstance(value, dict):
        for k, v in value.items():
            found += non_pymc_dataclasses(v, f"{path}[{k!r}]")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found += non_pymc_dataclasses(v, f"{path}[{i}]")
    return found


def moment_z(x: np.ndarray, mean, var):
    """Per-coordinate z-scores of the sample mean and variance of ``x`` (chain, draw, ...)
    with standard errors ``sd / sqrt(ESS)`` and ``sd((x - m)^2) / sqrt(ESS_2)``; and ESS."""
    chains, draws = x.shape[:2]
    flat = x.reshape(chains, draws, -1)
    mean = np.broadcast_to(mean, x.shape[2:]).ravel()
    var = np.broadcast_to(var, x.shape[2:]).ravel()
    z_mean, z_var, ess = [], [], []
    for j in range(flat.shape[-1]):
        xj = flat[..., j]
        sq = (xj - mean[j]) ** 2
        e1, e2 = float(az.ess(xj)), float(az.ess(sq))
        z_mean.append((xj.mean() - mean[j]) / np.sqrt(var[j] / e1))
        z_var.append((sq.mean() - var[j]) / (sq.std() / np.sqrt(e2)))
        ess.append(e1)
    return np.array(z_mean), np.array(z_var), np.array(ess)


def max_rhat(x: np.ndarray) -> float:
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    return max(float(az.rhat(flat[..., j])) for j in range(flat.shape[-1]))


def check_moments(x, mean, var, *, z_max=5.0, z_var_max=None, min_ess=100.0, label=""):
    z_mean, z_var, ess = moment_z(x, mean, var)
    z_var_max = z_max if z_var_max is None else z_var_max
    assert ess.min() >= min_ess, f"{label}: ESS {ess.min():.0f} < {min_ess}"
    assert np.abs(z_mean).max() < z_max, f"{label}: mean z-scores {np.round(z_mean, 1)}"
    assert np.abs(z_var).max() < z_var_max, f"{label}: variance z-scores {np.round(z_var, 1)}"


# ----------------------------------------------------------------------------- models
@pytest.fixture(scope="module")
def normal3():
    """``n ~ N(0, 2)``, size 3: the model of PyMC's ``test_tuning_reset``."""
    with pm.Model() as model:
        pm.Normal("n", 0.0, 2.0, size=3)
    return model


@pytest.fixture(scope="module")
def two_blocks():
    """Two continuous variables on scales 100x apart and a discrete one."""
    with pm.Model() as model:
        pm.Normal("x", 1.0, 10.0, shape=2)
        pm.Normal("y", -1.0, 0.1)
        pm.Poisson("k", 3.0)
    return model


TWO_BLOCKS_TRUTH = {"x": (1.0, 100.0), "y": (-1.0, 0.01), "k": (3.0, 3.0)}


# ============================================================================ (1) blocked
def test_blocked_false_builds_compound(entry, two_blocks):
    with two_blocks, contract(f"{entry.cls.__name__}([x, y], blocked=False)"):
        step = entry([two_blocks["x"], two_blocks["y"]], blocked=False)
    assert isinstance(step, CompoundStep)
    assert len(step.methods) == 2
    assert all(type(m) is entry.cls for m in step.methods)
    assert [m.vars for m in step.methods] == [[two_blocks.rvs_to_values[two_blocks["x"]]],
                                              [two_blocks.rvs_to_values[two_blocks["y"]]]]
    sds = get_stats_dtypes_shapes_from_steps(step.methods)
    assert f"sampler_0__{entry.stat}" in sds and f"sampler_1__{entry.stat}" in sds
    # one variable and blocked=False: a single step, as in PyMC
    with two_blocks, contract(f"{entry.cls.__name__}([x], blocked=False)"):
        single = entry([two_blocks["x"]], blocked=False)
    assert type(single) is entry.cls


def test_blocked_false_without_vars_takes_the_continuous_variables(ours, two_blocks):
    """Without ``vars`` (or with ``vars=None``) ``blocked=False`` gives one step per
    continuous variable, as the default step samples them all jointly; PyMC's ``__new__``
    handed every value variable over, and the step refused the discrete ``k``."""
    values = [[two_blocks.rvs_to_values[two_blocks[n]]] for n in "xy"]
    with two_blocks:
        for step in (ours(blocked=False), ours(vars=None, blocked=False)):
            assert isinstance(step, CompoundStep)
            assert all(type(m) is ours.cls for m in step.methods)
            assert [m.vars for m in step.methods] == values
        assert ours(vars=None).vars == [v for [v] in values]


def test_blocked_true_and_names(entry, two_blocks):
    with two_blocks:
        step = entry([two_blocks["x"], two_blocks["y"]], blocked=True)
        other = entry([two_blocks["x"]])
    assert type(step) is entry.cls
    if entry.ours:  # PyMC's test_all_stepmethods_emit_tune_stat (5.28's Metropolis lacks it)
        assert "tune" in entry.cls.stats_dtypes_shapes
    assert entry.stat in entry.cls.stats_dtypes_shapes
    assert isinstance(step.name, str) and step.name
    assert CompoundStep([other, pm.Metropolis([two_blocks["k"]], model=two_blocks)]).name == (
        f"Compound[{step.name}, metropolis]")


def test_rvs_assignment(entry):
    with pm.Model() as m:
        c1 = pm.HalfNormal("c1")
        c2 = pm.HalfNormal("c2")
        assert entry([c1]).vars == [m.rvs_to_values[c1]]
        assert set(entry([c1, c2]).vars) == {m.rvs_to_values[c1], m.rvs_to_values[c2]}


@pytest.fixture(scope="module")
def blocked_false_run(entry, two_blocks):
    """pm.sample with per-variable steps (blocked=False) and pm.Metropolis for ``k``."""
    per_sampler = []

    def callback(trace, draw):
        if draw.chain == 0:
            per_sampler.append([dict(s) for s in draw.stats])

    def run():
        with two_blocks:
            step = [entry([two_blocks["x"], two_blocks["y"]], blocked=False),
                    pm.Metropolis([two_blocks["k"]])]
            idata = quiet_sample(tune=1000, draws=1000, chains=2, cores=2, step=step,
                                 random_seed=SEED, discard_tuned_samples=False,
                                 callback=callback)
        return idata, per_sampler

    return Outcome(run, f"pm.sample with {entry.cls.__name__}(blocked=False)")


def test_blocked_false_samples_correctly(blocked_false_run):
    idata, _ = blocked_false_run.get()
    post = idata.posterior
    for name, (mean, var) in TWO_BLOCKS_TRUTH.items():
        check_moments(values(post, name), mean, var, label=name)
    assert values(post, "k").dtype.kind == "i"


def test_blocked_false_adapts_each_variable(entry, blocked_false_run):
    """Each per-variable step has its own adaptation: x (sd 10) and y (sd 0.1) end with
    tuning values far apart, both changed from the common initial value."""
    _, per_sampler = blocked_false_run.get()
    assert len(per_sampler[0]) == 3  # two per-variable steps and pm.Metropolis
    first = [per_sampler[0][j][entry.stat] for j in (0, 1)]
    last_tuned = [per_sampler[999][j][entry.stat] for j in (0, 1)]
    assert first == [entry.init_value, entry.init_value]
    assert last_tuned[0] != entry.init_value and last_tuned[1] != entry.init_value
    if not entry.ours:
        assert last_tuned[0] > 10 * last_tuned[1], last_tuned


def test_blocked_false_learns_each_scale(ours, two_blocks):
    """Our steps tune dimensionless values in whitened coordinates; each per-variable step
    learns its own posterior scale in the warm-up: x (sd 10) against y (sd 0.1)."""
    with two_blocks, contract(f"{ours.cls.__name__}([x, y], blocked=False)"):
        step = ours([two_blocks["x"], two_blocks["y"]], blocked=False, warmup_draws=100)
        run_steps(step, two_blocks.initial_point(), 150, 0)
    sx, sy = (float(np.sqrt(np.mean(np.diag(m.preconditioner.cov)))) for m in step.methods)
    assert 30 < sx / sy < 300, (sx, sy)


# ============================================================================ (2) state
def test_sampling_state_is_a_pymc_dataclass_state(entry, normal3):
    with normal3:
        step = entry(rng=1)
    point = normal3.initial_point()
    with contract("sampling_state"):
        s0 = step.sampling_state
    assert isinstance(s0, DataClassState)
    assert non_pymc_dataclasses(s0) == [], "state pieces that are plain dataclasses"
    assert states_equal(s0, step.sampling_state)
    with contract("step.step"):
        run_steps(step, point, 120, 0)
    s1 = step.sampling_state
    assert non_pymc_dataclasses(s1) == [], "state pieces that are plain dataclasses"
    assert not states_equal(s0, s1)
    assert states_equal(s1, copy.deepcopy(s1))


RNGS = {
    "default_rng": lambda: None,
    "default_rng(1)": lambda: 1,
    "philox": lambda: np.random.Generator(np.random.Philox(1)),
}


def replay_from_saved_state(step, start):
    """Tune 230 draws, save the state, continue through stop_tuning, restore, replay.

    Asserts that the replay is bit-identical and ends in the same state; returns the saved
    state, the point it belongs to and the first continuation."""
    point, _ = run_steps(step, start, 230, 0)
    saved, saved_point = step.sampling_state, point
    _, run1 = run_steps(step, point, 30, 30)
    final = step.sampling_state
    step.sampling_state = saved
    _, run2 = run_steps(step, saved_point, 30, 30)
    assert_same_record(run1, run2)
    assert states_equal(step.sampling_state, final)
    assert not states_equal(saved, final)
    return saved, saved_point, run1


@pytest.mark.parametrize("rng", list(RNGS))
def test_sampling_state_round_trip(entry, normal3, rng):
    """Save the state while tuning, continue (through stop_tuning); restoring the state
    replays the continuation bit for bit, in the same object and in a deep copy taken before
    sampling (PyMC's StepMethodTester)."""
    with normal3:
        step = entry(rng=RNGS[rng]())
    fresh = copy.deepcopy(step)
    step.tune = True
    with contract("sampling_state round trip"):
        saved, saved_point, run1 = replay_from_saved_state(step, normal3.initial_point())
    with contract("setting a saved state on a deep copy"):
        fresh.sampling_state = saved
        assert states_equal(fresh.sampling_state, saved)
        assert fresh.sampling_state is not saved
        _, run3 = run_steps(fresh, saved_point, 30, 30)
    assert_same_record(run1, run3)


def test_compound_sampling_state_round_trip(entry, two_blocks):
    x, y, k = (two_blocks[n] for n in "xyk")
    with two_blocks:
        step = CompoundStep([entry([x], rng=1), entry([y], rng=2), pm.Metropolis([k], rng=3)])
    with contract("CompoundStep sampling_state round trip"):
        replay_from_saved_state(step, two_blocks.initial_point())


def test_pm_sample_reproducible_after_state_restore(entry, normal3):
    """Same seed and restored state give the same draws, cores=1 and cores=2 alike; another
    seed gives other draws (PyMC's test_random_seed with a reused step)."""
    with normal3:
        step = entry()
        saved = step.sampling_state
        kw = {"tune": 250, "draws": 50, "chains": 2, "step": step}
        with contract("pm.sample after restoring sampling_state"):
            a = values(quiet_sample(cores=1, random_seed=3, **kw).posterior, "n")
            step.sampling_state = saved
            b = values(quiet_sample(cores=1, random_seed=3, **kw).posterior, "n")
            step.sampling_state = saved
            c = values(quiet_sample(cores=2, random_seed=3, **kw).posterior, "n")
            d = values(quiet_sample(cores=1, random_seed=4, **kw).posterior, "n")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, d)


def test_pickle_round_trip(entry, normal3):
    """What ``mp_ctx="spawn"`` needs: the step survives cloudpickle with its state."""
    with normal3:
        step = entry(rng=5)
    point, _ = run_steps(step, normal3.initial_point(), 60, 0)
    with contract("cloudpickle round trip"):
        clone = cloudpickle.loads(cloudpickle.dumps(step))
        assert states_equal(clone.sampling_state, step.sampling_state)
        _, r1 = run_steps(step, point, 20, 0)
        _, r2 = run_steps(clone, point, 20, 0)
    assert_same_record(r1, r2)


# ============================================================================ (3) stats
@pytest.fixture(scope="module")
def tuning_run(entry, normal3):
    """PyMC's test_tuning_reset: one step object, cores=1, three chains, warm-up kept."""
    seen = []

    def callback(trace, draw):
        seen.append((draw.chain, draw.draw_idx, draw.tuning, dict(draw.stats[0])))

    def run():
        with normal3:
            step = entry(rng=SEED, **short_warmup(entry))
            idata = quiet_sample(tune=400, draws=200, step=step, cores=1, chains=3,
                                 discard_tuned_samples=False, random_seed=SEED,
                                 callback=callback)
        return step, idata, seen

    return Outcome(run, f"pm.sample with {entry.cls.__name__}")


def _assert_tuning_convention(entry, idata, chains):
    warm = values(idata.warmup_sample_stats, entry.stat)
    post = values(idata.sample_stats, entry.stat)
    assert warm.shape[0] == post.shape[0] == chains
    for c in range(chains):
        assert warm[c, 0] == entry.init_value, (
            f"chain {c}: first warm-up {entry.stat} {warm[c, 0]!r} != {entry.init_value!r}")
        tuned = warm[c, -1]
        assert tuned != entry.init_value, f"chain {c}: {entry.stat} was not tuned"
        assert np.isfinite(tuned), f"chain {c}: tuned {entry.stat} is {tuned}"
        np.testing.assert_array_equal(post[c], tuned, err_msg=f"chain {c}: not frozen at the "
                                      f"last warm-up value")


def test_tuning_stat_convention(entry, tuning_run):
    _, idata, _ = tuning_run.get()
    assert idata.warmup_posterior.sizes["draw"] == 400
    assert idata.posterior.sizes["draw"] == 200
    _assert_tuning_convention(entry, idata, chains=3)


def test_tune_stat_true_in_warmup_only(entry, tuning_run):
    _, _, seen = tuning_run.get()
    assert len(seen) == 3 * 600
    for chain, i, tuning, stats in seen:
        assert tuning == (i < 400)
        if entry.ours or "tune" in stats:  # 5.28's pm.Metropolis emits no tune stat
            assert bool(stats["tune"]) is tuning, (chain, i)


def test_stats_and_dtypes(entry, tuning_run):
    step, idata, seen = tuning_run.get()
    ss = idata.sample_stats
    for name in ("accept", "accepted", entry.stat):
        assert name in ss, name
    accept = values(ss, "accept")
    assert np.all(accept >= 0)
    if entry.ours:  # pm.Metropolis reports the unclipped ratio exp(delta)
        assert np.all(accept <= 1)
    accepted = values(ss, "accepted")
    if entry.ours:  # the fraction of the draw's n_steps MH iterations that moved (chains
        n = values(ss, "n_steps")  # may differ: the work per draw is measured per chain)
        np.testing.assert_allclose(accepted * n, np.round(accepted * n), atol=1e-9)
    assert np.all((accepted >= 0) & (accepted <= 1))
    # PyMC's StepMethodTester.check_stat_dtype
    for name, (dtype, _) in entry.cls.stats_dtypes_shapes.items():
        if name != "tune" and name in ss:
            assert values(ss, name).dtype == np.dtype(dtype), name
    if entry.ours:
        assert "n_evals" in entry.cls.stats_dtypes_shapes
        n_evals = np.array([s["n_evals"] for _, _, _, s in seen])
        assert np.issubdtype(np.asarray(n_evals).dtype, np.integer)
        assert n_evals.min() >= 0 and np.median(n_evals) >= 1
        assert values(ss, "n_evals").dtype.kind == "i"


def test_reused_step_tunes_again(entry, tuning_run, normal3):
    """The same step object in a second pm.sample: back to the initial value, adapts."""
    step, _, _ = tuning_run.get()
    assert not step.tune  # the first pm.sample ended with stop_tuning
    with normal3, contract("second pm.sample with the same step"):
        idata = quiet_sample(tune=300, draws=20, step=step, cores=1, chains=1,
                             discard_tuned_samples=False, random_seed=SEED + 1)
    _assert_tuning_convention(entry, idata, chains=1)
    assert np.unique(values(idata.warmup_sample_stats, entry.stat)).size > 1


def test_tuning_stat_convention_parallel(entry, normal3):
    """DEMetropolisZ's test_tuning_epsilon_parallel: cores=2, same convention."""
    with normal3, contract(f"pm.sample(cores=2) with {entry.cls.__name__}"):
        idata = quiet_sample(tune=400, draws=100, step=entry(**short_warmup(entry)), cores=2,
                             chains=2, discard_tuned_samples=False, random_seed=SEED)
    _assert_tuning_convention(entry, idata, chains=2)


def test_reset_tuning_restores_initial_value(entry, normal3):
    with normal3:
        step = entry(rng=2, **short_warmup(entry))
    step.tune = True
    with contract("step loop / reset_tuning"):
        point, rec = run_steps(step, normal3.initial_point(), 300, 5)
        assert rec[0][1][0][entry.stat] == entry.init_value
        assert rec[-1][1][0][entry.stat] != entry.init_value
        assert not step.tune
        step.reset_tuning()
        if entry.ours:
            assert step.tune is True, "reset_tuning must set tune = True"
        else:
            step.tune = True  # PyMC's reset_tuning leaves it to pm.sample
        _, stats = step.step(point)
    assert stats[0][entry.stat] == entry.init_value
    if entry.ours or "tune" in stats[0]:
        assert bool(stats[0]["tune"])


def test_reset_tuning_in_compound(ours, two_blocks):
    x, y = two_blocks["x"], two_blocks["y"]
    with two_blocks:
        step = CompoundStep([ours([x]), ours([y])])
    with contract("CompoundStep stop_tuning / reset_tuning"):
        run_steps(step, two_blocks.initial_point(), 20, 2)
        assert [m.tune for m in step.methods] == [False, False]
        step.reset_tuning()
    assert [m.tune for m in step.methods] == [True, True]


def test_each_chain_starts_at_its_initvals(entry, normal3):
    """PyMC's test_parallel_start, with one step object reused across chains (cores=1)."""
    with normal3, contract("pm.sample with per-chain initvals"):
        # with the Laplace start on: a chain the user started begins there
        idata = quiet_sample(tune=5, draws=1, chains=2, cores=1, step=entry(),
                             discard_tuned_samples=False, random_seed=SEED,
                             initvals=[{"n": [10.0, 10, 10]}, {"n": [-10.0, -10, -10]}])
    first = values(idata.warmup_posterior, "n")[:, 0]
    assert np.all(first[0] > 5) and np.all(first[1] < -5), first


def test_no_global_numpy_seeding(entry, normal3):
    """The step neither relies on nor sets NumPy's global seed."""
    kw = {"tune": 2, "draws": 20, "chains": 1, "random_seed": None}
    with normal3:
        np.random.seed(1)  # noqa: NPY002 - the legacy global seed is the point
        a = values(quiet_sample(step=entry(), **kw).posterior, "n")
        np.random.seed(1)  # noqa: NPY002 - the legacy global seed is the point
        b = values(quiet_sample(step=entry(), **kw).posterior, "n")
        with mock.patch("numpy.random.seed") as seeded:
            quiet_sample(step=entry(), **kw)
    seeded.assert_not_called()
    assert not np.array_equal(a, b)


def test_float32_model(entry):
    with pytensor.config.change_flags(floatX="float32", warn_float64="ignore"):
        with pm.Model():
            x = pm.Normal("x", initval=np.array(1.0, dtype="float32"))
            pm.Normal("obs", mu=x, sigma=1.0,
                      observed=np.random.default_rng(0).normal(size=5).astype("float32"))
            with contract("float32 model"):
                idata = quiet_sample(draws=10, tune=10, chains=1, step=entry(), random_seed=1)
    assert np.all(np.isfinite(values(idata.posterior, "x")))


# ============================================================================ (4) bad start
@pytest.fixture(scope="module")
def bad_start_model():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("positive", pt.switch(x > 0, 0.0, -np.inf))
    return model


BAD_START = {"x": -1.0}


def _sample_bad_start(model, step_factory, cores, callback=None):
    """The exception pm.sample raises from a zero-probability start, or None."""
    with model:
        try:
            quiet_sample(tune=20, draws=20, chains=2, cores=cores, step=step_factory(),
                         initvals=BAD_START, random_seed=SEED, callback=callback)
        except Exception as exc:  # noqa: BLE001
            return exc
    return None


@pytest.fixture(scope="module")
def reference_bad_start_error(bad_start_model):
    """What PyMC's own steps raise in the same situation, per ``cores``: pm.Metropolis if it
    raises (it does not on PyMC 5.28 / 6.4: it stays at the start), else pm.NUTS."""
    reference = {}
    for cores in (1, 2):
        for factory in (pm.Metropolis, pm.NUTS):
            exc = _sample_bad_start(bad_start_model, factory, cores)
            if exc is not None:
                reference[cores] = (factory.__name__, exc)
                break
    return reference


def test_reference_bad_start_is_a_sampling_error(reference_bad_start_error):
    """Guards the reference itself: PyMC raises SamplingError (wrapped with cores=2)."""
    assert isinstance(reference_bad_start_error[1][1], SamplingError)
    exc = reference_bad_start_error[2][1]
    assert isinstance(exc, SamplingError) or isinstance(exc.__cause__, SamplingError)


@pytest.mark.parametrize("cores", [1, 2])
def test_zero_probability_start_raises_like_pymc(ours, bad_start_model, cores,
                                                 reference_bad_start_error):
    recorded = []
    exc = _sample_bad_start(bad_start_model, ours, cores,
                            callback=lambda trace, draw: recorded.append(draw))
    assert exc is not None, "no error from a zero-probability start"
    # as pm.NUTS as step=: a SamplingError (cores=1), PyMC's wrapper of one (cores=2)
    reference = reference_bad_start_error[cores][1]
    error = exc if isinstance(reference, SamplingError) else exc.__cause__
    assert isinstance(exc, type(reference)), f"{type(exc).__name__}: {exc}"
    assert isinstance(error, SamplingError), f"{type(error).__name__}: {error}"
    assert "Initial evaluation of model at starting point failed" in str(error)
    assert recorded == [], "draws were recorded before the error"


def test_zero_probability_start_in_step(ours, bad_start_model):
    with bad_start_model:
        step = ours()
    point = bad_start_model.initial_point()
    point["x"] = np.array(-1.0)
    try:
        step.step(point)
    except SamplingError:
        return
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"contract: {type(exc).__name__} instead of SamplingError: {exc}",
                    pytrace=False)
    pytest.fail("contract: no error from a zero-probability point")


# ============================================================================ (5)-(7) targets
#: pm.sample's defaults are tune=1000, draws=1000, chains=4.  pm.Metropolis does not reach
#: R-hat <= 1.01 with them on the two hard targets (PyMC 5.28.5: Dirichlet max R-hat 1.046;
#: mv_simple 1.013-1.015 on seeds 2, 4, 5).  mv_simple: 3000 draws is the budget
#: pm.Metropolis needs (5/5 seeds pass).  Dirichlet: pm.Metropolis still has max R-hat
#: 1.023 with 4000 draws (1.020 at the defaults without the likelihood), so that test keeps
#: the defaults and requires max R-hat <= max(1.01, pm.Metropolis' max R-hat on the same
#: target, budget and seed), i.e. "at least as well as pm.Metropolis".
DIRICHLET_BUDGET = {"tune": 1000, "draws": 1000, "chains": 4}
MV_SIMPLE_BUDGET = {"tune": 1000, "draws": 3000, "chains": 4}
DEFAULT_BUDGET = {"tune": 1000, "draws": 1000, "chains": 4}


def _defaults_run(model, step_factory, seed, budget=DEFAULT_BUDGET, cores=2):
    """pm.sample (defaults unless ``budget`` says otherwise) with the given step."""
    with model, contract("pm.sample with the defaults"):
        return quiet_sample(step=step_factory(), cores=cores, random_seed=seed, **budget)


def _defaults(entry):
    """The step as a user gets it: default kwargs apart from the KMC surrogate."""
    kwargs = {k: v for k, v in entry.kwargs.items() if k == "surrogate"}
    return lambda: entry.cls(**kwargs)


@pytest.fixture(scope="module")
def dirichlet_reference_rhat():
    """pm.Metropolis' max R-hat on the batched Dirichlet, same budget and seed."""
    model, _ = batched_dirichlet()
    idata = _defaults_run(model, pm.Metropolis, seed=SEED, budget=DIRICHLET_BUDGET)
    return max_rhat(values(idata.posterior, "p"))


@pytest.mark.slow
def test_batched_dirichlet_80d(entry, dirichlet_reference_rhat):
    # KernelHMCStep lite failed here (max R-hat 1.355 on PyMC 5.28.5, 1.492 on PyMC 6.4)
    # while a refit's trial was judged on its first 50 iterations: its step size, still
    # falling from the surrogate's guess, made a few long accepted jumps, and after taking
    # over the chain sampled at acceptance ~0.01; trials now skip the step size's warm-up
    model, truth = batched_dirichlet()
    idata = _defaults_run(model, _defaults(entry), seed=SEED, budget=DIRICHLET_BUDGET)
    p = values(idata.posterior, "p")
    limit = max(1.01, dirichlet_reference_rhat)
    assert max_rhat(p) <= limit, (
        f"max R-hat {max_rhat(p):.3f}; pm.Metropolis {dirichlet_reference_rhat:.3f}")
    # ESS floor 50: pm.Metropolis' smallest ESS here is 83 (PyMC 5.28.5, seed 20).
    # Variance z-scores up to 6: over 88 skewed coordinates their maximum is heavy-tailed
    # even for an exact kernel.  FastKameleonStep, PyMC 5.28.5, seeds 20, 1-6, max |z| of
    # the variances: 4.26, 2.86, 2.49, 2.63, 3.04, 2.32, 4.48 (b3f3924) and 5.32 (all four
    # chains 12-20 % narrow in one coordinate, ESS of its squares ~2000), 2.50, 2.74,
    # 2.35, 2.54, 2.50, 3.21 (after the cheaper F-KAMH tuning: other realisations of the
    # same kind of kernel); mean z-scores <= 3.3 throughout.
    # The check is not what guards the MH correction here: without it F-KAMH gave 2.91.
    check_moments(p, *truth["p"], min_ess=50.0, z_var_max=6.0, label="p")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_mv_simple_ill_conditioned(entry, seed):
    model, truth = mv_simple()
    idata = _defaults_run(model, _defaults(entry), seed=seed, budget=MV_SIMPLE_BUDGET)
    x = values(idata.posterior, "x")
    assert max_rhat(x) <= 1.01, f"max R-hat {max_rhat(x):.3f}"
    check_moments(x, *truth["x"], label="x")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SMALL_MODELS))
def test_small_pymc_models(entry, name):
    model, truth = SMALL_MODELS[name]()
    idata = _defaults_run(model, _defaults(entry), seed=SEED)
    for var, (mean, var_) in truth.items():
        x = values(idata.posterior, var)
        assert max_rhat(x) <= 1.05, f"{var}: max R-hat {max_rhat(x):.3f}"
        check_moments(x, mean, var_, label=f"{name}.{var}")


@pytest.mark.slow
def test_spawn_context(entry, normal3):
    """PyMC's test_parallel.test_context: chains in spawned processes."""
    with normal3, contract('pm.sample(mp_ctx="spawn")'):
        quiet_sample(tune=2, draws=2, chains=2, cores=2, step=entry(), mp_ctx="spawn")

