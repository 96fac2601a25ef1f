"""Smoke test of ``python -m benchmarks.surrogate_screen`` on a tiny budget."""

from __future__ import annotations

import numpy as np

from benchmarks import surrogate_screen


def test_surrogate_screen_runs_and_counts_evaluations(capsys):
    rows = surrogate_screen.main(["--models", "pk", "--tune", "80", "--draws", "20",
                                  "--chains", "2", "--scales", "1,2", "--screens", "rw,krr"])
    assert [(r["screen"], r["scale"]) for r in rows] == [
        ("rw", 1.0), ("rw", 2.0), ("krr", 1.0), ("krr", 2.0)]
    for r in rows:
        assert r["tuning_evals"] > 0 and r["evals"] > 0 and np.isfinite(r["ess"])
    # the plain walk evaluates every proposal; the screen only those that pass stage 1
    assert rows[0]["stage1"] == 1.0 and rows[0]["evals_per_iter"] == 1.0
    assert rows[2]["evals_per_iter"] < 1.0 and rows[2]["stage1"] < 1.0
    assert "| pk | 1 | krr | 2.00x | fixed | 1 n_steps |" in capsys.readouterr().out


def test_surrogate_screen_adapts_the_scale(capsys):
    rows = surrogate_screen.main(["--models", "pk", "--tune", "80", "--draws", "20",
                                  "--chains", "2", "--scales", "", "--screens", "krr,screen",
                                  "--adapt", "product:0.1", "--adapt-draws", "5"])
    assert [(r["screen"], r["adapt"]) for r in rows] == [
        ("krr", "product 0.1"), ("screen", "product 0.1")]
    for r in rows:
        assert r["scale"] > 0 and r["tuning_evals"] > 0 and 0.0 <= r["moves"] <= r["stage1"]
    assert "| product 0.1 | 1 n_steps |" in capsys.readouterr().out
