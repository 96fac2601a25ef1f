"""Chains on Dask: ``pymc_kameleon.distributed.sample`` against sequential ``pm.sample``.

Most tests share one ``LocalCluster`` with 2 worker processes of 1 thread each; the tests
marked "real cluster" run against a ``dask scheduler`` and two ``dask worker`` processes that
this module starts on 127.0.0.1 (skipped without the ``dask`` command).  The factories
below are top-level functions of this module, which the workers import by name (the worker
processes get the test session's ``sys.path``).  Their PyTensor compilation directories
live under ``<base_compiledir>/pymc-kameleon-tests`` (one per worker), so that a second run of
the suite finds its compiled modules.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
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
from checks import wrap_py  # noqa: E402

from pymc_kameleon import (  # noqa: E402
    KameleonStep,
    PseudoMarginalWarning,
    RandomWalkStep,
    pseudo_marginal_potential,
)
from pymc_kameleon import distributed as pkd  # noqa: E402
from pymc_kameleon.models import gp_classification_model  # noqa: E402
from pymc_kameleon.models.gpc import GLASS_ENV_VAR, load_glass  # noqa: E402
from pymc_kameleon.models.synthetic import gaussian_model  # noqa: E402
from pymc_kameleon.parallel import plugin as pkp  # noqa: E402

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


def announce_draw(directory: str, topic: str, trace, draw) -> None:
    """``pm.sample`` callback: at draw 20 of a chain, leave a file named after the process
    and send the process id to the scheduler's event ``topic``."""
    if draw.draw_idx == 20:
        Path(directory, f"{os.getpid()}-{time.monotonic_ns()}").touch()
        distributed.get_worker().log_event(topic, os.getpid())


def data_model() -> pm.Model:
    """Observed and constant data: groups without a chain dimension."""
    with pm.Model() as model:
        shift = pm.Data("shift", np.arange(3.0))
        mu = pm.Normal("mu", shape=2)
        pm.Normal("y", mu[0] + shift, observed=np.array([0.1, 0.2, 0.3]))
        pm.Deterministic("total", mu.sum())
    return model


def compiledir_marker() -> str | None:
    return os.environ.get(pkp._COMPILEDIR_ENV)


