"""The weighted sample behind a chain's draws, kept for the user (``weights_path=``).

Where KameleonSMC resamples its draws from an importance sample (the emulator's
correction, the recycled stages of ``recycle=`` or of the emulator's fallback), the
returned draws are equally weighted and the weights are gone.  With ``weights_path`` every
chain hands its weighted sample, and the design's evaluations of the emulator, to its
settings (:class:`~pymc_kameleon.run_settings.RunSettings`, which come back from PyMC's
chain processes), and the run writes one ``.npz`` file once every chain is done.  PyMC
builds the InferenceData itself, per stage, and keeps only the first chain's settings, so
a sample of variable size has no place there (``docs/emulator.md``, "The weighted
sample").

The file's arrays, ``n`` rows of the weighted samples of all chains, then ``m`` rows of
evaluated points outside them (the emulator's design):

``chain``, ``log_prior``, ``log_likelihood``, ``log_weight`` (n,)
    The row's chain, its true log prior and log likelihood (an estimate where the model's
    likelihood is estimated: the one stored with the point), and its importance log
    weight in the sampler's coordinates, unnormalised: a chain's log evidence is the
    log-mean-exp of its weights.
``x`` (n, d)
    The point in the sampler's coordinates (the raveled value variables, e.g.
    ``sigma_log__``), in the order of ``value_names`` and ``value_sizes``.
``x_<name>`` (n, ...)
    The model's variable ``<name>`` at each point (untransformed).
``design_chain``, ``design_log_prior``, ``design_log_likelihood``, ``design_x``, ``design_x_<name>``
    The same for the design's points, which carry no weight.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

__all__ = ["check_weights_path", "chain_weighted", "write_weighted"]


def check_weights_path(path) -> str | None:
    """``path`` as a string, or ``ValueError`` where its folder does not exist (before a
    run, not after it)."""
    if path is None:
        return None
    path = os.fspath(path)
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise ValueError(f"weights_path={path!r}: the folder {str(folder)!r} does not exist")
    return path


def _rows(point, X, prior, lik, log_w=None, like=None) -> dict[str, np.ndarray]:
    """Rows as arrays: the points, their terms (and weights), the model's variables (as
    in the dict ``like`` where there are no rows)."""
    X = np.asarray(X, dtype=float)
    out = {"x": X, "log_prior": np.asarray(prior, float),
           "log_likelihood": np.asarray(lik, float)}
    if log_w is not None:
        out["log_weight"] = np.asarray(log_w, float)
    values = [point.values(x) for x in X]
    for name, value in (values[0] if values else like).items():
        out[f"x_{name}"] = (np.stack([v[name] for v in values]) if values
                            else np.empty((0, *np.shape(value))))
    return out


def chain_weighted(kernel) -> dict | None:
    """One chain's weighted sample and design points (``None`` where its draws are not
    resampled from a weighted sample: the stages' own particles)."""
    run = kernel.emulator_run
    if run is not None and run.phase == "done":
        weighted = run.correction.weighted()
    elif kernel.pool is not None and kernel.pool.size:
        weighted = kernel.pool.weighted()
    else:
        return None
    point = kernel.point
    out = _rows(point, *weighted)
    like = point.values(out["x"][0])
    design = ((np.concatenate(a) for a in (run.X, run.prior, run.lik))
              if run is not None and run.X else (out["x"][:0], np.empty(0), np.empty(0)))
    out.update({f"design_{k}": v for k, v in _rows(point, *design, like=like).items()})
    out["value_names"] = np.array([name for name, *_ in point.layout])
    out["value_sizes"] = np.array([size for *_, size in point.layout])
    return out


def write_weighted(path: str, chains: list[tuple[int, dict | None]]) -> None:
    """Write the chains' weighted samples (``(chain, arrays)``, in any order) to ``path``;
    a failure to write is a warning, never the run's end (its draws are not lost)."""
    kept = sorted(((c, a) for c, a in chains if a is not None), key=lambda ca: ca[0])
    if not kept:  # never left silently: an older file of that name would pass for this run's
        warnings.warn(f"KameleonSMC(weights_path={path!r}): no chain's draws were resampled "
                      "from a weighted sample; nothing was written.", RuntimeWarning,
                      stacklevel=2)
        return
    first = kept[0][1]
    out = {k: first[k] for k in ("value_names", "value_sizes")}
    for prefix in ("", "design_"):
        n = [len(a[f"{prefix}log_prior"]) for _, a in kept]
        out[f"{prefix}chain"] = np.repeat([c for c, _ in kept], n)
        for k in first:
            if k not in out and k.startswith(prefix) and (prefix or k[:7] != "design_"):
                out[k] = np.concatenate([a[k] for _, a in kept])
    try:
        with open(path, "wb") as f:
            np.savez(f, **out)
    except OSError as err:
        warnings.warn(f"KameleonSMC(weights_path={path!r}): the weighted sample could not "
                      f"be written ({err}); the draws are returned as usual.",
                      RuntimeWarning, stacklevel=2)
