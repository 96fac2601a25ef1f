"""KameleonSMC's ``on_error`` and its executors' errors.

A model whose ``as_op`` likelihood raises on part of the space (``sigma > LIMIT``), sampled
in this process, on a thread pool, a process pool (the Op sent by value, as from a script's
``__main__``) and a Dask cluster: ``on_error="raise"`` stops with a ``LogDensityError`` that
names the point in the model's variables, chained to the user's exception, with the user's
line once in the printed traceback; ``on_error="reject"`` finishes with every exception
counted in the per-stage stat ``n_errors`` and reported once.  An executor that was shut
down, whose worker died, or whose Dask client is closed gives an ``ExecutorError`` saying so.
"""

from __future__ import annotations

import inspect
import logging
import multiprocessing
import os
import pickle
import re
import sys
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.compile.ops import as_op

from pymc_kameleon import ExecutorError, KameleonSMC, LogDensityError
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.parallel import dumps

logging.getLogger("pymc").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", "pytensor.as_op is deprecated", FutureWarning)

LIMIT = 3.0
Y = np.random.default_rng(0).normal(0.0, 2.5, size=20)
RAISED: list[int] = []  # the Op's exceptions in this process (appends are thread-safe)


def normal_lik(sigma):
    """log N(Y | 0, sigma^2), raising where ``sigma > LIMIT`` (a solver failing there).
    Not decorated, so that it pickles by reference (its threads append to ``RAISED``)."""
    if sigma > LIMIT:
        RAISED.append(1)
        raise ValueError(f"the solver failed at sigma={float(sigma):.3f}")
    return np.asarray(-Y.size * np.log(sigma) - 0.5 * np.sum(Y**2) / sigma**2)


normal_lik_op = as_op(itypes=[pt.dscalar], otypes=[pt.dscalar])(normal_lik)


def _raise_line() -> str:
    """``line N, in normal_lik`` of the ``raise`` statement, as a traceback prints it."""
    lines, _ = inspect.getsourcelines(sys.modules[__name__])
    n = next(i for i, text in enumerate(lines, start=1)
             if text.strip().startswith('raise ValueError(f"the solver failed'))
    return f'{__file__}", line {n}, in normal_lik'


@pytest.fixture(scope="module")
def model():
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Potential("lik", normal_lik_op(sigma))
    return model


def _smc(model, executor=None, **kwargs):
    with model:
        return pm.sample_smc(200, kernel=KameleonSMC, chains=1, cores=1, progressbar=False,
                             random_seed=5, compute_convergence_checks=False,
                             executor=executor, **kwargs)


@pytest.fixture(scope="module", params=["none", "thread", "process", "dask"])
def executor(request):
    """Each way of evaluating a batch; the process pool gets the Op by value, so that the
    traceback's file name is the one kept in the pickle (cloudpickle's is ``<dynamic-code>``)."""
    kind = request.param
    if kind == "none":
        yield kind, None
    elif kind == "thread":
        with ThreadPoolExecutor(2) as ex:
            yield kind, ex
    elif kind == "process":
        module = sys.modules[__name__]
        cloudpickle.register_pickle_by_value(module)
        try:
            with ProcessPoolExecutor(2) as ex:
                yield kind, ex
        finally:
            cloudpickle.unregister_pickle_by_value(module)
    else:
        distributed = pytest.importorskip("distributed")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            yield kind, client


