"""Benchmarks of the pymc-kameleon step methods against PyMC's samplers.

* :mod:`benchmarks.common`: targets, the sampler registry and the single-chain runner.
* :mod:`benchmarks.models`: the flower's model, the Gaussians and the counted model that the
  benchmarks and the tests use (the banana and flower targets ship with the package,
  :mod:`pymc_kameleon.models.targets`).
* :mod:`benchmarks.synthetic`: ``python -m benchmarks.synthetic --target ...`` (tables, plots).
* :mod:`benchmarks.plots`: the figures written by the synthetic benchmark.
* :mod:`benchmarks.cost_per_step`: ``python -m benchmarks.cost_per_step`` (per-step cost).

Results and instructions: ``docs/benchmarks/README.md``.
"""

import os

# Single-threaded BLAS, set before NumPy is imported by any benchmark module (importing
# ``benchmarks.<module>`` runs this file first).  On this 2-core machine multi-threaded BLAS
# on the small matrices of the step methods is 10-100x slower when chains run in processes.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
