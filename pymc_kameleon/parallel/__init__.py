"""Work in other threads, processes and Dask workers: batches of evaluations, chains.

* :mod:`.pickling`: :func:`dumps`, cloudpickle that sends ``as_op`` Ops with their function,
  so that compiled functions and model factories load in a worker process;
* :mod:`.batch`: :class:`BatchEvaluator`, log densities at a batch of points on any
  :class:`concurrent.futures.Executor` or Dask client (:class:`~pymc_kameleon.KameleonSMC`'s
  evaluations);
* :mod:`.plugin`: the Dask worker plugin that gives each worker process its own PyTensor
  compilation directory (used by both);
* the parts of :func:`pymc_kameleon.distributed.sample`, one chain of ``pm.sample`` per Dask
  task: :mod:`.chains` (the task and its errors), :mod:`.cluster` (the embedded cluster),
  :mod:`.progress` (the driver's progress bars) and :mod:`.merge` (the merged result).

The public entry points are :mod:`pymc_kameleon.distributed` and
:class:`~pymc_kameleon.KameleonSMC`'s ``executor``; Dask itself is imported only when used.
"""

from .batch import BatchEvaluator, ExecutorError
from .pickling import dumps

__all__ = ["BatchEvaluator", "ExecutorError", "dumps"]
