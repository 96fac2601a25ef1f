"""Chains on Dask: ``pymc_kameleon.distributed.sample`` against sequential ``pm.sample``.

Most tests share one ``LocalCluster`` with 2 worker processes of 1 thread each.  The factories
below are top-level functions of this module, which the workers import by name (the worker
processes inherit the test session's ``sys.path``).  Their PyTensor compilation directories
live under ``<base_compiledir>/pymc-kameleon-tests`` (one per worker), so that a second run of
the suite finds its compiled modules.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

try:  # PyTensor's decorator for a Python function as an Op (formerly as_op)
    from pytensor.compile.ops import wrap_py  # noqa: E402
except ImportError:  # pragma: no cover - older PyTensor
    from pytensor.compile.ops import as_op as wrap_py  # noqa: E402

from pymc_kameleon import (  # noqa: E402
    KameleonStep,
    PseudoMarginalWarning,
    RandomWalkStep,
    pseudo_marginal_potential,
)
from pymc_kameleon import distributed as pkd  # noqa: E402
from pymc_kameleon.models import gaussian_model, gp_classification_model  # noqa: E402
from pymc_kameleon.models.gpc import GLASS_ENV_VAR, load_glass  # noqa: E402

COV = np.array([[1.0, 0.5], [0.5, 2.0]])
COMPILEDIR = os.path.join(str(pytensor.config.base_compiledir), "pymc-kameleon-tests")
QUIET = {"progressbar": False, "compute_convergence_checks": False}


# --------------------------------------------------------------------- factories (picklable)
def gauss_model() -> pm.Model:
    return gaussian_model(COV)


kameleon_step = functools.partial(KameleonStep, n_history=50)

#: Seconds that one evaluation of the slow model's log density takes.
SLOW_SECONDS = 0.004


@wrap_py(itypes=[pt.dvector], otypes=[pt.dscalar])
def _slow_logp(x):
    """A NumPy log density behind ``wrap_py``/``as_op`` (such models do not pickle)."""
    if x[0] > 50.0:
        raise ValueError(f"slow_logp refuses x[0] = {x[0]}")
    time.sleep(SLOW_SECONDS)
    return np.asarray(-0.5 * float(x @ x))


def slow_model() -> pm.Model:
    with pm.Model() as model:
        x = pm.Flat("x", shape=2, initval=np.zeros(2))
        pm.Potential("logp", _slow_logp(x))
    return model


def failing_model() -> pm.Model:
    raise FileNotFoundError("no such file: 'data.csv'")


def not_a_model():
    return "a string"


def glass_model(path: str, n_importance: int) -> pm.Model:
    X, y = load_glass(path)
    return gp_classification_model(X, y, n_importance=n_importance, seed=1)


def noisy_estimator(mu, rng) -> float:
    return float(-0.5 * mu**2 + 0.5 * rng.normal() - 0.125)


def noisy_model(seed: int) -> pm.Model:
    with pm.Model() as model:
        mu = pm.Normal("mu")
        pseudo_marginal_potential("lik", noisy_estimator, mu, seed=seed)
    return model


def mark_draw(directory: str, trace, draw) -> None:
    """``pm.sample`` callback: at draw 20 of a chain, leave a file named after the process."""
    if draw.draw_idx == 20:
        Path(directory, f"{os.getpid()}-{time.monotonic_ns()}").touch()


def worker_compiledir() -> tuple[str, str | None, int]:
    return (str(pytensor.config.compiledir), os.environ.get(pkd._COMPILEDIR_ENV),
            os.getpid())


# ------------------------------------------------------------------------------- helpers
def sequential(model_factory, step_factory, chains: int, **kwargs):
    """What the distributed draws must equal: ``pm.sample(chains=n, cores=1)``."""
    with model_factory():
        step = step_factory()
        return pm.sample(chains=chains, cores=1, step=step, **QUIET, **kwargs)


def groups(data) -> dict:
    """Group name -> dataset, for an InferenceData (ArviZ 0.x) or a DataTree (ArviZ 1.x)."""
    if hasattr(data, "children"):
        return {name: node.to_dataset() for name, node in data.children.items()}
    return {name: data[name] for name in data.groups()}


def assert_same_draws(actual, expected) -> None:
    """Same groups, variables, coordinates and values (attributes such as times may differ)."""
    assert type(actual) is type(expected)
    got, want = groups(actual), groups(expected)
    assert list(got) == list(want)
    for name, ds in want.items():
        # (PyMC orders the sample stats by a set: the order differs between processes)
        assert sorted(got[name].data_vars) == sorted(ds.data_vars), name
        assert dict(got[name].sizes) == dict(ds.sizes), name
        for coord in ds.coords:
            np.testing.assert_array_equal(got[name][coord].values, ds[coord].values)
        for var in ds.data_vars:
            assert got[name][var].dims == ds[var].dims, (name, var)
            np.testing.assert_array_equal(got[name][var].values, ds[var].values,
                                          err_msg=f"{name}/{var}")


def steps_reseed_estimators() -> bool:
    """Does ``pm.sample(random_seed=S)`` alone fix a pseudo-marginal chain (behaviour check)?

    The steps reseed likelihood estimators from the generator that ``pm.sample`` gives each
    chain; then the estimator's own seed does not matter.  If they do not (the generator
    reaches them another way), sequential ``pm.sample`` runs its chains on one estimator
    stream, which one model per chain cannot reproduce.
    """
    draws = [sequential(functools.partial(noisy_model, seed), RandomWalkStep, 1, draws=5,
                        tune=5, random_seed=0)["posterior"]["mu"].values for seed in (1, 2)]
    return bool(np.array_equal(*draws))


def glass_path() -> Path | None:
    env = os.environ.get(GLASS_ENV_VAR)
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data" / "glass.data")
    return next((p for p in candidates if p.is_file()), None)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


# ---------------------------------------------------------------------- no cluster needed
def test_one_chain_tasks_merge_into_pm_sample_result():
    """The seeds, the task and the merge, run in this process: equal to pm.sample."""
    kwargs = {"draws": 30, "tune": 20, "random_seed": 7, "discard_tuned_samples": False}
    seeds = pkd._chain_seeds(7, 3)
    task_kwargs = {k: v for k, v in kwargs.items() if k != "random_seed"}
    payload = pkd._dumps((gauss_model, RandomWalkStep, task_kwargs), "the task")
    parts = [pkd._run_chain(payload, i, seeds[i], None) for i in range(3)]
    assert [p.chain for p in parts] == [0, 1, 2]
    merged = pkd._merge_chains([p.data for p in parts], sampling_time=1.5)
    assert_same_draws(merged, sequential(gauss_model, RandomWalkStep, 3, **kwargs))
    assert merged["posterior"].attrs["sampling_time"] == 1.5
    assert merged["posterior"]["chain"].values.tolist() == [0, 1, 2]


def test_arguments_are_checked_before_any_cluster_starts(monkeypatch):
    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(pkd, "_start_local_cluster", no_cluster)
    with pytest.raises(TypeError, match="not a pymc.Model"):
        pkd.sample(gauss_model(), RandomWalkStep)
    with pytest.raises(TypeError, match="step_factory must be callable"):
        pkd.sample(gauss_model, 3)
    with pytest.raises(TypeError, match="'cores'"):
        pkd.sample(gauss_model, RandomWalkStep, cores=2)
    with pytest.raises(TypeError, match="'step'"):
        pkd.sample(gauss_model, RandomWalkStep, step=None)
    with pytest.raises(TypeError, match="return_inferencedata=False"):
        pkd.sample(gauss_model, RandomWalkStep, return_inferencedata=False)
    with pytest.raises(TypeError, match="trace backend"):
        pkd.sample(gauss_model, RandomWalkStep, trace="zarr")
    for chains in (0, 2.5, "2", [2]):
        with pytest.raises(ValueError, match="chains must be a positive integer"):
            pkd.sample(gauss_model, RandomWalkStep, chains=chains)
    assert pkd._check_chains(None) == 4 and pkd._check_chains(np.int64(3)) == 3
    with pytest.raises(ValueError, match="initvals has 2 entries for 4 chains"):
        pkd.sample(gauss_model, RandomWalkStep, initvals=[{}, {}])
    with pytest.raises(ValueError, match="random_seed = -1"):
        pkd.sample(gauss_model, RandomWalkStep, random_seed=-1)


def test_unpicklable_factory_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(pkd, "_start_local_cluster", None)
    lock = threading.Lock()

    def factory():
        with lock:
            return gauss_model()

    with pytest.raises(TypeError, match="model_factory cannot be pickled.*top-level function"):
        pkd.sample(factory, RandomWalkStep)


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r'pip install "pymc-kameleon\[distributed\]"'):
        pkd.sample(gauss_model, RandomWalkStep)


def test_compiledir_plugin_loads_without_importing_pytensor(tmp_path):
    """The plugin travels by value: a fresh process loads it before PyTensor is imported."""
    import subprocess

    import cloudpickle

    for root in (None, str(tmp_path / "cd")):
        (tmp_path / f"{root is None}.pkl").write_bytes(
            cloudpickle.dumps(pkd._compiledir_plugin(root)))
    code = (
        "import os, pickle, sys, types\n"
        "def load(name):\n"
        f"    return pickle.loads(open(os.path.join({str(tmp_path)!r}, name), 'rb').read())\n"
        "default, rooted = load('True.pkl'), load('False.pkl')\n"
        "assert 'pytensor' not in sys.modules and 'pymc_kameleon' not in sys.modules\n"
        "worker = types.SimpleNamespace(name='w/1', local_directory='/scratch/worker-x')\n"
        "default.setup(worker)\n"
        "print(os.environ['PYTENSOR_FLAGS'])\n"
        "rooted.setup(worker)\n"
        "import pytensor\n"
        "print(pytensor.config.base_compiledir)\n"
    )
    env = {**os.environ, "PYTENSOR_FLAGS": "floatX=float64"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    flags, compiledir = out.stdout.strip().splitlines()
    assert flags == "floatX=float64,base_compiledir=/scratch/pymc-kameleon-pytensor/worker-w_1"
    assert compiledir == str(tmp_path / "cd" / "worker-w_1")


class _FakeFuture:
    def __init__(self, key):
        self.key = key

    def done(self):
        return False


class _FakeClient:
    def __init__(self):
        self.submitted, self.cancelled, self.closed = [], [], False

    def register_plugin(self, plugin, name=None):
        self.plugin = plugin

    def scheduler_info(self):
        return {"workers": {}}

    def submit(self, fn, *args, key, pure):
        self.submitted.append(_FakeFuture(key))
        return self.submitted[-1]

    def cancel(self, futures, force=False):
        self.cancelled.extend(futures)

    def close(self):
        self.closed = True


class _FakeCluster:
    closed = False

    def close(self):
        self.closed = True


def test_keyboard_interrupt_cancels_tasks_and_closes_embedded_cluster(monkeypatch):
    fake_client, fake_cluster = _FakeClient(), _FakeCluster()
    monkeypatch.setattr(pkd, "_start_local_cluster", lambda n, kw: (fake_cluster, fake_client))

    def interrupted(futures, timeout):
        raise KeyboardInterrupt

    monkeypatch.setattr(pkd, "_wait_some", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pkd.sample(gauss_model, RandomWalkStep, chains=3, progressbar=False)
    assert len(fake_client.submitted) == 3
    assert fake_client.cancelled == fake_client.submitted
    assert fake_client.closed and fake_cluster.closed


# ---------------------------------------------------------------- on a 2-worker LocalCluster
@pytest.mark.parametrize(
    ("step_factory", "progressbar"), [(RandomWalkStep, False), (kameleon_step, True)],
    ids=["RandomWalkStep", "KameleonStep-progressbar"],
)
def test_four_chains_equal_sequential_pm_sample(client, monkeypatch, step_factory, progressbar):
    bars = []

    class RecordingProgress(pkd._Progress):
        def __init__(self, *args):
            super().__init__(*args)
            bars.append(self)
            self.events = 0

        def handle_event(self, event):
            self.events += 1
            super().handle_event(event)

    monkeypatch.setattr(pkd, "_Progress", RecordingProgress)
    kwargs = {"draws": 60, "tune": 60, "random_seed": 2026, "discard_tuned_samples": False}
    got = pkd.sample(gauss_model, step_factory, chains=4, client=client, compiledir=COMPILEDIR,
                     progressbar=progressbar, compute_convergence_checks=False, **kwargs)
    want = sequential(gauss_model, step_factory, 4, **kwargs)
    assert_same_draws(got, want)  # posterior, sample_stats and both warm-up groups
    assert "warmup_posterior" in groups(got)
    assert got["posterior"]["chain"].values.tolist() == [0, 1, 2, 3]
    assert got["posterior"].attrs["tuning_steps"] == 60
    assert got["posterior"].attrs["sampling_time"] > 0
    assert client.status == "running"  # a client passed in is left open
    (bar,) = bars
    assert bar.done == [120] * 4
    if progressbar:
        assert bar.events >= 4  # every chain reported from its worker
    else:
        assert bar.events == 0


def test_each_worker_process_has_its_own_compiledir(client):
    pkd.sample(gauss_model, RandomWalkStep, chains=2, client=client, compiledir=COMPILEDIR,
               draws=5, tune=5, random_seed=1, **QUIET)
    dirs = client.run(worker_compiledir)
    compiledirs = [d for d, _, _ in dirs.values()]
    assert len(set(compiledirs)) == len(dirs) == 2
    for compiledir, marker, _ in dirs.values():
        assert marker is not None and marker.startswith(COMPILEDIR)
        assert compiledir.startswith(marker)


def test_killed_worker_chain_is_rerun_with_the_same_draws(client, tmp_path):
    kwargs = {"draws": 100, "tune": 100, "random_seed": 11}
    result: dict = {}

    def run():
        try:
            result["data"] = pkd.sample(
                slow_model, RandomWalkStep, chains=4, client=client, compiledir=COMPILEDIR,
                callback=functools.partial(mark_draw, str(tmp_path)), **QUIET, **kwargs)
        except BaseException as err:  # pragma: no cover - reported below
            result["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    while not any(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)
    victim_pid = int(next(tmp_path.iterdir()).name.split("-")[0])
    pids = client.run(os.getpid)
    (victim,) = [addr for addr, pid in pids.items() if pid == victim_pid]
    with contextlib.suppress(Exception):
        client.run(os._exit, 1, workers=[victim])  # the reply never comes: CommClosedError
    thread.join(timeout=300)

    assert "error" not in result, result.get("error")
    assert_same_draws(result["data"], sequential(slow_model, RandomWalkStep, 4, **kwargs))
    assert victim_pid not in client.run(os.getpid).values()  # the process really died
    assert len(list(tmp_path.iterdir())) >= 5  # ... and its chain started again elsewhere
    client.wait_for_workers(2, timeout=60)


def chain_running() -> bool:
    """In a worker: is a chain of pymc_kameleon.distributed running in this process?"""
    return pkd._CHAIN_LOCK.locked()


def test_keyboard_interrupt_cancels_the_tasks_on_a_given_client(client, monkeypatch):
    seen = []
    wait_some = pkd._wait_some

    def interrupted_once_running(futures, timeout):
        seen.extend(f for f in futures if f not in seen)
        if any(client.run(chain_running).values()):
            raise KeyboardInterrupt
        return wait_some(futures, timeout)

    monkeypatch.setattr(pkd, "_wait_some", interrupted_once_running)
    with pytest.raises(KeyboardInterrupt):  # chains of >= 16 s each (4000 x 4 ms)
        pkd.sample(slow_model, RandomWalkStep, chains=4, client=client, compiledir=COMPILEDIR,
                   draws=2000, tune=2000, random_seed=1, **QUIET)
    interrupted = time.monotonic()
    assert len(seen) == 4
    assert all(f.status == "cancelled" for f in seen)
    assert client.status == "running"  # not ours to close
    # the running chains notice the cancellation and free their workers
    while any(client.run(chain_running).values()) and time.monotonic() < interrupted + 60:
        time.sleep(0.05)
    assert time.monotonic() - interrupted < 8
    assert not any(client.processing().values())


def test_failing_chain_is_named(client):
    initvals = [None, None, {"x": np.array([100.0, 0.0])}, None]
    with pytest.raises(pkd.ChainError, match="chain 2 failed while sampling") as info:
        pkd.sample(slow_model, RandomWalkStep, chains=4, client=client, compiledir=COMPILEDIR,
                   initvals=initvals, draws=50, tune=50, random_seed=3, **QUIET)
    assert info.value.chain == 2
    assert "slow_logp refuses x[0] = 100.0" in str(info.value)
    assert "Traceback in the worker" in str(info.value)


def test_model_factory_errors_name_the_chain(client):
    with pytest.raises(pkd.ChainError, match=r"chain \d failed while building the model: "
                       r"FileNotFoundError: no such file: 'data.csv'"):
        pkd.sample(failing_model, RandomWalkStep, chains=2, client=client, **QUIET)
    with pytest.raises(pkd.ChainError, match="model_factory returned str, not a pymc.Model"):
        pkd.sample(not_a_model, RandomWalkStep, chains=2, client=client, **QUIET)
    with pytest.raises(pkd.ChainError, match="building the step: TypeError"):
        pkd.sample(gauss_model, functools.partial(RandomWalkStep, bogus=1), chains=2,
                   client=client, **QUIET)


def test_warnings_of_worker_processes_reach_the_caller(client):
    """pm.Metropolis on an estimator model warns that the chain is not exact
    (PseudoMarginalWarning, issued in the worker); the caller's filters must see it, as
    with pm.sample (before: only in the worker processes' logs)."""
    factory = functools.partial(noisy_model, 1)
    with pytest.warns(PseudoMarginalWarning, match="does NOT target the exact posterior"):
        pkd.sample(factory, pm.Metropolis, chains=2, client=client, compiledir=COMPILEDIR,
                   draws=10, tune=10, random_seed=1, **QUIET)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PseudoMarginalWarning)
        with pytest.raises(PseudoMarginalWarning):
            pkd.sample(factory, pm.Metropolis, chains=2, client=client,
                       compiledir=COMPILEDIR, draws=10, tune=10, random_seed=1, **QUIET)
        # our steps are exact: nothing to warn about
        pkd.sample(factory, RandomWalkStep, chains=2, client=client, compiledir=COMPILEDIR,
                   draws=10, tune=10, random_seed=1, **QUIET)