def test_raise_names_the_point_and_chains_the_users_exception(model, executor):
    kind, ex = executor
    with pytest.raises(LogDensityError) as info:
        _smc(model, ex)
    err = info.value
    message = str(err)
    # the Op where PyTensor names it (PyTensor 2; PyTensor 3 adds a note to the exception)
    assert re.search(r"KameleonSMC: the log density raised at .* of this chain,"
                     r"( in FromFunctionOp\{normal_lik\}\(sigma\),)? at the point \{sigma: ",
                     message)
    assert "sigma_log__" not in message
    assert float(message.split("{sigma: ")[1].split("}")[0]) > LIMIT  # untransformed
    assert "on_error='reject'" in message
    # the user's exception as raised, not PyTensor's copy with the Op's details appended
    cause = err.__cause__
    assert isinstance(cause, ValueError) and str(cause).startswith("the solver failed")
    assert "Apply node" not in str(cause)
    text = "".join(traceback.format_exception(err))
    assert text.count(_raise_line()) == 1, text  # one traceback, the user's file and line
    assert "<dynamic-code>" not in text and "Apply node" not in text
    if kind == "process":  # the worker's traceback: as text, or pickled by tblib (Dask's)
        assert (type(cause.__cause__).__name__ == "RemoteTraceback"
                or cause.__traceback__ is not None)


def test_reject_counts_every_exception_per_stage(model, executor):
    kind, ex = executor
    RAISED.clear()
    with pytest.warns(RuntimeWarning, match="KameleonSMC: the log density gave an exception "
                      r"at \d+ evaluations \(on_error='reject'; the first: ValueError: the "
                      "solver failed") as record:
        idata = _smc(model, ex, on_error="reject")
    n_errors = np.asarray(group_dataset(idata, "sample_stats")["n_errors"].values)
    assert n_errors.dtype.kind == "i" and n_errors.sum() > 0
    [report] = [str(w.message) for w in record if "KameleonSMC: the log" in str(w.message)]
    assert f"an exception at {n_errors.sum()} evaluations" in report
    assert "first at {sigma: " in report
    if kind in ("none", "thread"):  # the Op ran in this process: count its raises
        assert len(RAISED) == n_errors.sum()
    elif kind == "dask":  # in this process too, but Dask may run a task twice (stealing)
        assert n_errors.sum() <= len(RAISED) <= n_errors.sum() + 5
    sigma = group_dataset(idata, "posterior")["sigma"].values
    assert sigma.max() <= LIMIT and sigma.mean() > 2.0  # zero density where it raised
    assert group_dataset(idata, "sample_stats").attrs["on_error"] == "reject"


def test_on_error_is_validated(model):
    with model, pytest.raises(ValueError, match="on_error"):
        KameleonSMC(draws=10, on_error="ignore")


# ------------------------------------------------------------------ the executor's errors
def test_a_shut_down_executor_is_named_with_what_to_do(model):
    with ThreadPoolExecutor(2) as ex:
        pass
    with pytest.raises(ExecutorError, match="was shut down before sampling ended") as info:
        _smc(model, ex)
    assert "inside the `with" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


@as_op(itypes=[pt.dscalar], otypes=[pt.dscalar])
def dies_in_a_worker(sigma):
    """A model that crashes the process evaluating it, unless it is the main one."""
    if multiprocessing.parent_process() is not None:
        os._exit(1)
    return np.asarray(-0.5 * sigma**2)


def test_a_worker_that_died_is_named(model):
    with pm.Model() as crashing:
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Potential("lik", dies_in_a_worker(sigma))
    with ProcessPoolExecutor(1) as ex, \
            pytest.raises(ExecutorError, match="a worker of the executor .* died") as info:
        _smc(crashing, ex)
    assert type(info.value.__cause__).__name__ == "BrokenProcessPool"


def test_a_closed_dask_client_is_named(model):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        client = distributed.Client(cluster)
        client.close()
        with pytest.raises(ExecutorError, match=r"Dask cluster behind the executor "
                           r"\(Client, closed\).* Keep the client open"):
            _smc(model, client)


# ------------------------------------------------------------------ the pieces
def test_functions_sent_by_value_keep_their_file_name():
    def local(x):
        return 1 / x

    local.__module__ = "__main__"  # as in a script: sent by value
    loaded = pickle.loads(dumps(local))
    assert loaded.__code__.co_filename == __file__ and loaded(2) == 0.5
    with pytest.raises(ZeroDivisionError) as info:
        loaded(0)
    assert __file__ in "".join(traceback.format_tb(info.value.__traceback__))
