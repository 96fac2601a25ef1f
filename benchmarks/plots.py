"""Figures of the synthetic benchmark (matplotlib's object API: no pyplot, no GUI backend).

* :func:`plot_metrics`: horizontal bars (mean over chains, error bar = sd, dots = chains) of
  ESS/s, ESS per 1000 evaluations, quantile coverage error and ``||mean||`` per sampler, in
  the spirit of Figure 5 of Sejdinovic et al. (2014).
* :func:`plot_traces`: per sampler, thinned traces of ``x1`` and ``x2`` of the first chain and
  their pair plot over exact i.i.d. draws of the target.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .common import SAMPLERS, ChainResult, Target, mean_sd

__all__ = ["plot_metrics", "plot_traces"]

_COLORS = {"ours": "#1f77b4", "pymc": "#ff7f0e", "nuts": "#7f7f7f"}
_PANELS = (
    ("ess_per_second", "min ESS per second of sampling"),
    ("ess_per_1k_evals", "min ESS per 1000 log-density evaluations\n(NUTS: per 1000 gradients)"),
    ("coverage", "quantile coverage error (0 is exact)"),
    ("mean_norm", "‖mean‖ (truth 0)"),
)


def _group(key: str) -> str:
    spec = SAMPLERS[key]
    return "ours" if spec.ours else ("nuts" if spec.gradient else "pymc")


def _label(key: str, results: list[ChainResult], full_iterations: int | None) -> str:
    label = SAMPLERS[key].label
    runs = [r for r in results if r.sampler == key]
    if full_iterations and runs and runs[0].tune + runs[0].draws < full_iterations:
        label += f" †({(runs[0].tune + runs[0].draws) // 1000}k it)"
    return label


def plot_metrics(results: list[ChainResult], target: Target, path: Path,
                 subtitle: str = "", full_iterations: int | None = None) -> Path:
    """Bar chart of the four headline metrics, one bar per sampler, written to ``path``.

    ``full_iterations``: the mode's iteration count; samplers run shorter are marked ``†``.
    """
    keys = [k for k in SAMPLERS if any(r.sampler == k for r in results)]
    labels = [_label(k, results, full_iterations) for k in keys]
    y = np.arange(len(keys))[::-1]
    fig = Figure(figsize=(13, 1.0 + 0.55 * len(keys) * 2), layout="constrained")
    axes = fig.subplots(2, 2, sharey=True)
    for ax, (metric, title) in zip(axes.ravel(), _PANELS, strict=True):
        span = []
        for yi, key in zip(y, keys, strict=True):
            values = np.array([getattr(r, metric) for r in results if r.sampler == key])
            values = values[np.isfinite(values)]
            if values.size == 0:
                continue
            mean, sd = mean_sd(values)
            low = min(sd, 0.95 * mean)  # log axes: keep the bar's lower error positive
            hatch = "//" if (metric == "ess_per_1k_evals" and SAMPLERS[key].gradient) else None
            ax.barh(yi, mean, xerr=[[low], [sd]], color=_COLORS[_group(key)], alpha=0.75,
                    hatch=hatch, edgecolor="k", linewidth=0.5, capsize=3, height=0.7)
            ax.plot(np.maximum(values, 1e-12), np.full(values.size, yi), "k.", ms=4,
                    alpha=0.6)
            span += [mean - low, mean + sd, *values]
        _log_axis(ax, [v for v in span if v > 0])
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.set_yticks(y, labels)
    handles = [Rectangle((0, 0), 1, 1, color=c, alpha=0.75) for c in _COLORS.values()]
    fig.legend(handles, ["pymc-kameleon", "PyMC gradient-free", "NUTS (uses gradient)"],
               loc="outside lower center", ncol=3, fontsize=9)
    fig.suptitle(f"{target.title}: mean ± sd over chains (dots: chains){subtitle}",
                 fontsize=11)
    fig.savefig(path, dpi=110)
    return path


def _log_axis(ax, values: list[float]) -> None:
    """Log x axis with room around ``values`` and plain-number tick labels."""
    ax.set_xscale("log")
    if not values:
        return
    lo, hi = min(values) / 2.0, max(values) * 2.0
    ax.set_xlim(lo, hi)
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    # when the axis spans less than two decades, label the minor ticks at 2 and 5 times a
    # power of ten (all eight of them crowd into one another near the decade's end)
    ax.xaxis.set_minor_formatter(NullFormatter())
    if hi / lo < 100:
        ax.xaxis.set_minor_locator(LogLocator(base=10.0, subs=(2.0, 5.0)))
        ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=8)


def plot_traces(results: list[ChainResult], target: Target, path: Path,
                reference: np.ndarray | None = None) -> Path:
    """Traces of ``x1``, ``x2`` and their pair plot for the first chain of every sampler.

    ``reference``: exact draws of the target shown in grey behind the pair plot.
    """
    first: dict[str, ChainResult] = {}
    for r in results:
        if r.trace is not None and r.sampler not in first:
            first[r.sampler] = r
    keys = [k for k in SAMPLERS if k in first]
    if reference is None:
        reference = target.exact_sample(5000, seed=0)
    ref = reference[:, :2]
    lims = [np.quantile(ref[:, j], [0.001, 0.999]) for j in range(2)]
    lims = [(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo)) for lo, hi in lims]
    fig = Figure(figsize=(13, 2.1 * len(keys) + 0.6), layout="constrained")
    axes = fig.subplots(len(keys), 3, gridspec_kw={"width_ratios": [2.2, 2.2, 1.1]},
                        squeeze=False)
    for row, key in zip(axes, keys, strict=True):
        r = first[key]
        tr = r.trace
        thin = max(1, r.draws // max(len(tr), 1))
        it = np.arange(len(tr)) * thin
        for j in range(2):
            lo = min(lims[j][0], float(tr[:, j].min()))
            hi = max(lims[j][1], float(tr[:, j].max()))
            row[j].plot(it, tr[:, j], lw=0.5, color=_COLORS[_group(key)])
            row[j].set_ylim(lo, hi)
            row[j].set_ylabel(f"x{j + 1}", fontsize=9)
            row[j].tick_params(labelsize=8)
        shown = "all draws" if thin == 1 else f"every {thin}th draw"
        row[0].set_title(f"{SAMPLERS[key].label}: seed {r.seed}, {shown}; this chain: min ESS "
                         f"{r.ess:.0f}, coverage error {r.coverage:.3f}, ‖mean‖ "
                         f"{r.mean_norm:.2f}", fontsize=9, loc="left")
        row[2].plot(ref[:, 0], ref[:, 1], ".", ms=1, color="0.8", rasterized=True)
        row[2].plot(tr[:, 0], tr[:, 1], ".", ms=1.5, color=_COLORS[_group(key)], alpha=0.6,
                    rasterized=True)
        row[2].set_xlim(min(lims[0][0], tr[:, 0].min()), max(lims[0][1], tr[:, 0].max()))
        row[2].set_ylim(min(lims[1][0], tr[:, 1].min()), max(lims[1][1], tr[:, 1].max()))
        row[2].tick_params(labelsize=8)
    axes[-1, 0].set_xlabel("draw (after tuning)", fontsize=9)
    axes[-1, 1].set_xlabel("draw (after tuning)", fontsize=9)
    axes[-1, 2].set_xlabel("x1 (grey: exact draws)", fontsize=9)
    fig.suptitle(f"{target.title}: first chain of each sampler", fontsize=11)
    fig.savefig(path, dpi=90)
    return path


def replot(folder: Path) -> list[Path]:
    """Redraw ``<target>_metrics.png`` for every ``<target>.json`` in ``folder`` (written by
    :mod:`benchmarks.synthetic`) without sampling again: for changes of the figure only.  The
    trace figures need the traces, which the JSON does not hold; they are left as they are."""
    names = {f.name for f in fields(ChainResult)} - {"trace"}
    written = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        results = [ChainResult(**{k: c[k] for k in names}) for c in data["chains"]]
        mode = data["mode"].split(":")[0]
        its = f"{results[0].tune:,} + {results[0].draws:,} iterations"
        n_chains = len({r.seed for r in results})
        subtitle = f"\n{mode}: {its}, {n_chains} chain(s)"
        target = SimpleNamespace(key=data["target"], title=data["title"])
        written.append(plot_metrics(results, target, folder / f"{target.key}_metrics.png",
                                    subtitle=subtitle,
                                    full_iterations=results[0].tune + results[0].draws))
    return written