def test_gp_glass_pseudo_marginal_four_chains(client):
    path = glass_path()
    if path is None:
        pytest.skip(f"UCI Glass data not found (set {GLASS_ENV_VAR} or provide shared/data)")
    factory = functools.partial(glass_model, str(path), 8)
    kwargs = {"draws": 15, "tune": 15, "random_seed": 5}
    got = pkd.sample(factory, RandomWalkStep, chains=4, client=client, compiledir=COMPILEDIR,
                     **QUIET, **kwargs)
    assert got["posterior"]["theta"].shape == (4, 15, 9)
    assert np.isfinite(got["sample_stats"]["lp"].values).all()
    if not steps_reseed_estimators():
        pytest.xfail(f"with PyMC {pm.__version__} the step methods do not reseed likelihood "
                     "estimators from pm.sample's per-chain generator, so sequential "
                     "pm.sample shares one estimator stream between its chains")
    assert_same_draws(got, sequential(factory, RandomWalkStep, 4, **kwargs))


def test_embedded_local_cluster_is_started_and_closed(monkeypatch):
    started = []
    start = pkd._start_local_cluster

    def recording_start(n_workers, cluster_kwargs):
        started.append(start(n_workers, cluster_kwargs))
        return started[-1]

    monkeypatch.setattr(pkd, "_start_local_cluster", recording_start)
    kwargs = {"draws": 20, "tune": 20, "random_seed": 99}
    got = pkd.sample(gauss_model, RandomWalkStep, chains=2, cluster_kwargs={"n_workers": 2},
                     **QUIET, **kwargs)
    assert_same_draws(got, sequential(gauss_model, RandomWalkStep, 2, **kwargs))
    ((cluster, client),) = started
    assert client.status == "closed"
    assert cluster.status.name == "closed"
