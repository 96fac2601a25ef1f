"""Benchmarks of the pymc-kameleon step methods against PyMC's samplers.

The top level holds what the pages of ``docs/benchmarks/`` cite as rerunnable benchmarks,
each run as ``python -m benchmarks.<name>``:

* :mod:`benchmarks.suite`: the real-model suite, every sampler against reference posteriors;
* :mod:`benchmarks.synthetic`: the paper's synthetic targets (tables, plots; redrawn by
  :mod:`benchmarks.replot`);
* :mod:`benchmarks.smc`, :mod:`benchmarks.smc_settings`, :mod:`benchmarks.smc_scaling`,
  :mod:`benchmarks.smc_compare`, :mod:`benchmarks.smc_reference`: ``KameleonSMC``;
* :mod:`benchmarks.gp_glass`: GP classification with a likelihood estimator;
* :mod:`benchmarks.work_cap`: the bound on the work per draw;
* :mod:`benchmarks.cost_per_step`, :mod:`benchmarks.draw_identity`,
  :mod:`benchmarks.logp_backend`, :mod:`benchmarks.distributed_overhead`: the cost of a step,
  the identity of its draws across a change, the log-density backend and Dask's overhead.

:mod:`benchmarks.common` (targets, the sampler registry, the single-chain runner) and
:mod:`benchmarks.plots` serve them; ``benchmarks/tests`` tests them.  The models they share
with the tests are the package's (:mod:`pymc_kameleon.models`).  One-off probes whose answer
is a paragraph on a page are in :mod:`benchmarks.research`.

Results and instructions: ``docs/benchmarks/README.md``.
"""

import os

# Single-threaded BLAS, set before NumPy is imported by any benchmark module (importing
# ``benchmarks.<module>`` runs this file first).  On this 2-core machine multi-threaded BLAS
# on the small matrices of the step methods is 10-100x slower when chains run in processes.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