def worker_compiledir() -> tuple[str, str | None, int]:
    return (str(pytensor.config.compiledir), os.environ.get(pkp._COMPILEDIR_ENV),
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


# ------------------------------------------------------------------- a real cluster (dask CLI)
class DaskCLICluster:
    """A ``dask scheduler`` and ``dask worker`` processes started here, on 127.0.0.1."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.scheduler_file = str(directory / "scheduler.json")
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.env.pop("PYTENSOR_FLAGS", None)
        self.procs: list[subprocess.Popen] = []
        self.start("scheduler", "--host", "127.0.0.1", "--port", "0",
                   "--dashboard-address", "127.0.0.1:0", "--scheduler-file", self.scheduler_file)

    def start(self, *args: str) -> subprocess.Popen:
        log = open(self.directory / f"{len(self.procs)}.log", "wb")  # noqa: SIM115
        self.procs.append(subprocess.Popen([DASK, *args], env=self.env, stdout=log,
                                           stderr=subprocess.STDOUT, cwd=self.directory))
        return self.procs[-1]

    def add_worker(self, name: str, nthreads: int = 1) -> subprocess.Popen:
        return self.start("worker", "--scheduler-file", self.scheduler_file, "--name", name,
                          "--nthreads", str(nthreads), "--nworkers", "1", "--host", "127.0.0.1",
                          "--no-dashboard", "--local-directory", str(self.directory))

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGINT)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


DASK = shutil.which("dask", path=os.pathsep.join([os.path.dirname(sys.executable),
                                                  os.environ.get("PATH", "")]))


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory):
    if DASK is None:
        pytest.skip("the dask command line (dask scheduler, dask worker) is not installed")
    cluster = DaskCLICluster(tmp_path_factory.mktemp("dask-cli"))
    try:
        for i in range(2):
            cluster.add_worker(f"cli-{i}")
        cluster.client = distributed.Client(scheduler_file=cluster.scheduler_file, timeout=60,
                                            set_as_default=False)
        cluster.client.wait_for_workers(2, timeout=120)
        yield cluster
        cluster.client.close()
    finally:
        cluster.close()


def plugins_on_scheduler(client) -> list[str]:
    return client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.worker_plugins))


# ---------------------------------------------------------------------- no cluster needed
def test_one_chain_tasks_merge_into_pm_sample_result():
    """Tasks run in this process, with the seed sequence of chain i (``SeedSequence(S,
    n_children_spawned=i)``) and merged: equal to ``pm.sample``, groups without a chain
    dimension (observed and constant data) and warm-up groups included.  The internal task
    functions, without a cluster, so that a failure points at them, not at Dask (the cluster
    tests check the same draws through ``sample``)."""
    kwargs = {"draws": 30, "tune": 20, "discard_tuned_samples": False}
    payload = pkd._dumps((data_model, RandomWalkStep, kwargs), "the task")
    parts = [pkd._run_chain(payload, i, np.random.default_rng(
        np.random.SeedSequence(7, n_children_spawned=i)), None) for i in range(3)]
    assert [p.chain for p in parts] == [0, 1, 2]
    merged = pkd._merge_chains([p.data for p in parts], sampling_time=1.5)
    want = sequential(data_model, RandomWalkStep, 3, random_seed=7, **kwargs)
    assert_same_draws(merged, want)
    assert {"observed_data", "constant_data", "warmup_posterior"} <= set(groups(merged))
    assert merged["posterior"].attrs["sampling_time"] == 1.5
    assert merged["posterior"]["chain"].values.tolist() == [0, 1, 2]
    for key in ("n_evals_total", "n_evals_chains"):  # the bill of all chains, as pm.sample's
        assert merged["sample_stats"].attrs[key] == want["sample_stats"].attrs[key]
    np.testing.assert_array_equal(merged["sample_stats"].attrs["n_evals_per_chain"],
                                  want["sample_stats"].attrs["n_evals_per_chain"])


def test_progress_bars_show_each_chains_evaluations():
    """The tasks' progress messages carry the chain's evaluations (``n_evals_total`` summed
    over our steps); the driver's bars show them, per chain or summed when combined."""
    from pymc_kameleon.parallel import chains as pkc
    from pymc_kameleon.parallel import progress as pkpr

    assert pkc._draw_evals([{"n_evals_total": 7, "accept": 1.0}, {"accept": 0.5},
                            {"n_evals_total": 5}]) == 12
    assert pkc._draw_evals([{"accept": 0.5}]) is None  # PyMC's steps only: nothing shown
    for mode, want in ((True, ["1,200 evals", "30 evals"]), ("combined", ["1,230 evals"])):
        bars = pkpr._Progress(2, tune=5, draws=5, mode=mode, run_id="r")
        try:
            for chain, evals in ((0, 1000), (0, 1200), (1, 30)):
                bars.handle_event((0.0, {"run": "r", "chain": chain, "done": 3,
                                         "evals": evals, "worker": "w"}))
            bars.handle_event((0.0, {"run": "other", "chain": 1, "done": 3, "evals": 99}))
            assert [t.fields["evals"] for t in bars._bar.tasks] == want
        finally:
            bars.close()


class Untouchable:
    """A ``client`` that fails the test when used: the arguments are checked before."""

    def __getattr__(self, name):
        raise AssertionError(f"the client was used ({name})")


def test_arguments_are_checked_before_the_cluster_is_used():
    client = Untouchable()
    with pytest.raises(TypeError, match="not a pymc.Model"):
        pkd.sample(gauss_model(), RandomWalkStep, client=client)
    with pytest.raises(TypeError, match="step_factory must be callable"):
        pkd.sample(gauss_model, 3, client=client)
    for key, value in (("cores", 2), ("step", RandomWalkStep), ("trace", "zarr")):
        with pytest.raises(TypeError, match=f"'{key}'"):
            pkd.sample(gauss_model, RandomWalkStep, client=client, **{key: value})
    with pytest.raises(TypeError, match="return_inferencedata=False"):
        pkd.sample(gauss_model, RandomWalkStep, client=client, return_inferencedata=False)
    for chains in (0, 2.5, "2", [2], True):
        with pytest.raises(ValueError, match="chains must be a positive integer"):
            pkd.sample(gauss_model, RandomWalkStep, chains=chains, client=client)
    with pytest.raises(ValueError, match="initvals has 2 entries for 4 chains"):
        pkd.sample(gauss_model, RandomWalkStep, chains=4, initvals=[{}, {}], client=client)
    with pytest.raises(ValueError, match="non-negative"):
        pkd.sample(gauss_model, RandomWalkStep, random_seed=-1, client=client)
    lock = threading.Lock()

    def factory():
        with lock:
            return gauss_model()

    with pytest.raises(TypeError, match="model_factory cannot be pickled.*top-level function"):
        pkd.sample(factory, RandomWalkStep, client=client)


def test_missing_dask_names_the_extra(monkeypatch):
    """The message names installs that work: Dask's own, or the extra from a clone."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r'pip install "dask\[distributed\]".*'
                                          r'pip install "\.\[distributed\]" from a clone'):
        pkd.sample(gauss_model, RandomWalkStep)


def test_compiledir_plugin_loads_without_importing_pytensor(tmp_path):
    """The plugin travels by value: a fresh process loads it before PyTensor is imported.
    (The internal plugin, loaded in a fresh process where nothing is imported yet.)"""
    import cloudpickle

    for root in (None, str(tmp_path / "cd")):
        (tmp_path / f"{root is None}.pkl").write_bytes(
            cloudpickle.dumps(pkp._compiledir_plugin(root)))
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


# ---------------------------------------------------------------- on a 2-worker LocalCluster
@pytest.mark.parametrize(
    ("step_factory", "progressbar"), [(RandomWalkStep, False), (kameleon_step, True)],
    ids=["RandomWalkStep", "KameleonStep-progressbar"],
)
def test_four_chains_equal_sequential_pm_sample(client, step_factory, progressbar):
    kwargs = {"draws": 60, "tune": 60, "random_seed": 2026, "discard_tuned_samples": False}
    got = pkd.sample(gauss_model, step_factory, chains=4, client=client, compiledir=COMPILEDIR,
                     progressbar=progressbar, compute_convergence_checks=False, **kwargs)
    want = sequential(gauss_model, step_factory, 4, **kwargs)
    assert_same_draws(got, want)  # posterior, sample_stats and both warm-up groups
    assert "warmup_posterior" in groups(got)
    assert got["posterior"]["chain"].values.tolist() == [0, 1, 2, 3]
    assert got["posterior"].attrs["tuning_steps"] == 60
    assert got["posterior"].attrs["sampling_time"] > 0
    assert got["sample_stats"].attrs["n_evals_total"] == want["sample_stats"].attrs["n_evals_total"]
    assert client.status == "running"  # a client passed in is left open
    assert pkp._PLUGIN_NAME not in plugins_on_scheduler(client)


def test_default_chains_are_pm_samples(client):
    """``chains=None`` runs as many chains as ``pm.sample`` does, with the same draws."""
    kwargs = {"draws": 10, "tune": 10, "random_seed": 5}
    got = pkd.sample(gauss_model, RandomWalkStep, client=client, compiledir=COMPILEDIR,
                     **QUIET, **kwargs)
    with gauss_model():
        want = pm.sample(step=RandomWalkStep(), **QUIET, **kwargs)
    assert_same_draws(got, want)


def test_each_worker_process_has_its_own_compiledir(client):
    pkd.sample(gauss_model, RandomWalkStep, chains=2, client=client, compiledir=COMPILEDIR,
               draws=5, tune=5, random_seed=1, **QUIET)
    dirs = client.run(worker_compiledir)
    compiledirs = [d for d, _, _ in dirs.values()]
    assert len(set(compiledirs)) == len(dirs) == 2
    for compiledir, marker, _ in dirs.values():
        assert marker is not None and marker.startswith(COMPILEDIR)
        assert compiledir.startswith(marker)


def kill_a_worker_mid_run(client, tmp_path) -> None:
    """Sample 4 slow chains on 2 workers and SIGKILL the process of the first chain to reach
    draw 20: its chain must run again elsewhere and the result equal ``pm.sample``'s."""
    topic = f"test-draw-20-{tmp_path.name}"
    killed: list[int] = []

    def kill_first(event):
        if not killed:  # runs in the client's event loop: no blocking calls here
            killed.append(int(event[1]))
            os.kill(killed[0], signal.SIGKILL)

    client.subscribe_topic(topic, kill_first)
    kwargs = {"draws": 100, "tune": 100, "random_seed": 11}
    try:
        got = pkd.sample(slow_model, RandomWalkStep, chains=4, client=client,
                         compiledir=COMPILEDIR, **QUIET, **kwargs,
                         callback=functools.partial(announce_draw, str(tmp_path), topic))
    finally:
        client.unsubscribe_topic(topic)
    assert_same_draws(got, sequential(slow_model, RandomWalkStep, 4, **kwargs))
    assert len(killed) == 1
    assert killed[0] not in client.run(os.getpid).values()  # the process really died
    assert len(list(tmp_path.iterdir())) >= 5  # ... and its chain started again elsewhere
    client.wait_for_workers(2, timeout=120)  # the nanny restarts it


def test_killed_worker_chain_is_rerun_with_the_same_draws(client, tmp_path):
    kill_a_worker_mid_run(client, tmp_path)


def touch_at_draw_5(directory: str, trace, draw) -> None:
    if draw.draw_idx == 5:
        Path(directory, str(os.getpid())).touch()


def interrupt_main_thread_when(directory: Path, timed_out: list, deadline: float) -> None:
    """Send SIGINT to the main thread once a chain has left a file in ``directory``, or at
    ``deadline`` seconds with ``timed_out`` set, so that the test fails instead of hanging.

    A file, not a scheduler event, so that nothing but the chains decides when.
    """
    end = time.monotonic() + deadline
    while not any(directory.iterdir()):
        if time.monotonic() > end:
            timed_out.append(deadline)
            break
        time.sleep(0.05)
    # a real SIGINT, sent to the main thread: only there does it wake a blocked lock wait
    # (_thread.interrupt_main() only sets a flag; os.kill may pick this thread)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def test_keyboard_interrupt_cancels_the_chains_on_a_given_client(client, tmp_path):
    """Ctrl-C while chains run: the tasks stop (chains of most of an hour otherwise), the
    client stays open, and the run leaves nothing registered on the scheduler."""
    timed_out: list[float] = []
    watcher = threading.Thread(target=interrupt_main_thread_when, daemon=True,
                               args=(tmp_path, timed_out, 300.0))
    # Ctrl-C must raise KeyboardInterrupt here: a process started in the background by a
    # shell without job control (nohup ... &) ignores SIGINT, and Python keeps it ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pkd.sample(slow_model, RandomWalkStep, chains=4, client=client,
                       compiledir=COMPILEDIR, draws=75_000, tune=75_000, random_seed=1,
                       callback=functools.partial(touch_at_draw_5, str(tmp_path)), **QUIET)
    finally:
        signal.signal(signal.SIGINT, previous)
    watcher.join()
    assert not timed_out, "no chain reached draw 5 within the deadline"
    assert client.status == "running"  # not ours to close
    # both workers are free again: a task on each of them returns
    for address in client.nthreads():
        assert client.submit(os.getpid, workers=[address], pure=False).result(timeout=60)
    assert pkp._PLUGIN_NAME not in plugins_on_scheduler(client)


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


