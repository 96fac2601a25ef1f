"""Benchmark figures: readable log axes, and metric figures redrawn from their JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.figure import Figure

from benchmarks import plots
from benchmarks.common import ChainResult


def _minor_labels(lo: float, hi: float) -> list[float]:
    ax = Figure().subplots()
    ax.barh([0, 1], [lo, hi])
    plots._log_axis(ax, [lo, hi])  # one axis of plot_metrics, at a chosen span
    ax.figure.canvas.draw()
    left, right = ax.get_xlim()
    return [float(t.get_text()) for t, v in zip(ax.xaxis.get_minorticklabels(),
                                                ax.xaxis.get_minorticklocs(), strict=True)
            if t.get_text() and left <= v <= right]


def test_log_axis_labels_minor_ticks_at_2_and_5_only():
    """The 0.06-3 axis of a benchmark figure: minor labels 0.2, 0.5, 2 (not 0.06 ... 0.9)."""
    labels = _minor_labels(0.08, 1.3)
    assert labels, "a span below two decades labels some minor ticks"
    mantissas = {round(v / 10.0 ** np.floor(np.log10(v)), 6) for v in labels}
    assert mantissas <= {2.0, 5.0}


def test_log_axis_labels_no_minor_ticks_over_two_decades():
    assert _minor_labels(0.01, 100.0) == []


def test_replot_redraws_metrics_from_json(tmp_path):
    """``python -m benchmarks.synthetic --replot``: every ``<target>.json`` gives
    ``<target>_metrics.png``."""
    chains = [
        ChainResult("banana-moderate", sampler, seed, 100, 100, wall=1.0 + seed, evals=1000,
                    accept=0.3, mean_norm=0.2 * seed, coverage=0.01 * seed, ess=50.0 * seed)
        for sampler in ("kamh", "metropolis") for seed in (1, 2)
    ]
    (tmp_path / "banana-moderate.json").write_text(json.dumps({
        "target": "banana-moderate", "title": "8-d banana B(0.03, 100)",
        "mode": "quick: tune 100 + draws 100 iterations", "run": "", "versions": "",
        "chains": [c.to_dict() for c in chains],
    }))
    written = plots.replot(tmp_path)
    assert written == [tmp_path / "banana-moderate_metrics.png"]
    png = written[0].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_replot_rejects_json_without_chain_fields(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({
        "target": "bad", "title": "bad", "mode": "quick: x", "chains": [{"sampler": "kamh"}],
    }))
    with pytest.raises(KeyError):
        plots.replot(tmp_path)
