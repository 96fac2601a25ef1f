"""Markdown tables of suite results: one per model, and two summaries over models."""

from __future__ import annotations

import math

from .metrics import ESS_MIN, MEAN_TOL, RHAT_MAX, SD_TOL
from .models import ModelSpec
from .runner import SAMPLERS, RunResult

__all__ = ["failed_letters", "model_header", "model_table", "summary_tables"]

#: ESS per 1000 evaluations of our steps must be >= these multiples of PyMC's.
METROPOLIS_FACTOR = 3.0
SLICE_FACTOR = 1.0
OK, FAIL = "✓", "✗"

COLUMNS = (
    "sampler", "max R̂", "min bulk ESS", "min tail ESS", "ESS/s", "ESS/1k evals",
    "evals/iter", "max Δmean/sd_ref", "worst sd ratio", "wall [s]",
    f"R̂≤{RHAT_MAX}", f"ESS≥{ESS_MIN:.0f}", f"mean≤{MEAN_TOL}", f"sd±{SD_TOL:.0%}",
    f"ESS/1k ÷ Metropolis (≥{METROPOLIS_FACTOR:g})", f"ESS/1k ÷ Slice (≥{SLICE_FACTOR:g})",
    "wall ÷ Metropolis", "wall ÷ Slice",
)


def _num(x: float, fmt: str) -> str:
    return "n/a" if x is None or not math.isfinite(x) else format(x, fmt)


def _flag(ok: bool) -> str:
    return OK if ok else FAIL


def model_header(spec: ModelSpec, reference_meta: dict) -> str:
    """Title line and one line of metadata for a model's table."""
    tags = ["cheap" if spec.cheap else "expensive",
            "gradient" if spec.has_gradient else "no gradient"]
    if spec.multimodal:
        tags.append("**multimodal by design: criteria not applied**")
    if spec.pseudo_marginal:
        tags.append("pseudo-marginal")
    if spec.hard:
        tags.append(f"hard by design: {spec.hard}")
    ref = f"reference: {spec.reference} ({spec.reference_note})"
    if "max_rhat" in reference_meta:
        ref += (f", its max R̂ {reference_meta['max_rhat']:.4f}, "
                f"min bulk ESS {reference_meta['min_ess_bulk']:.0f}")
    return f"### {spec.name}: {spec.title}\n\nd = {spec.dim}; {'; '.join(tags)}; {ref}."


def _baseline(results: list[RunResult], key: str) -> RunResult | None:
    run = next((r for r in results if r.sampler == key), None)
    return run if run is not None and run.ok else None


def _ratio_cell(value: float, base: RunResult | None, attr: str, factor: float | None) -> str:
    if base is None:
        return "n/a"
    ratio = value / getattr(base, attr)
    text = _num(ratio, ".3g")
    if factor is not None and math.isfinite(ratio):
        text += " " + _flag(ratio >= factor)
    return text


def model_table(spec: ModelSpec, results: list[RunResult]) -> str:
    """Markdown table of every run on one model (rows in :data:`SAMPLERS` order)."""
    metro, slc = _baseline(results, "metropolis"), _baseline(results, "slice")
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for key, sampler in SAMPLERS.items():
        run = next((r for r in results if r.sampler == key), None)
        if run is None:
            continue
        label = sampler.label
        if spec.pseudo_marginal and not sampler.ours:
            label += " (MCWM: inexact)"
        if not run.ok:
            why = run.skipped or run.error or "no metrics"
            lines.append(f"| {label} | " + " | ".join([f"*{why}*"] + [""] * (len(COLUMNS) - 2))
                         + " |")
            continue
        a = run.accuracy
        criteria = [a["rhat_ok"], a["ess_ok"], a["mean_ok"], a["sd_ok"]]
        marks = [_flag(c) for c in criteria] if spec.criteria_apply else ["(" + _flag(c) + ")"
                                                                          for c in criteria]
        ours = sampler.ours
        cells = [
            label, _num(a["max_rhat"], ".3f"), _num(a["min_ess_bulk"], ".0f"),
            _num(a["min_ess_tail"], ".0f"), _num(run.ess_per_second, ".3g"),
            _num(run.ess_per_1k_evals, ".3g"), _num(run.evals_per_iteration, ".3g"),
            f"{_num(a['mean_err'], '.3f')} ({a['worst_mean']})",
            f"{_num(a['sd_ratio'], '.3f')} ({a['worst_sd']})", _num(run.wall, ".1f"),
            *marks,
            _ratio_cell(run.ess_per_1k_evals, metro, "ess_per_1k_evals",
                        METROPOLIS_FACTOR if ours else None),
            _ratio_cell(run.ess_per_1k_evals, slc, "ess_per_1k_evals",
                        SLICE_FACTOR if ours else None),
            _ratio_cell(run.wall, metro, "wall", None),
            _ratio_cell(run.wall, slc, "wall", None),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def failed_letters(run: RunResult) -> str:
    a = run.accuracy
    letters = [c for c, ok in zip("REMS", (a["rhat_ok"], a["ess_ok"], a["mean_ok"],
                                          a["sd_ok"]), strict=True) if not ok]
    return OK if not letters else " ".join(letters)


def summary_tables(specs: list[ModelSpec], results: list[RunResult]) -> str:
    """Criteria per sampler and model, then ESS/1k-evals ratios to Metropolis and Slice."""
    names = [s.name for s in specs]
    head = "| sampler | " + " | ".join(names) + " |\n|" + "---|" * (len(names) + 1)
    crit, eff = [head], [head]
    for key, sampler in SAMPLERS.items():
        row_c, row_e = [sampler.label], [sampler.label]
        if not any(r.sampler == key for r in results):
            continue
        for spec in specs:
            mine = [r for r in results if r.model == spec.name]
            run = next((r for r in mine if r.sampler == key), None)
            if run is None or not run.ok:
                cell = "–" if run is None or run.skipped else "error"
                row_c.append(cell)
                row_e.append(cell)
                continue
            cell = failed_letters(run)
            row_c.append(cell if spec.criteria_apply else f"({cell})")
            metro, slc = _baseline(mine, "metropolis"), _baseline(mine, "slice")
            parts = [_num(run.ess_per_1k_evals / b.ess_per_1k_evals, ".2g") if b else "n/a"
                     for b in (metro, slc)]
            row_e.append(" / ".join(parts))
        crit.append("| " + " | ".join(row_c) + " |")
        eff.append("| " + " | ".join(row_e) + " |")
    return ("**Criteria** (✓ = all four pass; otherwise the failing ones: R = max R̂ > "
            f"{RHAT_MAX}, E = min bulk ESS < {ESS_MIN:.0f}, M = a mean off by > {MEAN_TOL} "
            f"sd_ref, S = an sd off by > {SD_TOL:.0%}; parentheses: multimodal by design, "
            "criteria not applied)\n\n" + "\n".join(crit)
            + "\n\n**ESS per 1000 evaluations ÷ pm.Metropolis's / ÷ pm.Slice's** (the "
            f"criteria: ≥ {METROPOLIS_FACTOR:g} / ≥ {SLICE_FACTOR:g})\n\n" + "\n".join(eff))
