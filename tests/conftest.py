"""Fixtures shared by the sampler test modules."""

import pytest
from checks import GAUSS_COV

from pymc_kameleon.models.synthetic import gaussian_model


@pytest.fixture(scope="module")
def gauss():
    """Correlated 2-d Gaussian model (covariance ``checks.GAUSS_COV``), one per module."""
    return gaussian_model(GAUSS_COV)
