"""pymc_kameleon.compat: the helpers behave the same on PyMC 5 / ArviZ 0.x and PyMC 6 / ArviZ 1.

Each major's branch is tested on the installed major and skipped on the other (CI runs
PyMC 5.28 / PyTensor 2.38 / ArviZ 0.23 and PyMC 6.4 / PyTensor 3.3 / ArviZ 1.3)."""

import copy
import re
import warnings
from pathlib import Path

import cloudpickle
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import xarray as xr
from checks import sample
from pymc.step_methods.compound import BlockedStep
from pytensor.compile.builders import OpFromGraph

import pymc_kameleon
from pymc_kameleon import (
    PseudoMarginalWarning,
    RandomWalkStep,
    compat,
    pseudo_marginal_potential,
)
from pymc_kameleon.pseudo_marginal import compiling_for

PYMC5 = pytest.mark.skipif(compat.PYMC_VERSION[0] != 5, reason="the PyMC 5 branch")
PYMC6 = pytest.mark.skipif(compat.PYMC_VERSION[0] != 6, reason="the PyMC 6 branch")


def test_versions_are_parsed():
    # unit test of the parser: local and unparsable versions are not installed here
    assert compat._version("3.3.7+4.g1a2b") == (3, 3)
    assert compat._version("6.4.0") == (6, 4)
    assert compat.PYMC_VERSION[0] in (5, 6)
    assert compat.PYTENSOR_VERSION[0] == (3 if compat.PYMC_VERSION[0] == 6 else 2)
    with pytest.raises(ValueError):
        compat._version("dev")


def test_the_majors_go_together():
    """PyMC 5 runs on PyTensor 2 and ArviZ 0.x, PyMC 6 on PyTensor 3 and ArviZ 1."""
    major = compat.PYMC_VERSION[0]
    assert (compat.PYTENSOR_VERSION[0], compat.ARVIZ_VERSION[0]) == {5: (2, 0), 6: (3, 1)}[major]
    assert compat.PYTENSOR_HAS_PULLBACK == (compat.PYTENSOR_VERSION[0] >= 3)


class _Recorder:
    """A stand-in step that records which of PyMC's chain hooks was called."""

    def __init__(self):
        self.calls = []

    def set_rng(self, rng):
        self.calls.append(("set_rng",))

    def setup_chain(self, rng, tune, draws):
        self.calls.append(("setup_chain", tune, draws))


@PYMC5
def test_pymc5_branch_does_not_tell_tuning_draws():
    assert not hasattr(BlockedStep, "setup_chain")  # what the branch stands for
    assert not compat.TELLS_TUNING_DRAWS
    assert compat.assumed_tuning_draws(None) == compat.PM_SAMPLE_TUNE == 1000
    step = _Recorder()
    compat.start_chain(step, np.random.default_rng(1), tune=10, draws=20)
    assert step.calls == [("set_rng",)]


@PYMC6
def test_pymc6_branch_tells_tuning_draws():
    assert hasattr(BlockedStep, "setup_chain")
    assert compat.TELLS_TUNING_DRAWS
    assert compat.assumed_tuning_draws(None) is None  # until setup_chain tells
    step = _Recorder()
    compat.start_chain(step, np.random.default_rng(1), tune=10, draws=20)
    assert step.calls == [("setup_chain", 10, 20)]


def test_given_tuning_draws_are_used_on_both_majors():
    assert compat.assumed_tuning_draws(300) == 300
    assert compat.assumed_tuning_draws(0) == 0


def test_inner_graphs_on_both_pytensor_majors():
    y = pt.dscalar("y")
    [graph] = compat.inner_graphs(OpFromGraph([y], [2.0 * y]))
    assert len(graph.outputs) == 1
    assert compat.inner_graphs(pt.exp(y).owner.op) == []


def test_step_hooks_answer_pymcs_names_from_public_ones():
    """PyMC asks a step class for its progress bar and state class under private names
    (they are the seam's contract, so this test calls them)."""

    class Hooked(compat.StepHooks):
        state_class = dict

        @classmethod
        def progress_config(cls, n_chains=1):
            return ["column"], {"stat": ["-"] * n_chains}

        def progress_update_functions(self):  # PyMC asks the step: they may depend on it
            return (str, id(self))

    hooked = Hooked()
    assert Hooked._progressbar_config(3) == (["column"], {"stat": ["-"] * 3})
    assert hooked._make_progressbar_update_functions() == (str, id(hooked))
    assert Hooked._state_class is dict


#: Ways to read the call stack (frames of callers), none of which the package may use.
STACK_READS = re.compile(r"_getframe|currentframe|inspect\.stack|inspect\.trace\b|"
                         r"getouterframes|getinnerframes|\bf_back\b|\bf_locals\b|tb_frame|"
                         r"extract_stack|walk_stack")


