"""Pure NumPy/SciPy numerics behind the step methods.

Nothing in this subpackage imports PyMC or PyTensor: every function works on plain
arrays and can be tested on its own.

Conventions used throughout
---------------------------
* A point is a 1-d float array of length ``d`` (the raveled, unconstrained vector PyMC
  samples in); a set of points is a 2-d array of shape ``(n, d)``.
* The Gaussian kernel has bandwidth ``s``:
  ``k(x, y) = exp(-||x - y||^2 / (2 s^2))``.  The kernel-HMC papers write
  ``exp(-||x - y||^2 / sigma)``; that is ``sigma = 2 s^2`` and is only used inside
  :mod:`pymc_kameleon.math.score_matching`, never in a public signature.
"""
