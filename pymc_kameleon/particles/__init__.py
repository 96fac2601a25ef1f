"""Population moves shared by KameleonSMC and the emulator (pure NumPy/SciPy, no PyMC).

* :mod:`.proposal`: a stage's proposal (whitening, KAMH subsample, fitted mixture) and the
  exact Metropolis-Hastings move of every particle;
* :mod:`.rules`: when a stage's moves end;
* :mod:`.mutation`: a stage's moves, take-last or waste-free;
* :mod:`.recycling`: evaluated independent proposals as one importance sample, with
  adaptive importance-sampling rounds.
"""
