"""Iterations per draw chosen per posterior while tuning."""

from __future__ import annotations

import functools

import arviz as az
import numpy as np
import pymc as pm
import pytest
from checks import sample
from pymc.stats.convergence import WarningType

from pymc_kameleon import RandomWalkStep
from pymc_kameleon.adaptation.work import MAX_FACTOR, MIN_WINDOW, WorkPerDraw, _worst_tau
from pymc_kameleon.compat import group_dataset


def _ar1_factor(rho, n: int = 200, seed: int = 0) -> WorkPerDraw:
    """The window filled with ``n`` draws of independent AR(1) coordinates, one per entry
    of ``rho``."""
    rho = np.atleast_1d(np.asarray(rho, dtype=float))
    rng = np.random.default_rng(seed)
    work = WorkPerDraw(start=1, decide=n + 1)
    x = rng.standard_normal(rho.size)
    for draw in range(1, n + 1):
        x = rho * x + np.sqrt(1 - rho**2) * rng.standard_normal(rho.size)
        work.update(draw, x)
    work.final()
    return work


@pytest.mark.parametrize("rho", [0.5, 0.7, 0.8])
def test_autocorrelation_time_of_an_ar1(rho):
    """One window's estimate against the AR(1)'s ``(1 + rho) / (1 - rho)`` (3, 5.7, 9), over
    10 disjoint runs of 200 draws: the median within 25 % (one estimate has a relative sd
    of about 20-30 %).  The factor uses the smaller of the two halves' estimates."""
    exact = (1 + rho) / (1 - rho)
    works = [_ar1_factor(rho, seed=s) for s in range(10)]
    taus = [_worst_tau(np.asarray(w.positions)) for w in works]
    assert abs(np.median(taus) / exact - 1) < 0.25, (taus, exact)
    for w in works:
        x = np.asarray(w.positions)
        assert w.tau == min(_worst_tau(x[:100]), _worst_tau(x[100:]))


def test_the_worst_coordinate_decides():
    """Two independent coordinates and one with autocorrelation time 19: the estimate is
    that one's (median of 10 windows within 35 %), and the factor is the bound-clipped
    ``tau / 3``."""
    works = [_ar1_factor([0.0, 0.9, 0.0], seed=s) for s in range(10)]
    taus = [_worst_tau(np.asarray(w.positions)) for w in works]
    assert abs(np.median(taus) / 19.0 - 1) < 0.35, taus
    for w in works:
        assert w.final() == pytest.approx(min(4.0, max(1.0, w.tau / 3.0)))
        # a decision's own target (a surrogate screen's 1.5): the same tau, twice the factor
        assert w.final(1.5) == pytest.approx(min(4.0, max(1.0, w.tau / 1.5)))


def test_a_transient_in_one_half_does_not_count():
    """A chain nearly stuck for the first half of the window (AR(1) 0.98) and mixing well in
    the second: no more work.  Estimated over the whole window, as a broken variant would,
    the autocorrelation time exceeds the target."""
    rng = np.random.default_rng(1)
    work = WorkPerDraw(start=1, decide=201)
    x = np.zeros(2)
    for draw in range(1, 201):
        rho = 0.98 if draw <= 100 else 0.0
        x = rho * x + np.sqrt(1 - rho**2) * rng.standard_normal(2)
        work.update(draw, x)
    assert work.final() == 1.0
    whole = np.asarray(work.positions)
    assert whole.shape[0] / min(float(az.ess(whole[None, :, i])) for i in range(2)) > 3.0


def test_factor_is_clipped_and_needs_data():
    assert _ar1_factor([0.0, 0.0]).final() == 1.0  # independent draws: no more work
    assert _ar1_factor([0.995, 0.995]).final() == 4.0  # tau ~ 400: the bound
    short = WorkPerDraw(start=1, decide=10)
    for draw in range(1, 10):
        short.update(draw, np.ones(2) * draw)
    assert len(short.positions) < MIN_WINDOW and short.final() == 1.0
    stuck = WorkPerDraw(start=1, decide=201)
    for draw in range(1, 201):
        stuck.update(draw, np.array([float(draw % 7), 0.0]))  # one coordinate never moves
    assert stuck.final() == 4.0


def test_bound_reached_when_the_autocorrelation_asks_for_more():
    """``asked`` is ``tau / 3`` before the bound; ``bound_reached`` says it exceeds the
    bound: an AR(1) of 0.995 (tau ~ 400) and a stuck coordinate do, 0.7 (tau ~ 6) and a
    window without a decision do not.  Halves of 100 draws measure a time that long far
    too short (about 12 here): ``asked`` is a lower bound."""
    slow = _ar1_factor([0.995, 0.0])
    assert slow.bound_reached and MAX_FACTOR < slow.asked < 400 / 3
    mixing = _ar1_factor([0.7, 0.0])
    assert not mixing.bound_reached and 1.0 < mixing.asked < MAX_FACTOR
    assert not WorkPerDraw(start=1, decide=10).bound_reached
    stuck = WorkPerDraw(start=1, decide=201)
    for draw in range(1, 201):
        stuck.update(draw, np.array([float(draw % 7), 0.0]))
    stuck.final()
    assert stuck.bound_reached and stuck.asked == np.inf


