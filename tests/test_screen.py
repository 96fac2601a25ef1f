"""The surrogate screen: its learning, its two stages, and the exactness of a screened chain."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from checks import GAUSS_COV, gaussian_groups_passing

import pymc_kameleon.adaptation.screen as screen_module
from pymc_kameleon.adaptation.kernel import ChainState, Iteration, Proposal
from pymc_kameleon.adaptation.screen import ScreenedMetropolis, SurrogateScreen

_PREC = np.linalg.inv(GAUSS_COV)
#: The whitening map ``x = m + L u`` of the test's chains: not the target's own, so that the
#: surrogate's model coordinates and the chain's whitened ones differ.
_MAP_MEAN = np.array([0.5, -0.3])
_MAP_CHOL = 1.2 * np.linalg.cholesky(GAUSS_COV)


def _logp(x: np.ndarray) -> float:
    return -0.5 * float(x @ _PREC @ x)


class NumpyMetropolis:
    """A pure-NumPy :class:`~pymc_kameleon.adaptation.kernel.Metropolis` on ``x = m + L u``:
    one evaluation per proposal, the stored value of the current point in every ratio;
    ``record(x, logp)`` sees every evaluation (how a step feeds its screen)."""

    def __init__(self, logp, rng: np.random.Generator, record=None) -> None:
        self.logp, self.rng, self.record = logp, rng, record
        self.n_evals = 0

    def to_x(self, position: np.ndarray) -> np.ndarray:
        return _MAP_MEAN + _MAP_CHOL @ position

    def evaluate(self, position: np.ndarray) -> tuple[ChainState, np.ndarray]:
        x = self.to_x(position)
        logp = float(self.logp(x))
        self.n_evals += 1
        if self.record is not None:
            self.record(x, logp)
        return ChainState(np.array(position, copy=True), logp), x

    def decide(self, state: ChainState, new: ChainState, x_new: np.ndarray,
               log_accept: float) -> tuple[ChainState, float, bool]:
        if not math.isfinite(new.logp) or math.isnan(log_accept):
            log_accept = -math.inf
        accept_prob = float(np.exp(min(log_accept, 0.0)))
        if math.log(self.rng.random()) < log_accept:
            return new, accept_prob, True
        return state, accept_prob, False

    def step(self, state: ChainState, proposal: Proposal, adapts: bool = True,
             probe: bool = False) -> Iteration:
        if proposal.log_correction == -math.inf:
            return Iteration(state, 0.0, False, 0, adapts, probe)
        new, x_new = self.evaluate(proposal.position)
        state, accept_prob, accepted = self.decide(
            state, new, x_new, new.logp - state.logp + proposal.log_correction)
        return Iteration(state, accept_prob, accepted, 1, adapts, probe)


def _walk(mh, u0: np.ndarray, n_iter: int, scale: float, screen=None, state=None,
          draw_every: int = 5) -> np.ndarray:
    """A Gaussian random walk ``u* = u + scale e`` through ``mh``; with a learning ``screen``
    its ``update_draw`` runs every ``draw_every`` iterations.  Returns the model points."""
    chain = ChainState(np.array(u0, dtype=float), float(mh.evaluate(u0)[0].logp))
    out = np.empty((n_iter, u0.size))
    for t in range(n_iter):
        e = mh.rng.standard_normal(u0.size)
        chain = mh.step(chain, Proposal(chain.position + scale * e, 0.0)).state
        out[t] = mh.to_x(chain.position)
        if screen is not None and (t + 1) % draw_every == 0:
            screen.update_draw(state)
    return out


def _learned_screen(seed: int) -> tuple[SurrogateScreen, object]:
    """A screen that learned the target from one chain's tuning, then frozen."""
    screen = SurrogateScreen(max_points=200, min_points=50, refit_points=50)
    state = screen.init(2)
    rng = np.random.default_rng(seed)
    inner = NumpyMetropolis(_logp, rng, record=lambda x, lp: screen.update(state, x, lp))
    mh = ScreenedMetropolis(inner, screen, state)
    _walk(mh, np.zeros(2), 1500, 2.0, screen, state)
    assert state.active and state.error < 0.5
    return screen, screen.final(state)


