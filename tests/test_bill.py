"""The bill of a run, the same in both APIs: evaluations in ``sample_stats.attrs`` (checked
against an independent counter, in every process), on the progress bars while they happen,
and in a one-line summary at the end."""

from __future__ import annotations

import logging
import time
import warnings
from types import SimpleNamespace

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from checks import WATCHED_BOARD, WatchedSMC, wrap_py
from pymc.step_methods import CompoundStep
from rich.progress import Progress

import pymc_kameleon as pk
from pymc_kameleon.bill import record_bill_in_attrs
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.compat.smc import set_chain_clock
from pymc_kameleon.models.counting import add_counter
from pymc_kameleon.smc.progress import ProgressBoard
from pymc_kameleon.steps.progress import EvaluationsColumn

STEPS = [pk.RandomWalkStep, pk.KameleonStep, pk.FastKameleonStep, pk.KernelHMCStep]
SUMMARY = "pymc_kameleon"
Y_OBS = np.array([0.5, 1.0, 0.8])


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """A 2-d model whose every evaluation, in any process, is counted in a file."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=2)
        pm.Normal("y", x.sum(), 1.0, observed=Y_OBS)
    return model, add_counter(model, tmp_path_factory.mktemp("count") / "evals")


def _run(model, counter, step, sample=pk.sample, **kwargs):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counter.reset()
        return sample(**{"draws": 10, "tune": 10, "chains": 2, "random_seed": 1,
                            "progressbar": False, "compute_convergence_checks": False,
                            "step": step, **kwargs})


def _last_per_chain(idata) -> np.ndarray:
    values = group_dataset(idata, "sample_stats")["n_evals_total"].values
    return values[:, -1].reshape(values.shape[0], -1).sum(axis=1)


# ------------------------------------------------------------------ pm.sample
@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("step_class", STEPS, ids=lambda c: c.__name__)
def test_pm_sample_attrs_match_an_independent_counter(counted, step_class, cores, caplog):
    """Plain ``pm.sample``: its InferenceData carries the bill and one summary line is
    logged (the package wraps ``pymc.to_inference_data`` when imported)."""
    model, counter = counted
    with model:
        step = step_class()
    with caplog.at_level(logging.INFO, logger=SUMMARY):
        idata = _run(model, counter, step, sample=pm.sample, cores=cores)
    attrs = group_dataset(idata, "sample_stats").attrs
    # every evaluation of the chains (PyMC's start-value check evaluates other terms)
    assert attrs["n_evals_total"] == counter.count > 2 * 20
    np.testing.assert_array_equal(attrs["n_evals_per_chain"], _last_per_chain(idata))
    assert attrs["n_evals_chains"] == 2
    assert "sampling_time" in attrs  # PyMC's own attributes stay
    lines = [r.getMessage() for r in caplog.records if r.name.startswith(SUMMARY)]
    assert len(lines) == 1 and f"pm.sample: {counter.count:,} log-density evaluations" in lines[0]


@pytest.mark.parametrize("return_inferencedata", [True, False])
def test_pk_sample_logs_one_summary_line_and_quiet_none(counted, return_inferencedata, caplog):
    model, counter = counted
    with model:
        step = pk.KameleonStep()
    for quiet, want in ((False, 1), (True, 0)):
        caplog.clear()
        for sample in (pk.sample, pm.sample):
            with caplog.at_level(logging.INFO, logger=SUMMARY):
                result = _run(model, counter, step, sample=sample, quiet=quiet,
                              return_inferencedata=return_inferencedata)
            assert pk.evaluations(result)["n_evals_total"] == counter.count
            lines = [r.getMessage() for r in caplog.records if r.name.startswith(SUMMARY)]
            # pm.sample cannot log for a MultiTrace (no conversion), nor see its quiet=True
            # (PyMC converts after restoring its loggers): pk.sample does both
            got = want if sample is pk.sample else int(return_inferencedata)
            assert len(lines) == got, (sample, quiet, lines)
            if got:
                assert f"pm.sample: {counter.count:,} log-density evaluations" in lines[0]
            caplog.clear()


def test_the_wrapper_is_pymcs_function_and_installed_once():
    assert pm.to_inference_data.__wrapped__.__module__ == "pymc.backends.arviz"
    before = pm.to_inference_data
    record_bill_in_attrs()
    assert pm.to_inference_data is before


def test_tuning_draws_kept_or_discarded_and_a_multitrace_give_the_same_bill(counted, caplog):
    model, counter = counted
    with model:
        step = pk.RandomWalkStep()
    kept = _run(model, counter, step, discard_tuned_samples=False)
    dropped = pk.add_evaluations(_run(model, counter, step))  # the same run
    trace = _run(model, counter, step, return_inferencedata=False)
    bills = [pk.evaluations(r) for r in (kept, dropped, trace)]
    for bill in bills:
        assert bill["n_evals_total"] == counter.count
        np.testing.assert_array_equal(bill["n_evals_per_chain"], bills[0]["n_evals_per_chain"])
    for sample in (pm.sample, pk.sample):  # PyMC's own steps: pm.sample's result, unchanged
        with model:
            nuts = sample(draws=5, tune=5, chains=1, progressbar=False, random_seed=1,
                          compute_convergence_checks=False, step=pm.Metropolis())
        assert "n_evals_total" not in group_dataset(nuts, "sample_stats").attrs
    with pytest.raises(ValueError, match="no evaluation counts"):
        pk.evaluations(nuts)


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0)
        b = pm.Normal("b", 0.0, 1.0, shape=2)
        pm.Normal("y", a + b.sum(), 1.0, observed=Y_OBS)
    return model, add_counter(model, tmp_path_factory.mktemp("count") / "evals")


def test_compound_steps_add_up_on_the_attrs_and_the_progress_bar(blocks):
    """Two of our steps over blocks of one model: each counts its own evaluations (they
    share the stored value, not a counter), so the chain's bill is their sum, which the
    progress bar's one ``Evals`` column shows too."""
    model, counter = blocks
    with model:
        steps = [pk.RandomWalkStep([model["a"]]), pk.KameleonStep([model["b"]])]
    idata = _run(model, counter, steps, progressbar=True, cores=1)
    per_chain = _last_per_chain(idata)
    stat = group_dataset(idata, "sample_stats")["n_evals_total"].values
    assert stat.shape[-1] == 2 and np.all(stat[:, -1].min(axis=1) > 0)  # both steps count
    assert pk.evaluations(idata)["n_evals_total"] == per_chain.sum() == counter.count
    # PyMC's hooks (private names: the seam's contract): one "Evals" column for the two
    # steps, and each step's count under its own field, which the column adds up
    compound = CompoundStep(steps)
    columns, _ = compound._progressbar_config(2)
    assert [type(c) for c in columns].count(EvaluationsColumn) == 1
    fields = {}
    for update, count in zip(compound._make_progressbar_update_functions(), (7, 8), strict=True):
        fields.update(update({"accept": 0.5, "scaling": 1.0, "n_evals_total": count}))
    assert str(EvaluationsColumn().render(SimpleNamespace(fields=fields))) == "15"
    assert str(EvaluationsColumn().render(SimpleNamespace(fields={}))) == "-"


