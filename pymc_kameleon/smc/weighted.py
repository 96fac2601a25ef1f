"""The weighted sample behind a chain's draws, kept for the user.

Where KameleonSMC resamples its draws from an importance sample (the emulator's
correction, the recycled stages of ``recycle=`` or of the emulator's fallback), the
returned draws are equally weighted.  Every chain hands its weighted sample, and the
design's evaluations of the emulator, to its settings
(:class:`~pymc_kameleon.run_settings.RunSettings`, which come back from PyMC's chain
processes).  Once every chain is done the run keeps them for PyMC's result, which gets the
group ``weighted_sample`` (:func:`weighted_dataset`, added by
:func:`pymc_kameleon.compat.smc.attach_result_group`), and with ``weights_path`` writes
them to one ``.npz`` file too (``docs/emulator.md``, "The weighted sample").

The arrays, ``n`` rows of the weighted samples of all chains, then ``m`` rows of
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
import xarray as xr

__all__ = ["PENDING", "chain_weighted", "check_weights_path", "combine_weighted",
           "take_pending", "weighted_dataset", "write_weighted"]

#: The last run's weighted sample in this process, from the end of its chains until PyMC
#: builds its result (emptied when a KameleonSMC run starts: a run without InferenceData
#: leaves it to no other run).
PENDING: list[dict] = []


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


def combine_weighted(chains: list[tuple[int, dict | None]]) -> dict | None:
    """The chains' weighted samples (``(chain, arrays)``, in any order) as one set of
    arrays, with the columns ``chain`` and ``design_chain``; ``None`` where no chain has one."""
    kept = sorted(((c, a) for c, a in chains if a is not None), key=lambda ca: ca[0])
    if not kept:
        return None
    first = kept[0][1]
    out = {k: first[k] for k in ("value_names", "value_sizes")}
    for prefix in ("", "design_"):
        n = [len(a[f"{prefix}log_prior"]) for _, a in kept]
        out[f"{prefix}chain"] = np.repeat([c for c, _ in kept], n)
        for k in first:
            if k not in out and k.startswith(prefix) and (prefix or k[:7] != "design_"):
                out[k] = np.concatenate([a[k] for _, a in kept])
    return out


def weighted_dataset(out: dict) -> xr.Dataset:
    """The arrays of :func:`combine_weighted` as a Dataset: dimension ``row`` (the weighted
    sample) and ``design_row``; the raveled points along ``value``, labelled by the value
    variables' names (``x[0]``, ``sigma_log__``), the model's variables along PyMC's own
    dimension names (``x_dim_0``)."""
    columns = zip(out["value_names"], out["value_sizes"], strict=True)
    labels = [f"{name}[{i}]" if size > 1 else str(name)
              for name, size in columns for i in range(size)]
    data = {}
    for key, value in out.items():
        if key in ("value_names", "value_sizes"):
            continue
        row = "design_row" if key.startswith("design_") else "row"
        base = key.removeprefix("design_")
        dims = ((row, "value") if base == "x" else
                (row, *(f"{base[2:]}_dim_{i}" for i in range(value.ndim - 1)))
                if base.startswith("x_") else (row,))
        data[key] = (dims, value)
    return xr.Dataset(data, coords={"value": labels})


def take_pending(trace) -> xr.Dataset | None:
    """The pending weighted sample as a Dataset, emptying the slot; ``None`` where there is
    none or it is not ``trace``'s (a PyMC ``MultiTrace``): each chain's first draw must be
    one of that chain's rows (its draws are resampled from them)."""
    out = PENDING.pop() if PENDING else None
    PENDING.clear()
    if out is None or not _draws_from(out, trace):
        return None
    return weighted_dataset(out)


def _draws_from(out: dict, trace) -> bool:
    """Whether each chain of ``trace`` starts with a draw among its rows of ``out``."""
    names = [k[2:] for k in out if k.startswith("x_") and k[2:] in trace.varnames]
    if not names or sorted(np.unique(out["chain"])) != list(range(trace.nchains)):
        return False
    for c in range(trace.nchains):
        rows = out[f"x_{names[0]}"][out["chain"] == c].reshape(np.sum(out["chain"] == c), -1)
        first = np.ravel(trace.get_values(names[0], chains=[c])[0])
        if not np.any(np.all(np.isclose(rows, first, rtol=1e-5, atol=1e-8), axis=1)):
            return False
    return True


def write_weighted(path: str, out: dict | None) -> None:
    """Write the weighted samples of :func:`combine_weighted` to ``path``; a failure to
    write is a warning, never the run's end (its draws are not lost)."""
    if out is None:  # never left silently: an older file of that name would pass for this run's
        warnings.warn(f"KameleonSMC(weights_path={path!r}): no chain's draws were resampled "
                      "from a weighted sample; nothing was written.", RuntimeWarning,
                      stacklevel=2)
        return
    try:
        with open(path, "wb") as f:
            np.savez(f, **out)
    except OSError as err:
        warnings.warn(f"KameleonSMC(weights_path={path!r}): the weighted sample could not "
                      f"be written ({err}); the draws are returned as usual.",
                      RuntimeWarning, stacklevel=2)