def _wrong_screen(seed: int) -> tuple[SurrogateScreen, object]:
    """A screen that learned a wrong density (shifted by one sd, uncorrelated, four times
    too wide in one coordinate and too narrow in the other) and found it accurate."""
    screen = SurrogateScreen(max_points=200, min_points=50, refit_points=50)
    state = screen.init(2)
    rng = np.random.default_rng(seed)
    mean, var = np.array([2.0, -1.0]), np.array([8.0, 0.5])
    for _ in range(4):
        for x in mean + rng.standard_normal((50, 2)) * np.sqrt(var):
            screen.update(state, x, -0.5 * float(np.sum((x - mean) ** 2 / var)))
        screen.update_draw(state)
    assert state.active
    return screen, screen.final(state)


# ------------------------------------------------------------------ learning
def test_screen_learns_in_model_coordinates_and_freezes():
    screen = SurrogateScreen(max_points=100, min_points=30, refit_points=40)
    state = screen.init(2)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 2)) @ np.linalg.cholesky(GAUSS_COV).T
    y = np.array([_logp(x) for x in X])
    for x, v in zip(X[:20], y[:20], strict=True):
        screen.update(state, x, v)
    assert not screen.update_draw(state).refitted  # fewer than min_points
    for x, v in zip(X[20:60], y[20:60], strict=True):
        screen.update(state, x, v)
    first = screen.update_draw(state)
    assert first.refitted and not first.active and math.isnan(first.error)  # nothing held out
    for x, v in zip(X[60:300], y[60:300], strict=True):
        screen.update(state, x, v)
    second = screen.update_draw(state)
    assert second.refitted and second.active and second.error < 0.2
    kept, _ = state.kept()
    np.testing.assert_array_equal(kept, X[200:])  # the newest max_points, oldest first
    # the surrogate is a log density of the model point up to a constant
    Z = rng.standard_normal((20, 2)) @ np.linalg.cholesky(GAUSS_COV).T
    diff = screen.log_density(state, Z) - np.array([_logp(z) for z in Z])
    assert np.std(diff) < 0.2
    screen.final(state)
    screen.update(state, X[0], y[0])
    assert state.n_new == 0 and not screen.update_draw(state).refitted


def test_early_fits_come_as_the_points_double():
    """Fits at ``min_points``, then after as many new points as the last fit had, until
    ``refit_points``."""
    screen = SurrogateScreen(max_points=400, min_points=30, refit_points=100)
    state = screen.init(2)
    X = np.random.default_rng(4).standard_normal((400, 2))
    fits = []
    for n, x in enumerate(X, start=1):
        screen.update(state, x, _logp(x))
        if screen.update_draw(state).refitted:
            fits.append(n)
    assert fits == [30, 60, 120, 220, 320]


def test_inaccurate_surrogate_keeps_the_screen_off():
    """Held-out values the surrogate misses by more than ``max_error`` deactivate it."""
    screen = SurrogateScreen(max_points=200, min_points=50, refit_points=50, max_error=0.5)
    state = screen.init(2)
    rng = np.random.default_rng(1)
    for _ in range(3):
        for x in rng.standard_normal((50, 2)):
            screen.update(state, x, _logp(x) + rng.normal(scale=1.0))  # noise sd 1 nat
        screen.update_draw(state)
    assert not state.active and state.error > 0.5


def test_active_screen_stays_on_below_keep_error():
    """On at ``max_error``, off above ``keep_error``: held-out noise of sd 0.7 nat does not
    switch a screen on at ``max_error=0.5`` but keeps an active one on (``keep_error`` 1);
    sd 2 switches it off."""
    rng = np.random.default_rng(2)

    def refit(screen, state, noise):
        for x in rng.standard_normal((50, 2)):
            screen.update(state, x, _logp(x) + rng.normal(scale=noise))
        return screen.update_draw(state)

    screen = SurrogateScreen(max_points=200, min_points=50, refit_points=50, max_error=0.5)
    state = screen.init(2)
    refit(screen, state, 0.0)
    assert refit(screen, state, 0.0).active  # on
    assert refit(screen, state, 0.7).active  # stays on: 0.5 < error <= 1
    assert not refit(screen, state, 2.0).active  # off above keep_error
    assert not refit(screen, state, 0.7).active  # stays off: error > 0.5
    assert 0.5 < state.error <= 1.0


