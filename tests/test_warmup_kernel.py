"""The warm-up kernel (adaptation.warmup_kernel) against independent computations, and the
steps that use it."""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pymc as pm
import pytest
from scipy.stats import multivariate_normal

from pymc_kameleon import KameleonStep, RandomWalkStep
from pymc_kameleon.adaptation.warmup import regularised_covariance, window_ends
from pymc_kameleon.adaptation.warmup_kernel import (
    PROBE_EVERY,
    WarmupKernel,
    random_walk_target,
)

COV = np.array([[2.0, 0.6], [0.6, 0.5]])


def test_the_warmup_kernel_does_not_import_pymc():
    # the package's __init__ imports PyMC: a bare package object stands in for it
    code = (
        "import importlib.util, sys, types\n"
        "pkg = types.ModuleType('pymc_kameleon'); pkg.__path__ = ['pymc_kameleon']\n"
        "sys.modules['pymc_kameleon'] = pkg\n"
        "import pymc_kameleon.adaptation.warmup_kernel\n"
        "assert 'pymc' not in sys.modules and 'pytensor' not in sys.modules, "
        "sorted(m for m in sys.modules if m.startswith(('pymc', 'pytensor')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def _fed_kernel(to_the_end=False, length=20, seed=0):
    """A kernel fed known positions for draws 1..length (20 iterations each)."""
    rng = np.random.default_rng(seed)
    kernel = WarmupKernel(dim=2, target=random_walk_target(2), to_the_end=to_the_end)
    state = kernel.init()
    window, moves, infos = [], 0, {}
    for draw in range(1, length + 1):
        for _ in range(20):
            x = rng.multivariate_normal([1.0, -1.0], COV)
            moved = bool(rng.random() < 0.5)
            kernel.record(state, x, 0.3, moved)
            window.append(x)
            moves += moved
        before = (np.array(window), moves, state.precond.cov)
        infos[draw] = kernel.update_draw_at(state, x, draw, length, accepts=[0.3] * 20), before
        if infos[draw][0].new_window:
            window, moves = [], 0
    return kernel, state, infos


def test_a_window_end_sets_the_map_from_the_window_shrunk_toward_the_last_map():
    kernel, state, infos = _fed_kernel()
    ends = window_ends(20)
    assert [d for d, (info, _) in infos.items() if info.new_window] == list(ends)
    assert [d for d, (info, _) in infos.items() if info.done] == [20]
    # the last window, recomputed independently: NumPy's moments, shrinkage in the whitened
    # coordinates of the prior (the last map scaled by the walk's scale ratio)
    _, (x, moves, last_cov) = infos[20]
    prior = _ratio_after_update(kernel, infos, 20) ** 2 * last_cov
    n_eff, d, n_prior = moves / 2.0, 2, 4.0
    chol = np.linalg.cholesky(prior)
    white = np.linalg.solve(chol, np.linalg.solve(chol, np.cov(x.T)).T)
    lam = min(1.0, d / n_eff)
    est = (1 - lam) * white + lam * np.diag(np.diag(white))
    expected = chol @ ((n_eff * est + n_prior * np.eye(d)) / (n_eff + n_prior)) @ chol.T
    np.testing.assert_allclose(state.precond.cov, expected, rtol=1e-10)
    np.testing.assert_allclose(state.precond.mean, x.mean(axis=0), rtol=1e-12)
    assert state.rw.value == pytest.approx(kernel.scale0)  # the scale restarts
    assert state.window_index == len(ends) and state.window.count == 0


def _ratio_after_update(kernel, infos, draw):
    """The scale ratio the window end used: the draw's Robbins-Monro update applied to the
    ratio before it, recomputed with the kernel's own RobbinsMonro (tested elsewhere)."""
    from pymc_kameleon.adaptation import RobbinsMonro

    s0 = kernel.scale0
    rm = RobbinsMonro(s0, kernel.target, kernel.exponent, lower=0.02 * s0, upper=20 * s0)
    previous = max(d for d, (info, _) in infos.items() if info.new_window and d < draw)
    for _ in range(previous + 1, draw + 1):
        rm.update(0.3)
    return rm.value / s0


def test_to_the_end_keeps_doubling_windows_and_never_hands_over():
    _, _, infos = _fed_kernel(to_the_end=True, length=10)
    assert [d for d, (info, _) in infos.items() if info.new_window] == list(window_ends(10))
    assert not any(info.done for info, _ in infos.values())
    kernel, state, _ = _fed_kernel(to_the_end=True, length=10)
    x = np.zeros(2)
    news = [d for d in range(11, 45)
            if kernel.update_draw_at(state, x, d, 10, accepts=[0.3]).new_window]
    assert news == [20, 40]


def test_final_freezes_the_walk_and_returns_its_map():
    kernel, state, _ = _fed_kernel(length=8)
    precond = kernel.final(state)
    assert precond is state.precond and state.window is None


def test_propose_is_a_symmetric_walk_with_the_scale_in_whitened_coordinates():
    kernel, state, _ = _fed_kernel()  # past the first windows: a map that is not the identity
    assert not np.allclose(state.precond.chol, np.eye(2))
    x = np.array([0.4, -0.7])
    u = state.precond.to_u(x)
    rng = np.random.default_rng(3)
    expected_rng = copy.deepcopy(rng)
    u_new = kernel.propose(state, u, rng)
    s = state.rw.value
    np.testing.assert_array_equal(u_new, u + s * expected_rng.standard_normal(2))
    # log q(x | x*) - log q(x* | x) of the walk N(x, s^2 L L^T) in model coordinates, and
    # of N(u, s^2 I) in whitened ones, is 0 (the map's Jacobian cancels): no correction
    x_new = state.precond.to_x(u_new)
    q = s**2 * state.precond.cov
    log_fwd = multivariate_normal(x, q).logpdf(x_new)
    log_rev = multivariate_normal(x_new, q).logpdf(x)
    assert log_rev - log_fwd == pytest.approx(0.0, abs=1e-12)
    log_fwd_u = multivariate_normal(u, s**2 * np.eye(2)).logpdf(u_new)
    log_rev_u = multivariate_normal(u_new, s**2 * np.eye(2)).logpdf(u)
    assert log_rev_u - log_fwd_u == pytest.approx(0.0, abs=1e-12)
    # a smaller stage scales the same draw by its factor
    half = kernel.propose(state, u, np.random.default_rng(5), factor=0.5)
    np.testing.assert_array_equal(half, u + 0.5 * s * np.random.default_rng(5).standard_normal(2))


def test_a_probe_proposes_the_current_point_once_in_probe_every_with_a_noisy_density():
    kernel, state, _ = _fed_kernel()
    u = np.array([0.2, -0.1])
    probes = [i for i in range(3 * PROBE_EVERY) if kernel.probe(i, noisy=True)]
    assert probes == [PROBE_EVERY - 1, 2 * PROBE_EVERY - 1, 3 * PROBE_EVERY - 1]
    assert not any(kernel.probe(i, noisy=False) for i in range(3 * PROBE_EVERY))
    np.testing.assert_array_equal(kernel.propose(state, u, np.random.default_rng(0), probe=True), u)


def test_a_kernel_step_hands_over_after_the_warmup():
    """The sampler takes over at draw 13 of a 12-draw warm-up with the map of the last
    window, which stays frozen.  Seen in the stats: KAMH's history holds the kernel
    iterations only, and its first refresh comes after 50 of them (10 draws of 5), at the
    start of draw 23 (``scaling`` is NaN and ``n_history`` 0 until then)."""
    with pm.Model():
        pm.MvNormal("x", mu=np.zeros(2), cov=COV)
        step = KameleonStep(warmup_draws=12, n_steps=5, rng=2)
        point, scaling, n_history, maps = {"x": np.zeros(2)}, [], [], []
        for _ in range(30):
            point, stats = step.step(point)
            scaling.append(stats[0]["scaling"])
            n_history.append(stats[0]["n_history"])
            maps.append(step.preconditioner)
    assert np.all(np.isnan(scaling[:22])) and np.all(np.isfinite(scaling[22:]))
    assert n_history[21] == 0 and n_history[22] == 50
    assert not np.allclose(maps[12].chol, maps[11].chol)  # the last window closed
    assert not np.allclose(maps[12].chol, np.eye(2))
    for m in maps[13:]:
        np.testing.assert_array_equal(m.chol, maps[12].chol)
        np.testing.assert_array_equal(m.mean, maps[12].mean)

def _drive(kernel, state, draws, length, tune, position, logp=None, seed=0, until=None):
    """Feed ``kernel`` 5 iterations per draw at ``position(draw, rng)``; return the positions
    by draw, and per closing draw the map mean and the walk's scale just before the close."""
    rng = np.random.default_rng(seed)
    by_draw, closes = {}, {}
    for draw in range(1, draws + 1):
        by_draw[draw] = [position(draw, rng) for _ in range(5)]
        for x in by_draw[draw]:
            kernel.record(state, x, 0.3, True)
        rw = copy.deepcopy(state.rw)
        rw.update(0.3, target=state.noise.target(rw.target))
        before = (state.precond.cov.copy(), rw.value)
        info = kernel.update_draw_at(state, x, draw, length, accepts=[0.3] * 5, tune=tune,
                                  logp=None if logp is None else logp(draw))
        if info.new_window:
            closes[draw] = (state.precond.mean.copy(), state.precond.cov.copy(), before,
                            (state.rw.value, state.rw.t))
    return by_draw, closes


def _pooled(by_draw, first, last):
    """Positions of draws ``first..last`` (1-based, inclusive), computed apart from the kernel."""
    return np.array([x for d in range(first, last + 1) for x in by_draw[d]])


def test_whole_tuning_windows_hold_their_draws_and_the_last_merges_with_the_one_before():
    kernel = WarmupKernel(dim=2, target=random_walk_target(2), to_the_end=True)
    state = kernel.init()
    tune, length = 200, 100
    by_draw, closes = _drive(kernel, state, tune, length, tune,
                             lambda d, rng: rng.multivariate_normal([1.0, -1.0], COV))
    # written out: the warm-up's windows of 100 draws, then one ending at 200 - 50
    assert sorted(closes) == [15, 25, 45, 100, 150]
    starts = {15: 1, 25: 16, 45: 26, 100: 46, 150: 46}  # the last pools draws 46..150
    for end, first in starts.items():
        np.testing.assert_allclose(closes[end][0], _pooled(by_draw, first, end).mean(axis=0),
                                   rtol=1e-12)
    # the merged window's covariance: NumPy's over draws 46..150, regularised toward the
    # map before it scaled by the walk's tuned scale, which it keeps (the map changes little)
    prev_cov, scale = closes[150][2]
    x = _pooled(by_draw, 46, 150)
    prior = (scale / kernel.scale0) ** 2 * prev_cov
    expected = regularised_covariance(np.cov(x.T), x.shape[0] / 2.0, prior, 4.0)
    np.testing.assert_allclose(closes[150][1], expected, rtol=1e-10)
    assert closes[150][3] == (scale, 0) and closes[100][3] == (kernel.scale0, 0)
    assert state.rw.t == 50  # ... and adapts for the rest of tuning
    # nothing is collected after the last window: the draws 151..200 adapt the scale only
    assert state.window is None and state.window_index == 5
    np.testing.assert_array_equal(state.precond.cov, closes[150][1])


def test_the_first_window_drops_the_climb_from_the_initial_point():
    kernel = WarmupKernel(dim=2, target=random_walk_target(2))
    climbing = 6

    def position(draw, rng):  # far away and coming closer, then the posterior
        if draw <= climbing:
            return np.array([80.0 - 10.0 * draw, 40.0]) + rng.standard_normal(2)
        return rng.multivariate_normal([1.0, -1.0], COV)

    def logp(draw):
        return -1000.0 + 150.0 * draw if draw <= climbing else -2.0 - 0.1 * (draw % 3)

    state = kernel.init()
    by_draw, closes = _drive(kernel, state, 20, 100, None, position, logp)
    # independently: log densities of draws 1..15; the climb ends at the first reaching the
    # median of the second half; the window keeps its draws from the latest start (at
    # eighths of 15 draws: 0, 2, 4, 6, 8) not after it
    values = np.array([logp(d) for d in range(1, 16)])
    cut = int(np.flatnonzero(values >= np.median(values[7:]))[0])
    start = max(s for s in (0, 2, 4, 6, 8) if s <= cut)
    assert (cut, start) == (climbing, climbing)
    np.testing.assert_allclose(closes[15][0], _pooled(by_draw, start + 1, 15).mean(axis=0),
                               rtol=1e-12)
    # without log densities (or from a start in the bulk) the whole window is kept
    state = kernel.init()
    by_draw, closes = _drive(kernel, state, 20, 100, None, position)
    np.testing.assert_allclose(closes[15][0], _pooled(by_draw, 1, 15).mean(axis=0),
                               rtol=1e-12)
    state = kernel.init()
    by_draw, closes = _drive(kernel, state, 20, 100, None,
                             lambda d, rng: rng.multivariate_normal([1.0, -1.0], COV),
                             lambda d: -2.0)
    np.testing.assert_allclose(closes[15][0], _pooled(by_draw, 1, 15).mean(axis=0),
                               rtol=1e-12)


def test_random_walk_step_uses_its_whole_tuning_phase():
    """Under pm.sample (tune known: told by PyMC 6, given on PyMC 5) RandomWalkStep's
    windows end at 15, 25,
    45 and 100 % of half of tuning and once more a tenth of tuning before its end; before,
    the window after the warm-up's ended with tuning and was never used."""
    with pm.Model():
        pm.Normal("x", 0.0, [1.0, 10.0], shape=2)
        step = RandomWalkStep(tune_draws=300)
        pm.sample(tune=300, draws=5, chains=1, cores=1, step=step, random_seed=1,
                  progressbar=False, compute_convergence_checks=False)
    assert step.warmup.window_ends(150, 300) == (22, 38, 68, 150, 250)
    assert step.warmup_state.window_index == 5