def test_schedule():
    work = WorkPerDraw.schedule(1000, 500)
    assert (work.start, work.decide) == (700, 900)
    work = WorkPerDraw.schedule(500, 250)
    assert (work.start, work.decide) == (350, 450)
    assert WorkPerDraw.schedule(None, 500) is None
    assert WorkPerDraw.schedule(300, 150) is None  # too short for a window


def test_the_bound_on_the_factor_is_a_keyword():
    """``schedule``'s ``max_factor`` (default 4) bounds the factor: a stuck coordinate
    (infinite autocorrelation time) gets exactly the bound, 4, 8 or 100, and a chain whose
    ``tau / 3`` lies below every bound (AR(1) 0.7) the same factor under each; a bound
    below 1 is refused."""
    assert WorkPerDraw.schedule(1000, 500).max_factor == MAX_FACTOR == 4.0
    mixing = _ar1_factor([0.7, 0.0])
    assert 1.0 < mixing.final() < 4.0
    for bound in (None, 8.0, 100.0):
        kw = {} if bound is None else {"max_factor": bound}
        stuck, slow = (WorkPerDraw.schedule(1000, 500, **kw) for _ in range(2))
        for draw, x in enumerate(mixing.positions, start=stuck.start):
            stuck.update(draw, np.array([x[0], 0.0]))
            slow.update(draw, x)
        assert stuck.final() == (bound or 4.0)
        assert slow.final() == mixing.final()
    with pytest.raises(ValueError, match="max_factor"):
        WorkPerDraw.schedule(1000, 500, max_factor=0.5)


@pytest.fixture(scope="module")
def banana():
    """A 2-d banana on which a random walk with 5 iterations per draw mixes slowly."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 10.0)
        pm.Normal("y", 0.03 * x**2 - 3.0, 1.0)
    return model


@pytest.fixture(scope="module")
def normal2():
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=2)
    return model


def _n_steps(model, **kwargs) -> np.ndarray:
    # tune_draws: PyMC 5 does not tell the step the 600 tuning draws
    idata = sample(model, lambda: RandomWalkStep(tune_draws=600, **kwargs), draws=50,
                   tune=600, chains=2, seed=4)
    return np.asarray(idata.sample_stats["n_steps"].values)


def test_work_rises_where_the_chain_mixes_slowly(banana, normal2):
    """On the banana the count rises above the default 5 (both chains); on a standard
    normal, where 5 iterations give nearly independent draws, it stays at 5.  The count is
    constant after tuning.  A given ``n_steps`` is kept."""
    n = _n_steps(banana)
    assert np.all(n == n[:, :1]) and np.all(n > 5), n[:, 0]
    n = _n_steps(normal2)
    assert np.all(n == 5), np.unique(n)
    assert np.all(_n_steps(banana, n_steps=3) == 3)


def _bound_reports(idata) -> list:
    """The work-bound reports of the ``warning`` stat, tuning draws included."""
    stats = [group_dataset(idata, g)["warning"].values.ravel()
             for g in ("warmup_sample_stats", "sample_stats")]
    return [w for w in np.concatenate(stats)
            if w is not None and w.kind == WarningType.CONVERGENCE]


def test_a_chain_that_asks_for_more_than_the_bound_is_reported(banana, normal2):
    """With the bound at the default work (``max_work_factor=1``) every banana chain asks
    for more (its autocorrelation time per draw at 5 iterations is 12-38, not 3), so each
    reports once, through PyMC's ``warning`` stat, with the chain and a bound that would
    do; also from worker processes (``cores=2``).  The work stays at the bound.  On the
    standard normal (time about 1) no chain reports."""
    kw = {"draws": 50, "tune": 600, "chains": 2, "seed": 4, "keep_warning_stat": True,
          "discard_tuned_samples": False}
    step = functools.partial(RandomWalkStep, max_work_factor=1, tune_draws=kw["tune"])
    idata = sample(banana, step, cores=2, **kw)
    reports = _bound_reports(idata)
    assert len(reports) == 2, [r.message for r in reports]  # one per chain
    for report in reports:
        assert "this chain" in report.message and "max_work_factor" in report.message
        assert report.extra["asked"] > report.extra["bound"] == 1.0
    assert np.all(idata.sample_stats["n_steps"].values == 5)
    idata = sample(normal2, step, **kw)
    assert _bound_reports(idata) == []


@pytest.mark.parametrize("bad", [0.5, True, float("nan"), "4"])
def test_max_work_factor_is_validated(normal2, bad):
    with normal2, pytest.raises(ValueError, match="max_work_factor"):
        RandomWalkStep(max_work_factor=bad)
