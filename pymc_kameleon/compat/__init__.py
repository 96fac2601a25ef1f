"""The places where PyMC 5 / PyTensor 2 / ArviZ 0.x and PyMC 6 / PyTensor 3 / ArviZ 1 differ.

pymc-kameleon supports both PyMC majors from one code base; everything that depends on the
installed versions, and every private name of those libraries the package relies on, is
here (and, for likelihood-estimator Ops in compiled graphs, in
:mod:`pymc_kameleon.pseudo_marginal`), one module per library:

* :mod:`~pymc_kameleon.compat.versions`: the installed versions;
* :mod:`~pymc_kameleon.compat.pymc`: how a chain starts a step (:func:`start_chain`),
  whether PyMC tells a step the number of tuning draws (:func:`assumed_tuning_draws`), and
  PyMC's private hooks of a step class (:class:`StepHooks`);
* :mod:`~pymc_kameleon.compat.pytensor`: the compile mode of a step's log density
  (:func:`default_compile_kwargs`, :func:`logp_compile_kwargs`), Op gradients, inner
  graphs and the arguments of an ``as_op`` Op (:func:`from_function_op_args`);
* :mod:`~pymc_kameleon.compat.arviz`: ``pm.sample``'s results (:func:`as_dataset`,
  :func:`group_dataset`, :func:`max_rhat`, :func:`summary_table`) and Pareto's k-hat of
  importance weights (:func:`pareto_khat`);
* :mod:`~pymc_kameleon.compat.futures`: the number of workers of an executor;
* :mod:`~pymc_kameleon.compat.smc`: PyMC's SMC kernel internals that ``KameleonSMC``
  relies on (:class:`~pymc_kameleon.compat.smc.SeamedSMCKernel`; imported from there).

Every name is importable from ``pymc_kameleon.compat`` itself.  Nothing here reads the call
stack: what a step needs to know it is told (``setup_chain``) or given (``tune_draws``).
"""

from __future__ import annotations

from .arviz import (
    MAX_KHAT,
    SUMMARY_COLUMNS,
    as_dataset,
    group_dataset,
    max_rhat,
    pareto_khat,
    summary_table,
)
from .futures import executor_max_workers
from .pymc import (
    PM_SAMPLE_TUNE,
    TELLS_TUNING_DRAWS,
    StepHooks,
    assumed_tuning_draws,
    smc_stat_per_chain,
    start_chain,
)
from .pytensor import (
    PYTENSOR_HAS_PULLBACK,
    default_compile_kwargs,
    from_function_op_args,
    inner_graphs,
    logp_compile_kwargs,
)
from .versions import ARVIZ_VERSION, PYMC_VERSION, PYTENSOR_VERSION
from .versions import _version as _version  # importable from here, as before the split

__all__ = [
    "ARVIZ_VERSION",
    "MAX_KHAT",
    "PM_SAMPLE_TUNE",
    "PYMC_VERSION",
    "PYTENSOR_HAS_PULLBACK",
    "PYTENSOR_VERSION",
    "SUMMARY_COLUMNS",
    "TELLS_TUNING_DRAWS",
    "StepHooks",
    "as_dataset",
    "assumed_tuning_draws",
    "default_compile_kwargs",
    "executor_max_workers",
    "from_function_op_args",
    "group_dataset",
    "inner_graphs",
    "logp_compile_kwargs",
    "max_rhat",
    "smc_stat_per_chain",
    "pareto_khat",
    "start_chain",
    "summary_table",
]
