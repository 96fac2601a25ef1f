"""One-off research scripts: each probed one question, and its answer is a paragraph on a
page of ``docs/benchmarks/``, which gives its command (``python -m benchmarks.research.X``).

They are kept so that the measurements can be rerun, but they are no part of the benchmark
suite: a script may stop running as the package changes; its page names the date and,
where it matters, the commit of its run.  Only the helpers that compute a reported number
from draws (``step_emulator``'s settings, ``returned_worth``'s ESS) are tested, in
``benchmarks/tests/test_scripts.py``.

* :mod:`~benchmarks.research.fkamh_features`, :mod:`~benchmarks.research.n_features`,
  :mod:`~benchmarks.research.fkamh_rank`: F-KAMH's random features and their truncation;
* :mod:`~benchmarks.research.kamh_gamma`: KAMH's ``gamma`` trials on curved posteriors;
* :mod:`~benchmarks.research.iterations_per_draw`: MH iterations per draw;
* :mod:`~benchmarks.research.known_covariance`, :mod:`~benchmarks.research.rw_ceiling`,
  :mod:`~benchmarks.research.local_scale`: what the warm-up's map and scale leave on the
  table;
* :mod:`~benchmarks.research.gp_ceiling`: oracle moves on the non-centred latent GP;
* :mod:`~benchmarks.research.khmc_jumps`, :mod:`~benchmarks.research.khmc_tempered`,
  :mod:`~benchmarks.research.surrogate_screen`, :mod:`~benchmarks.research.screen_suite`:
  kernel HMC's jumps, a tempered surrogate and the surrogate screen;
* :mod:`~benchmarks.research.returned_worth`: ArviZ's ESS of KameleonSMC's returned draws
  against the spread of independent chains' means;
* :mod:`~benchmarks.research.fallback_worth`: what a fallen-back run's recycled pool is
  worth by coordinate, and the ways of resampling it;
* :mod:`~benchmarks.research.step_emulator`, :mod:`~benchmarks.research.emulator_weights`:
  the steps' ``emulator=True``, and the correction's weights on a curved target.
"""
