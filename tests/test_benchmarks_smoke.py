"""Smoke test of the benchmark suite: every sampler on a tiny budget, outputs written."""

from __future__ import annotations

import json

import pytest

from benchmarks import synthetic
from benchmarks.common import SAMPLERS


def test_synthetic_quick_mode_writes_table_and_plots(tmp_path):
    """``python -m benchmarks.synthetic --quick`` on a tiny budget (2-d, 60 + 60 iterations)."""
    synthetic.main(["--target", "banana-strong", "--quick", "--dim", "2", "--chains", "1",
                    "--tune", "60", "--draws", "60", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "banana-strong.json").read_text())
    results = data["chains"]
    assert sorted(r["sampler"] for r in results) == sorted(SAMPLERS)
    for r in results:
        assert r["draws"] == 60 and r["wall"] > 0 and r["evals"] > 0
        assert r["ess"] > 0 and 0 <= r["coverage"] <= 1
    by_key = {r["sampler"]: r for r in results}
    # honest counts: ours d = 2 per draw (plus the start and the Laplace start, about 40
    # evaluations over 120 draws), 2 per coordinate for Metropolis
    assert 2.0 < by_key["fkamh"]["evals_per_iteration"] < 2.6
    assert by_key["metropolis"]["evals_per_iteration"] == pytest.approx(4.0, abs=0.05)
    assert by_key["demz"]["evals_per_iteration"] == pytest.approx(2.0, abs=0.05)

    table = (tmp_path / "banana-strong.md").read_text()
    assert "2-d banana B(0.1, 100)" in table
    for spec in SAMPLERS.values():
        assert f"| {spec.label}" in table
    for name in ("banana-strong_metrics.png", "banana-strong_traces.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_cli_rejects_unknown_sampler(tmp_path, capsys):
    with pytest.raises(SystemExit):
        synthetic.main(["--target", "flower", "--samplers", "nope", "--out", str(tmp_path)])
    assert "unknown samplers" in capsys.readouterr().err
