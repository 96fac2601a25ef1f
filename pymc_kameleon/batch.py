"""The import path ``pymc_kameleon.batch`` of :class:`BatchEvaluator` and :func:`dumps`.

Both live in :mod:`pymc_kameleon.parallel` (:mod:`~pymc_kameleon.parallel.batch`,
:mod:`~pymc_kameleon.parallel.pickling`); this module keeps the older path working.
"""

from .parallel.batch import BatchEvaluator
from .parallel.pickling import dumps

__all__ = ["BatchEvaluator", "dumps"]
