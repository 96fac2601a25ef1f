"""The one-chain results of :func:`pymc_kameleon.distributed.sample`, merged as ``pm.sample``'s.

:func:`_merge_chains` concatenates them along ``chain`` (ArviZ 0.x ``InferenceData`` or
ArviZ 1 ``DataTree``); :func:`_convergence_checks` runs ``pm.sample``'s convergence checks
once, on the merged result.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from ..bill import add_evaluations

__all__: list[str] = []

# the logger of pymc_kameleon.distributed, the public module: the name users configure
_log = logging.getLogger("pymc_kameleon.distributed")


def _merge_chains(parts: Sequence[Any], sampling_time: float | None = None) -> Any:
    """Concatenate one-chain results into chains ``0 .. n-1``, as ``pm.sample`` returns them.

    ArviZ 0.x: ``arviz.concat`` (groups without a ``chain`` dimension, such as
    ``observed_data``, are kept once).  ArviZ 1.x returns a :class:`xarray.DataTree`, which
    ``xarray.concat`` concatenates node by node.  Both give the groups of ``pm.sample(chains=n)``
    with the same values (``tests/test_distributed.py``); the run's bill in
    ``sample_stats.attrs`` is recomputed over all chains.
    """
    import xarray as xr

    from pymc_kameleon.compat import ARVIZ_VERSION

    if ARVIZ_VERSION[0] >= 1:
        numbered = [xr.map_over_datasets(functools.partial(_number_chain, i), part)
                    for i, part in enumerate(parts)]
        merged = xr.concat(numbered, dim="chain", data_vars="minimal", coords="minimal",
                           compat="override", combine_attrs="override")
        groups = list(merged.subtree)
    else:
        import arviz as az

        merged = az.concat(*parts, dim="chain", reset_dim=True)
        groups = [merged[name] for name in merged.groups()]
    if sampling_time is not None:
        for ds in groups:
            if "sampling_time" in ds.attrs:
                ds.attrs["sampling_time"] = float(sampling_time)
    if "n_evals_total" in merged["sample_stats"].attrs:  # each part's attrs hold its chain's
        add_evaluations(merged)
    return merged


def _number_chain(chain: int, ds: Any) -> Any:
    return ds.assign_coords(chain=[chain]) if "chain" in ds.dims else ds


def _convergence_checks(data: Any, model_vars: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    """``pm.sample``'s convergence warnings, on the merged chains (logged, like PyMC)."""
    try:
        from pymc.stats.convergence import log_warnings, run_convergence_checks

        free, deterministic = model_vars
        model = SimpleNamespace(free_RVs=[SimpleNamespace(name=n) for n in free],
                                deterministics=[SimpleNamespace(name=n) for n in deterministic])
        log_warnings(run_convergence_checks(data, model))
    except Exception:  # pragma: no cover - diagnostics must never fail a finished run
        _log.debug("convergence checks failed", exc_info=True)