def test_active_screen_lowers_the_target_and_raises_the_steps():
    """While active: targets capped at ``move_rate``, the work per draw's at ``target_tau``;
    iterations per draw grow by the screened iterations per evaluation since the last fit
    (after ``min_holdout`` passes), at most ``max_steps_factor``; frozen with the screen.
    Inactive: none changes."""
    screen = SurrogateScreen(max_points=200, min_points=50, refit_points=50, move_rate=0.08,
                             max_steps_factor=3.0)
    state = screen.init(2)
    assert screen.target(state, 0.234) == 0.234 and screen.steps_factor(state) == 1.0
    assert screen.work_target(state, 3.0) == 3.0
    state.active = True
    assert screen.target(state, 0.234) == 0.08 and screen.target(state, 0.05) == 0.05
    assert screen.work_target(state, 3.0) == 1.5 and screen.work_target(state, 1.0) == 1.0

    def draw(screened: int, passed: int) -> float:
        state.tally.screened, state.tally.passed = screened, passed
        screen.stats(state)  # the draw's end closes its tally
        screen.update_draw(state)  # the next draw's start sets the factor
        return screen.steps_factor(state)

    assert draw(40, 10) == 1.0  # fewer than min_holdout (20) passes: the last factor
    assert draw(40, 10) == 3.0  # 80 screened per 20 passes: 4, capped at 3
    assert draw(400, 380) == pytest.approx(480 / 400)
    state.screened = state.passed = 0  # as after a refit
    assert draw(100, 200) == 1.0  # never below 1
    state.screened = state.passed = 0
    assert draw(300, 20) == 3.0
    screen.final(state)
    assert draw(30, 30) == 3.0  # frozen
    state.active = False
    assert screen.steps_factor(state) == 1.0 and screen.target(state, 0.3) == 0.3
    for bad in ({"move_rate": 0.0}, {"move_rate": 1.0}, {"max_steps_factor": 0.5},
                {"target_tau": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SurrogateScreen(**bad)


# ------------------------------------------------------------------ the two stages
def test_stages_match_an_independent_computation():
    """Stage 1 passes exactly when ``log u < s(y) - s(x) + c``, with ``s`` recomputed from
    the fitted regression by hand; stage 2 hands ``decide`` the ratio
    ``log p(y) - log p(x) - (s(y) - s(x))`` with the stored ``log p(x)``."""
    screen, state = _learned_screen(2)
    state.active = True
    rng = np.random.default_rng(3)
    inner = NumpyMetropolis(_logp, rng)
    seen = []
    decide = inner.decide

    def recording_decide(st, new, x_new, log_accept):
        seen.append(log_accept)
        return decide(st, new, x_new, log_accept)

    inner.decide = recording_decide
    mh = ScreenedMetropolis(inner, screen, state)
    screen.stats(state)  # close the learning run's tallies

    def s(u):  # by hand: whiten the model point with the fit's map, kernel expansion
        x = _MAP_MEAN + _MAP_CHOL @ u
        z = np.linalg.solve(np.linalg.inv(state.whiten), x - state.mean)
        k = state.surrogate
        sq = np.sum((k.points - z) ** 2, axis=1)
        return float(np.exp(-sq / (2 * k.bandwidth**2)) @ k.alpha + k.offset)

    passes = 0
    for _ in range(300):
        u, v = rng.standard_normal(2), 1.5 * rng.standard_normal(2)
        c = float(rng.normal(scale=0.5))
        stored = _logp(inner.to_x(u)) + 0.3  # a stored value (an estimate) is never redone
        u1 = copy.deepcopy(rng).random()
        n_before = len(seen)
        it = mh.step(ChainState(u, stored), Proposal(v, c))
        r1 = s(v) - s(u) + c
        if math.log(u1) < r1:
            passes += 1
            assert it.n_evals == 1 and len(seen) == n_before + 1
            r2 = _logp(inner.to_x(v)) - stored - (s(v) - s(u))
            assert seen[-1] == pytest.approx(r2, abs=1e-8)
            assert it.accept_prob == pytest.approx(math.exp(min(r2, 0.0)))
        else:
            assert it.n_evals == 0 and len(seen) == n_before
            assert it.accept_prob == 0.0 and not it.accepted and it.state.logp == stored
    assert 30 < passes < 270  # both branches exercised
    stats = screen.stats(state)
    assert stats["evals_saved"] == 300 - passes
    assert stats["screen_stage1"] == pytest.approx(passes / 300)
    assert screen.stats(state)["evals_saved"] == 0  # closed


def test_inactive_screen_changes_nothing():
    """A learning but inactive screen and a probe pass through: the same draws, values and
    random numbers as the wrapped Metropolis alone."""
    plain = NumpyMetropolis(_logp, np.random.default_rng(5))
    a = _walk(plain, np.zeros(2), 400, 2.0)
    screen = SurrogateScreen(max_points=200, min_points=1000)  # never fits
    state = screen.init(2)
    inner = NumpyMetropolis(_logp, np.random.default_rng(5),
                            record=lambda x, lp: screen.update(state, x, lp))
    b = _walk(ScreenedMetropolis(inner, screen, state), np.zeros(2), 400, 2.0, screen, state)
    np.testing.assert_array_equal(a, b)
    assert state.n_seen == 401 and plain.rng.random() == inner.rng.random()
    screen, state = _learned_screen(6)
    mh = ScreenedMetropolis(NumpyMetropolis(_logp, np.random.default_rng(7)), screen, state)
    ref = NumpyMetropolis(_logp, np.random.default_rng(7))
    chain, proposal = ChainState(np.zeros(2), 0.0), Proposal(np.ones(2), 0.0)
    got, want = mh.step(chain, proposal, probe=True), ref.step(chain, proposal, probe=True)
    np.testing.assert_array_equal(got.state.position, want.state.position)
    assert got[1:] == want[1:] and got.probe and mh.rng.random() == ref.rng.random()


# ------------------------------------------------------------------ exactness by sampling
#: Group design as tests/test_delayed_acceptance.py: 4 disjoint groups of 4 chains, 1500
#: iterations each after 200 discarded, from draws of the target; a group passes when the
#: z-scores of both means and both variances are below 4 (a correct chain fails a group with
#: probability about 4 * 6e-5; the variance z-scores are heavier tailed, so one failing group
#: of four is allowed).  Proposals: 2 times the map's scale, so that stage 1 rejects often.
_GROUPS, _CHAINS, _ITER, _BURN = 4, 16, 1500, 200


def _groups_passing(screen, state, seed: int, logp=_logp) -> tuple[int, dict]:
    rng = np.random.default_rng(seed)
    draws = np.empty((_CHAINS, _ITER, 2))
    evals = iterations = 0
    for c in range(_CHAINS):
        inner = NumpyMetropolis(logp, rng)
        mh = ScreenedMetropolis(inner, screen, state)
        x0 = np.linalg.cholesky(GAUSS_COV) @ rng.standard_normal(2)
        u0 = np.linalg.solve(_MAP_CHOL, x0 - _MAP_MEAN)
        draws[c] = _walk(mh, u0, _ITER + _BURN, 2.0)[_BURN:]
        evals += inner.n_evals
        iterations += _ITER + _BURN
    return gaussian_groups_passing(draws, GAUSS_COV, _GROUPS), {
        **screen.stats(state), "evals_per_iter": evals / iterations}


@pytest.mark.parametrize(("make", "seed"), [(_learned_screen, 21), (_wrong_screen, 22)],
                         ids=["learned", "wrong"])
def test_screened_chain_is_exact(make, seed):
    screen, state = make(seed)
    screen.stats(state)
    passing, stats = _groups_passing(screen, state, seed)
    assert passing >= _GROUPS - 1
    assert 0.0 < stats["screen_stage1"] < 1.0 and stats["evals_per_iter"] < 0.9


def test_screened_chain_is_exact_with_a_stored_estimate():
    """Pseudo-marginal: unbiased log-normal noise (sd 0.8) in every evaluation; stage 2
    compares with the estimate stored at the current point, so the chain stays exact."""
    noise = np.random.default_rng(99)

    def noisy_logp(x):
        return _logp(x) + 0.8 * noise.standard_normal() - 0.5 * 0.8**2

    screen, state = _learned_screen(23)
    passing, _ = _groups_passing(screen, state, 23, noisy_logp)
    assert passing >= _GROUPS - 1


def test_second_stage_without_the_surrogate_ratio_fails(monkeypatch):
    """The check that the exactness test can fail: stage 2 accepting with ``p(y) / p(x)``
    alone samples a mixture of target and surrogate, and the group criterion rejects it."""
    monkeypatch.setattr(screen_module, "stage2_log_ratio", lambda lx, ly, sx, sy: ly - lx)
    screen, state = _wrong_screen(22)
    passing, _ = _groups_passing(screen, state, 22)
    assert passing <= 1
