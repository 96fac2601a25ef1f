"""Real-model benchmark suite: PyMC models with reference posteriors, every sampler compared.

* :mod:`~benchmarks.suite.models`: the models and their metadata (:data:`MODELS`); the
  factories and their data are the package's (:mod:`pymc_kameleon.models.classic`,
  :mod:`~pymc_kameleon.models.features`, :mod:`~pymc_kameleon.models.hard`,
  :mod:`~pymc_kameleon.models.ode` and others).
* :mod:`~benchmarks.suite.reference`: cached reference posteriors
  (``python -m benchmarks.suite.reference --model NAME``); closed forms in
  :mod:`~benchmarks.suite.analytic`.
* :mod:`~pymc_kameleon.models.counting`: the counting potential (log-density evaluations).
* :mod:`~benchmarks.suite.metrics`: R-hat, ESS and the comparison with a reference.
* :mod:`~benchmarks.suite.runner`, :mod:`~benchmarks.suite.report`,
  :mod:`~benchmarks.suite.cli`: ``python -m benchmarks.suite`` (tables and JSON).

Results and how to read them: ``docs/benchmarks/suite.md``.
"""