def test_no_module_reads_the_call_stack():
    """What a step does depends on what it is told or given, never on who calls it."""
    root = Path(pymc_kameleon.__file__).parent
    hits = [f"{path.relative_to(root)}:{n}: {line.strip()}"
            for path in sorted(root.rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if STACK_READS.search(line)]
    assert hits == []


def _estimate(mu, rng):
    return -0.5 * mu**2 + 0.1 * rng.normal() - 0.005


def test_the_estimator_warning_needs_no_call_stack():
    """A step of this package compiles its log density inside ``compiling_for(step)``:
    no warning, nor from its copies; PyMC's Metropolis cannot say what it is, so it is
    warned about; a sampler that says it re-estimates is named."""
    with pm.Model() as model:
        mu = pm.Normal("mu")
        pseudo_marginal_potential("lik", _estimate, mu)
        with warnings.catch_warnings():
            warnings.simplefilter("error", PseudoMarginalWarning)
            step = RandomWalkStep()
            copy.deepcopy(step)
            cloudpickle.loads(cloudpickle.dumps(step))  # as pm.sample(cores=2) may
        with pytest.warns(PseudoMarginalWarning, match="PyMC's Metropolis"):
            pm.Metropolis()

        class ReEstimating:
            exact_for_pseudo_marginal = False

        with (pytest.warns(PseudoMarginalWarning, match="^ReEstimating re-evaluates"),
              compiling_for(ReEstimating())):
            model.compile_logp()


def test_default_compile_kwargs_follow_pytensor_and_the_user():
    kwargs = compat.default_compile_kwargs()
    if compat.PYTENSOR_VERSION[0] < 3:
        assert kwargs == {}  # PyTensor 2's default is the C VM already, whatever the flags
    else:
        if pytensor.config.cxx:
            assert kwargs == {"mode": "CVM"}
        # (PyTensor 2.31 cannot change the linker after start-up; 3 can)
        with pytensor.config.change_flags(linker="vm"):  # the user chose: keep it
            assert compat.default_compile_kwargs() == {}
        with pytensor.config.change_flags(mode="FAST_COMPILE"):
            assert compat.default_compile_kwargs() == {}
    user = {"mode": "NUMBA", "on_unused_input": "ignore"}
    merged = compat.logp_compile_kwargs(user)
    assert merged == user and merged is not user
    assert compat.logp_compile_kwargs(None) == kwargs


def test_start_chain_seeds_the_step():
    with pm.Model():
        pm.Normal("x")
        step = pm.Metropolis()
    draws = []
    for _ in range(2):
        compat.start_chain(step, np.random.default_rng(3), tune=10, draws=10)
        draws.append(step.rng.uniform(size=3))
    np.testing.assert_array_equal(*draws)


@pytest.fixture(scope="module")
def idata():
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=2)
        pm.Normal("y", 0.0, 1.0)
    return sample(model, pm.Metropolis, draws=200, tune=100, chains=2, seed=1)


def test_group_dataset_and_multi_variable_selection(idata):
    post = compat.group_dataset(idata)
    assert isinstance(post, xr.Dataset)
    assert set(post[["x", "y"]].data_vars) == {"x", "y"}
    stats = compat.group_dataset(idata, "sample_stats")
    assert "accepted" in stats.data_vars
    assert compat.as_dataset(post) is post
    with pytest.raises(TypeError, match="Dataset or DataTree"):
        compat.as_dataset(np.zeros(2))


def test_max_rhat_on_results_and_datasets(idata):
    value = compat.max_rhat(idata)
    assert 0.9 < value < 1.2
    assert compat.max_rhat(compat.group_dataset(idata)) == value
    assert compat.max_rhat(idata, ["y"]) <= value


def test_summary_table_has_the_common_columns(idata):
    table = compat.summary_table(idata)
    assert tuple(table.columns) == compat.SUMMARY_COLUMNS
    assert list(table.index) == ["x[0]", "x[1]", "y"]
    assert list(compat.summary_table(idata, var_names=["y"]).index) == ["y"]


def test_pareto_khat_is_inf_for_too_few_weights_on_every_arviz():
    """Too few weights for PSIS's tail: ``inf`` (cannot be trusted), on ArviZ 0.x and 1.x
    alike (1.x raises where 0.x returns it); enough weights give a finite k-hat."""
    from pymc_kameleon.compat.arviz import pareto_khat

    rng = np.random.default_rng(0)
    assert pareto_khat(rng.normal(size=12)) == np.inf
    assert np.isfinite(pareto_khat(rng.normal(size=200)))
