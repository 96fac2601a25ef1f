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
    # the (D, n d) column layout of the score-matching sums: the same numbers, bit for bit
    X = rng.normal(size=(50, 4))
    cols = rff.with_lengths([1.0, 2.0, 0.5, 1.5]).jacobian_columns(X)
    J = rff.with_lengths([1.0, 2.0, 0.5, 1.5]).jacobian(X)
    assert cols.shape == (rff.n_features, 50 * 4)
    np.testing.assert_array_equal(cols, J.transpose(1, 0, 2).reshape(rff.n_features, -1))
    np.testing.assert_array_equal(rff.jacobian_columns(X[1]), rff.jacobian(X[1]))


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


@pytest.mark.parametrize("kind", ["orthogonal", "halton"])
def test_structured_frequencies_are_standard_normal_and_more_accurate(kind):
    """Rows are marginally N(0, I) (unbiased kernel), and the kernel error is smaller than
    with independent frequencies at the same D (Yu et al. 2016; Avron et al. 2016)."""
    from scipy import stats

    from pymc_kameleon.math.rff import standard_frequencies

    W = np.vstack([standard_frequencies(64, 4, np.random.default_rng(s), kind)
                   for s in range(20)])
    for j in range(4):
        assert stats.kstest(W[:, j], "norm").pvalue > 1e-3
    if kind == "orthogonal":
        block = W[:4] @ W[:4].T
        np.testing.assert_allclose(block - np.diag(np.diag(block)), 0.0, atol=1e-10)

    def error(frequencies, seed):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(40, 6))
        rff = RandomFourierFeatures.draw(6, 100, 1.5, rng, "sincos", frequencies)
        Phi = rff.features(X)
        return np.sqrt(np.mean((Phi @ Phi.T - gaussian_kernel(X, X, 1.5)) ** 2))

    iid = np.mean([error("gaussian", s) for s in range(10)])
    structured = np.mean([error(kind, s) for s in range(10)])
    assert structured < 0.9 * iid, (structured, iid)  # measured: 0.84 (halton), 0.89 (orth.)


def test_unknown_frequencies():
    with pytest.raises(ValueError, match="unknown frequencies"):
        RandomFourierFeatures.draw(2, 10, 1.0, np.random.default_rng(0), "sincos", "sobol")
