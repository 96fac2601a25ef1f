"""Random Fourier features: kernel approximation and derivatives."""

import numpy as np
import pytest

from pymc_kameleon.math.kernels import gaussian_kernel
from pymc_kameleon.math.rff import RandomFourierFeatures


def _approx_error(embedding, n_features, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 3))
    rff = RandomFourierFeatures.draw(3, n_features, 1.3, rng, embedding)
    Phi = rff.features(X)
    return np.abs(Phi @ Phi.T - gaussian_kernel(X, X, 1.3)).max()


@pytest.mark.parametrize("embedding", ["sincos", "phase"])
def test_kernel_approximation_error_shrinks_with_features(embedding):
    errors = {D: np.mean([_approx_error(embedding, D, s) for s in range(8)])
              for D in (20, 200, 2000)}
    # Monte Carlo rate ~ D^-1/2: each 10x more features should cut the error by ~3x
    assert errors[200] < errors[20] / 2
    assert errors[2000] < errors[200] / 2
    assert errors[2000] < 0.1


@pytest.mark.parametrize("embedding", ["sincos", "phase"])
def test_jacobian_vs_finite_differences(embedding):
    rng = np.random.default_rng(1)
    rff = RandomFourierFeatures.draw(4, 30, 0.8, rng, embedding)
    x = rng.normal(size=4)
    h = 1e-6
    fd = np.column_stack([(rff.features(x + h * e) - rff.features(x - h * e)) / (2 * h)
                          for e in np.eye(4)])
    np.testing.assert_allclose(rff.jacobian(x), fd, atol=1e-7)
    X = rng.normal(size=(3, 4))
    np.testing.assert_allclose(rff.jacobian(X)[1], rff.jacobian(X[1]))


@pytest.mark.parametrize("embedding", ["sincos", "phase"])
def test_laplacian_identity(embedding):
    """sum_l d^2 phi_i / dx_l^2 = -||omega_i||^2 phi_i, used by score matching."""
    rng = np.random.default_rng(2)
    rff = RandomFourierFeatures.draw(3, 10, 1.1, rng, embedding)
    x, h = rng.normal(size=3), 1e-4
    lap = sum((rff.features(x + h * e) - 2 * rff.features(x) + rff.features(x - h * e)) / h**2
              for e in np.eye(3))
    np.testing.assert_allclose(lap, -rff.omega_sq_norms() * rff.features(x), atol=1e-5)


def test_bandwidth_rescales_the_same_basis():
    rng = np.random.default_rng(3)
    rff = RandomFourierFeatures.draw(2, 10, 1.0, rng)
    wide = rff.with_bandwidth(2.0)
    np.testing.assert_allclose(wide.omega, rff.omega / 2.0)
    x = np.array([0.3, -0.4])
    np.testing.assert_allclose(wide.features(2 * x), rff.features(x))


def test_invalid_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="even"):
        RandomFourierFeatures.draw(2, 11, 1.0, rng, "sincos")
    with pytest.raises(ValueError, match="unknown embedding"):
        RandomFourierFeatures.draw(2, 10, 1.0, rng, "fourier")
