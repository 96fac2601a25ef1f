"""The Laplace search in batches: the same mode and covariance from far fewer rounds.

:func:`~pymc_kameleon.adaptation.laplace.laplace_start` with ``logp_rows`` evaluates each
gradient, Hessian and check as one batch (an executor's workers run a batch at once); it
must find what the one-point search finds, from as many evaluations, all counted.  The
emulator's mode search uses it: its draws must not depend on the number of workers.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_kameleon import KameleonSMC
from pymc_kameleon.adaptation.laplace import laplace_start
from pymc_kameleon.adaptation.laplace_searches import laplace_searches
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.emulator import EmulatorProblem, EmulatorRun, EmulatorSettings

COV = np.array([[1.0, 0.9], [0.9, 1.0]]) * 1e-2
_P = np.linalg.inv(COV)


def _gauss(x):
    return -0.5 * (x - 3.0) @ _P @ (x - 3.0)


def _banana(x):  # curved: the mismatch check rejects its Gaussian, the Hessian stays
    return -x[0] ** 2 / 8 - 2.0 * (x[1] - 0.5 * x[0] ** 2 + 1.0) ** 2 - 0.5 * np.sum(x[2:] ** 2)


def _bimodal(x):
    return np.logaddexp(-0.5 * np.sum((x + 4) ** 2) - 3.0, -0.5 * np.sum((x - 4) ** 2))


@pytest.mark.parametrize(("f", "x0", "starts"), [
    (_gauss, np.zeros(2), ()),
    (_banana, np.array([1.0, 2.0, 0.5]), (np.array([-2.0, 0.0, 1.0]),)),
    (_bimodal, np.full(2, -3.0), (np.full(2, 2.0),)),
], ids=["gaussian", "banana", "bimodal"])
def test_batch_search_finds_what_the_one_point_search_finds(f, x0, starts):
    """Same mode, covariance, start and checks (the optimiser takes SciPy's own difference
    steps, so equal up to rounding); as many evaluations, each counted once; far fewer
    sequential rounds (calls)."""
    calls, rows_seen = [0], [0]

    def rows(X):
        calls[0] += 1
        rows_seen[0] += len(X)
        return np.array([f(x) for x in X])

    one = laplace_start(f, x0, 50 * (x0.size + 1), starts=starts)
    many = laplace_start(f, x0, 50 * (x0.size + 1), starts=starts,
                         logp_rows=rows)
    np.testing.assert_allclose(many.mode, one.mode, rtol=1e-9, atol=1e-12)
    assert many.logp == pytest.approx(one.logp, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(many.hessian_cov, one.hessian_cov, rtol=1e-8, atol=1e-14)
    assert (many.cov is None) == (one.cov is None) and many.start == one.start
    assert many.mismatch == pytest.approx(one.mismatch, rel=1e-8, abs=1e-12)
    assert many.n_evals == one.n_evals == rows_seen[0]
    assert calls[0] < one.n_evals / 4  # (~d + 1 points a round, the checks in one)


@pytest.mark.parametrize("f", [_gauss, _banana], ids=["gaussian", "banana"])
def test_search_without_the_check_saves_its_draws_only(f):
    """``check=False``: the same mode and Hessian, used as the covariance (also where the
    check rejects it: the banana), 50 evaluations fewer."""
    x0 = np.full(2 if f is _gauss else 3, 0.5)
    full = laplace_start(f, x0, 300)
    lean = laplace_start(f, x0, 300, check=False)
    np.testing.assert_array_equal(lean.mode, full.mode)
    np.testing.assert_array_equal(lean.cov, full.hessian_cov)
    assert lean.n_evals == full.n_evals - 50 and np.isnan(lean.mismatch)


def test_searches_together_equal_searches_alone():
    """Four banana searches, their rounds merged: each result equals its search run alone,
    every evaluation is counted once, the rounds are about those of the longest search;
    an error of the log density reaches the caller and no thread is left behind."""
    import threading

    starts = [np.array([1.0, 2.0, 0.5]), np.array([-2.0, 0.0, 1.0]), np.full(3, 3.0),
              np.array([0.1, -5.0, 2.0])]
    calls, seen = [0], [0]

    def rows(X):
        calls[0] += 1
        seen[0] += len(X)
        return np.array([_banana(x) for x in X])

    alone = [laplace_start(_banana, x, 200, logp_rows=rows) for x in starts]
    alone_calls, calls[0], seen[0] = calls[0], 0, 0
    together = laplace_searches(rows, starts, 200)
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(b.mode, a.mode)
        np.testing.assert_array_equal(b.hessian_cov, a.hessian_cov)
        assert (b.logp, b.n_evals, b.mismatch) == (a.logp, a.n_evals, a.mismatch)
    assert seen[0] == sum(r.n_evals for r in together)
    assert calls[0] < 0.4 * alone_calls

    def failing(X):
        if len(X) > 3:
            raise KeyError("the model failed")
        return np.array([_banana(x) for x in X])

    before = threading.active_count()
    with pytest.raises(KeyError, match="the model failed"):
        laplace_searches(failing, starts, 200)
    assert threading.active_count() == before


def test_emulator_search_is_batched_and_counted():
    """The emulator's start round: the search's points go to the problem in batches (no
    check of the Gaussians: their 50 draws each are not needed), and every evaluated point
    is counted in the run's points."""
    rng = np.random.default_rng(3)
    prior = stats.multivariate_normal(np.zeros(2), 100 * np.eye(2))
    lik = stats.multivariate_normal([1.0, -0.5], [[1.0, 0.8], [0.8, 1.0]])
    sizes = []

    def evaluate(X):
        sizes.append(len(X))
        return prior.logpdf(X).reshape(-1), lik.logpdf(X).reshape(-1)

    run = EmulatorRun(EmulatorProblem(prior.logpdf, evaluate,
                                      lambda n: rng.normal(0, 10, size=(n, 2)), 2),
                      EmulatorSettings(), 200, rng)
    run.step()
    assert run.phase == "design"
    searched = sum(sizes) - len(run.points()[0])  # the search's points are not fitted
    s = run.settings  # short climbs from every start, then the best finished
    assert 100 < searched < 3 * (s.search_starts * s.search_climb + s.search_keep * 60)
    assert len(sizes) < searched / 3


@pytest.fixture(scope="module")
def gauss_model():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 10.0, shape=2)
        pm.MvNormal("y", x, cov=np.array([[1.0, 0.8], [0.8, 1.0]]), observed=[1.0, -0.5])
    return model


def test_emulator_draws_do_not_depend_on_the_workers(gauss_model):
    """One and three thread workers: the same draws, evaluations and stats."""
    out = []
    for workers in (1, 3):
        with (ThreadPoolExecutor(workers) as pool, gauss_model,
              warnings.catch_warnings()):
            warnings.simplefilter("ignore")
            idata = pm.sample_smc(200, kernel=KameleonSMC, chains=1, cores=1,
                                  emulator=EmulatorSettings(correction_size=300),
                                  executor=pool, random_seed=7, progressbar=False,
                                  compute_convergence_checks=False)
        out.append(idata)
    one, three = (group_dataset(i, "posterior")["x"].values for i in out)
    np.testing.assert_array_equal(one, three)
    ss = [group_dataset(i, "sample_stats") for i in out]
    assert ss[0].attrs["n_evals_total"] == ss[1].attrs["n_evals_total"]
    np.testing.assert_array_equal(ss[0]["n_evals"].values, ss[1]["n_evals"].values)
    assert np.all(ss[0]["emulator_phase"].values.ravel()[-1] == 3)
