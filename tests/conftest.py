"""Fixtures shared by the sampler test modules."""

import os

# Single-threaded BLAS in the processes the tests start (chain processes, Dask workers,
# scripts) as in this one: the root conftest's thread limit binds this process only.  Set
# before NumPy is imported (checks imports it).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import pytest  # noqa: E402
from checks import GAUSS_COV  # noqa: E402

from pymc_kameleon.models.synthetic import gaussian_model  # noqa: E402


@pytest.fixture(scope="module")
def gauss():
    """Correlated 2-d Gaussian model (covariance ``checks.GAUSS_COV``), one per module."""
    return gaussian_model(GAUSS_COV)
