"""TrialSelection: round-robin trials of candidate values scored by ESJD (no PyMC)."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_kameleon.adaptation import TrialSelection


def _run(sel: TrialSelection, jumps: dict, iters: int = 5, draws: int | None = None) -> list:
    """Drive the trials; every iteration of candidate ``v`` accepts with probability 1/2 and
    jumps ``jumps[v]`` (squared); return the value in use at each draw."""
    used = []
    for _ in range(draws if draws is not None else sel.trial_draws):
        used.append(sel.value)
        for _ in range(iters):
            sel.record(0.5, jumps[sel.value])
        sel.next_draw()
    return used


def test_round_robin_blocks_then_the_best_is_kept():
    sel = TrialSelection((0.1, 0.5, 1.0), block=2, rounds=3)
    used = _run(sel, {0.1: 1.0, 0.5: 3.0, 1.0: 2.0})
    assert used == [0.1, 0.1, 0.5, 0.5, 1.0, 1.0] * 3
    assert sel.done and sel.value == 0.5
    # the first round is not scored: 2 rounds x 2 draws x 5 iterations per candidate
    assert sel.iterations == [20, 20, 20]
    np.testing.assert_allclose(sel.scores(), [0.5, 1.5, 1.0])
    assert not sel.next_draw() and sel.value == 0.5  # frozen after the choice


def test_the_first_round_does_not_count():
    """A candidate that jumps far only in the unscored first round is not chosen."""
    sel = TrialSelection((0.1, 1.0), block=1, rounds=2)
    sel.record(1.0, 100.0)  # first round, candidate 0.1
    sel.next_draw()
    sel.record(1.0, 1.0)  # first round, candidate 1.0
    sel.next_draw()
    sel.record(1.0, 0.5)  # scored: 0.1
    sel.next_draw()
    sel.record(1.0, 2.0)  # scored: 1.0
    sel.next_draw()
    assert sel.done and sel.value == 1.0


def test_per_coordinate_jumps_score_the_slowest_coordinate():
    sel = TrialSelection((0.1, 1.0), block=1, rounds=2)
    jumps = {0.1: np.array([1.0, 1.0]), 1.0: np.array([9.0, 0.1])}  # 1.0: far, but not in x[1]
    _run(sel, jumps)
    np.testing.assert_allclose(sel.scores(), [0.5, 0.05])
    assert sel.value == 0.1


def test_cut_short_keeps_the_best_scored_or_the_one_in_use():
    sel = TrialSelection((0.1, 0.5, 1.0), block=2, rounds=4)
    _run(sel, {0.1: 1.0, 0.5: 3.0, 1.0: 2.0}, draws=3)  # the first round is not over
    assert sel.value == 0.5 and sel.choose() == 0.5  # nothing scored: the one in use
    sel = TrialSelection((0.1, 0.5, 1.0), block=1, rounds=4)
    _run(sel, {0.1: 1.0, 0.5: 3.0, 1.0: 2.0}, draws=5)  # scored: 0.1, 0.5
    assert sel.choose() == 0.5 and sel.done


def test_step_down_after_the_trials():
    sel = TrialSelection((0.3, 1.0, 0.1), block=1, rounds=2)
    assert not sel.step_down()  # trials running: nothing to step down from
    _run(sel, {0.1: 1.0, 0.3: 2.0, 1.0: 3.0})
    assert sel.value == 1.0
    assert sel.step_down() and sel.value == 0.3  # the largest below, in any order
    assert not sel.next_draw() and sel.value == 0.3  # stays there
    assert sel.step_down() and sel.value == 0.1
    assert not sel.step_down() and sel.value == 0.1  # the smallest: nowhere to go
    assert not TrialSelection((0.5,)).step_down()


def test_one_candidate_is_fixed_and_noise_free_of_nan():
    sel = TrialSelection((0.3,))
    assert sel.done and sel.trial_draws == 0 and sel.value == 0.3
    sel.record(np.nan, 1.0)
    assert not sel.next_draw() and sel.value == 0.3
    sel = TrialSelection((0.1, 1.0), block=1, rounds=2)
    _run(sel, {0.1: 1.0, 1.0: 2.0})
    sel2 = TrialSelection((0.1, 1.0), block=1, rounds=2)
    for _ in range(2):
        sel2.record(np.nan, 1.0)  # an undefined acceptance counts as a rejection
        sel2.next_draw()
    assert np.isfinite(sel.scores()).all()


@pytest.mark.parametrize("kwargs", [
    {"values": ()}, {"values": (0.1, -1.0)}, {"values": (np.inf,)},
    {"values": (0.1, 1.0), "block": 0}, {"values": (0.1, 1.0), "rounds": 1},
])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        TrialSelection(**kwargs)