def test_next_to_a_pymc_step_the_bill_is_our_steps(tmp_path):
    """``pm.Metropolis`` for a discrete variable evaluates the model too; the bill counts
    this package's steps only (as documented)."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=2)
        k = pm.Poisson("k", 2.0)
        pm.Normal("y", x.sum() + 0.1 * k, 1.0, observed=Y_OBS)
    counter = add_counter(model, tmp_path / "evals")
    with model:
        steps = [pk.RandomWalkStep([x]), pm.Metropolis([k])]
    idata = _run(model, counter, steps, cores=1)
    bill = pk.evaluations(idata)
    np.testing.assert_array_equal(bill["n_evals_per_chain"], _last_per_chain(idata))
    assert 0 < bill["n_evals_total"] < counter.count


# ------------------------------------------------------------------ pm.sample_smc
@pytest.mark.parametrize("cores", [1, 2])
def test_smc_attrs_match_an_independent_counter(counted, cores, caplog):
    model, counter = counted
    counter.reset()
    with model, warnings.catch_warnings(), caplog.at_level(logging.INFO, logger=SUMMARY):
        warnings.simplefilter("ignore")
        idata = pm.sample_smc(60, kernel=pk.KameleonSMC, chains=2, cores=cores,
                              recycle=120, random_seed=2, progressbar=False,
                              compute_convergence_checks=False)
    attrs = group_dataset(idata, "sample_stats").attrs
    assert attrs["n_evals_total"] == counter.count and attrs["n_evals_chains"] == 2
    bill = pk.evaluations(pk.add_evaluations(idata))  # per chain, from the stages' stat
    assert bill["n_evals_total"] == counter.count
    attrs = group_dataset(idata, "sample_stats").attrs
    assert len(attrs["n_evals_per_chain"]) == 2 and min(attrs["n_evals_per_chain"]) > 120
    lines = [r.getMessage() for r in caplog.records if r.name.startswith(SUMMARY)]
    assert len(lines) == 1 and f"KameleonSMC: {counter.count:,} log-density" in lines[0]


_SEEN: list = []  # (phase, evals shown) at each evaluation of the watched model


@wrap_py(itypes=[pt.dvector], otypes=[pt.dscalar])
def _watched_loglik(x):
    if WATCHED_BOARD and WATCHED_BOARD[0].started:
        cell = WATCHED_BOARD[0].cells[WATCHED_BOARD[0].started - 1]
        _SEEN.append((cell.phase, int(cell.evals.replace(",", ""))))
    return np.array(-0.5 * np.sum((x - 0.5) ** 2 / 0.25))


def test_smc_progress_moves_during_recycling_and_the_emulator_rounds():
    """PyMC updates the bar once per stage; the kernel's cells are read at every redraw,
    so what they show moves with every evaluation, also while the chain recycles after
    its last stage (and in the emulator's rounds)."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 2.0, shape=2)
        pm.Potential("lik", _watched_loglik(x))
    # (the emulator with 60 draws fails in ArviZ 1's PSIS: too few tail draws)
    for kwargs, phases in (({"draws": 60, "recycle": 300}, {"recycling"}),
                           ({"draws": 100, "emulator": True}, {"design", "correction"})):
        _SEEN.clear()
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pm.sample_smc(kernel=WatchedSMC, chains=1, random_seed=3,
                          progressbar=False, compute_convergence_checks=False, **kwargs)
        for phase in phases:
            shown = [n for p, n in _SEEN if p == phase]
            assert len(shown) >= 10 and np.all(np.diff(shown) == 1), phase
        cell = WATCHED_BOARD[0].cells[0]
        assert cell.phase == "done" and int(cell.evals.replace(",", "")) == len(_SEEN)


def test_each_chain_shows_its_own_elapsed_time():
    """The clock of PyMC's task is the chain's own: not started while the chain waits, still
    running after the bar reached beta = 1, stopped at the chain's end."""
    board = ProgressBoard(2)
    progress = Progress(disable=True)
    for _ in range(2):
        progress.add_task("chain", total=1.0)
    tasks = progress.tasks
    first = board.begin_chain(lambda: 5)
    time.sleep(0.05)
    progress.update(tasks[0].id, completed=1.0)  # PyMC: beta = 1 before the last stage
    set_chain_clock(tasks[0], first)
    set_chain_clock(tasks[1], board.cells[1])
    assert not tasks[0].finished and tasks[0].elapsed >= 0.05
    assert tasks[1].elapsed is None  # the second chain has not started
    first.end()
    set_chain_clock(tasks[0], first)
    assert tasks[0].finished and tasks[0].finished_time == pytest.approx(
        first.ended - first.started)
    second = board.begin_chain(lambda: 7)
    set_chain_clock(tasks[1], second)
    assert tasks[1].elapsed < 0.05 and f"{second}" == "7"
    # chains run in other processes (cores > 1) keep PyMC's clock
    remote = ProgressBoard(1).cells[0]
    start = tasks[1].start_time
    set_chain_clock(tasks[1], remote)
    assert tasks[1].start_time == start and str(remote) == "-"
