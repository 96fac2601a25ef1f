"""Test-session setup.

BLAS runs single-threaded: the tests (and CI) run on 2 cores, where multi-threaded BLAS on
small matrices competes with PyMC's chain processes and slows everything down.
"""

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="session")
def _single_threaded_blas():
    with threadpool_limits(limits=1):
        yield
