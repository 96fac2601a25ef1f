"""The private attributes of other libraries that ``pymc_kameleon.compat`` reads, checked
against the installed versions: a release that renames one fails here, not in a worker."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytensor.tensor as pt
from checks import wrap_py
from pytensor.compile.ops import FromFunctionOp

from pymc_kameleon import compat
from pymc_kameleon.parallel import dumps


def _total(x):
    return np.asarray(x.sum())


def _shape(fgraph_or_node, *args):  # the signature differs between PyTensor 2 and 3
    return [()]


TOTAL = wrap_py(itypes=[pt.dvector], otypes=[pt.dscalar])(_total)
SHAPED = wrap_py(itypes=[pt.dvector], otypes=[pt.dscalar], infer_shape=_shape)(_total)


def test_from_function_op_args_rebuild_an_equal_op():
    for op, infer_shape in ((TOTAL, None), (SHAPED, _shape)):
        assert type(op) is FromFunctionOp
        fn, itypes, otypes, shape = compat.from_function_op_args(op)
        assert fn is _total and shape is infer_shape
        assert list(itypes) == [pt.dvector] and list(otypes) == [pt.dscalar]
        rebuilt = FromFunctionOp(fn, itypes, otypes, shape)
        assert rebuilt == op and hash(rebuilt) == hash(op)


def test_dumps_sends_an_as_op_with_its_function():
    loaded = pickle.loads(dumps(TOTAL))
    assert loaded == TOTAL
    out = [None]
    loaded.perform(None, [np.array([1.0, 2.0])], [out])
    assert float(out[0]) == 3.0


def test_executor_max_workers_of_the_standard_pools():
    with ThreadPoolExecutor(max_workers=3) as pool:
        assert compat.executor_max_workers(pool) == 3
    pool = ProcessPoolExecutor(max_workers=2)  # no process starts before a submit
    try:
        assert compat.executor_max_workers(pool) == 2
    finally:
        pool.shutdown()
    assert compat.executor_max_workers(object()) is None