@pytest.mark.slow  # one to three minutes: 4 chains of the 9-d GP classification model
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


def test_embedded_local_cluster_is_started_and_closed():
    """Without a client: a LocalCluster of its own, whose processes are gone afterwards; a
    worker with two threads still runs one chain at a time, and says so."""
    import multiprocessing

    before = set(multiprocessing.active_children())
    kwargs = {"draws": 20, "tune": 20, "random_seed": 99}
    with pytest.warns(UserWarning, match="one chain at a time"):
        got = pkd.sample(gauss_model, RandomWalkStep, chains=2,
                         cluster_kwargs={"n_workers": 1, "threads_per_worker": 2},
                         **QUIET, **kwargs)
    assert_same_draws(got, sequential(gauss_model, RandomWalkStep, 2, **kwargs))
    assert set(multiprocessing.active_children()) <= before


# ------------------------------------------------------------------------- on a real cluster
def test_real_cluster_equal_draws_and_nothing_left_registered(cli_cluster):
    """``dask scheduler`` + 2 ``dask worker`` processes: the draws of ``pm.sample``, each
    worker its own compile directory, and afterwards no plugin on the scheduler, so a
    worker that joins later keeps its own PyTensor settings."""
    client = cli_cluster.client
    kwargs = {"draws": 30, "tune": 30, "random_seed": 3}
    got = pkd.sample(gauss_model, RandomWalkStep, chains=3, client=client,
                     compiledir=COMPILEDIR, **QUIET, **kwargs)
    assert_same_draws(got, sequential(gauss_model, RandomWalkStep, 3, **kwargs))
    markers = [m for _, m, _ in client.run(worker_compiledir).values()]
    assert len(set(markers)) == 2 and all(m and m.startswith(COMPILEDIR) for m in markers)
    assert pkp._PLUGIN_NAME not in plugins_on_scheduler(client)
    late = cli_cluster.add_worker("cli-late")
    try:
        client.wait_for_workers(3, timeout=120)
        envs = client.run(compiledir_marker)  # (without importing PyTensor there)
    finally:
        late.send_signal(signal.SIGINT)
        late.wait(timeout=60)
    assert sorted(envs.values(), key=str) == sorted([*markers, None], key=str)


@pytest.mark.slow  # a minute or two; test_killed_worker_chain_is_rerun_... is its fast twin
def test_real_cluster_survives_a_killed_worker(cli_cluster, tmp_path):
    kill_a_worker_mid_run(cli_cluster.client, tmp_path)
