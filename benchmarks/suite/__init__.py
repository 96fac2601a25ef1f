"""Real-model benchmark suite: PyMC models with reference posteriors, every sampler compared.

* :mod:`~benchmarks.suite.models`: model factories and their metadata (:data:`MODELS`);
  data in :mod:`~benchmarks.suite.data`, the black-box ODE in :mod:`pymc_kameleon.models.ode`.
* :mod:`~benchmarks.suite.reference`: cached reference posteriors
  (``python -m benchmarks.suite.reference --model NAME``); closed forms in
  :mod:`~benchmarks.suite.analytic`.
* :mod:`~pymc_kameleon.models.counting`: the counting potential (log-density evaluations).
* :mod:`~benchmarks.suite.metrics`: R-hat, ESS and the comparison with a reference.
* :mod:`~benchmarks.suite.runner`, :mod:`~benchmarks.suite.report`,
  :mod:`~benchmarks.suite.cli`: ``python -m benchmarks.suite`` (tables and JSON).

Results and how to read them: ``docs/benchmarks/suite.md``.
"""
