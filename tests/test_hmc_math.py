"""Tests for the leapfrog integrator (pymc_kameleon.math.hmc)."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_kameleon.math.hmc import default_max_jump, jumps_too_far, kinetic_energy, leapfrog

B, V = 0.5, 4.0  # strongly curved banana: log pi = -y1^2/(2V) - (y2 - B(y1^2 - V))^2 / 2


def banana_logp(q):
    r = q[1] - B * (q[0] ** 2 - V)
    return -(q[0] ** 2) / (2 * V) - 0.5 * r**2


def banana_grad(q):
    r = q[1] - B * (q[0] ** 2 - V)
    return np.array([-q[0] / V + 2 * B * q[0] * r, -r])


def test_banana_gradient_is_correct():
    q, h = np.array([0.7, -0.4]), 1e-6
    fd = [(banana_logp(q + h * e) - banana_logp(q - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(banana_grad(q), fd, rtol=1e-7)


def test_leapfrog_is_reversible():
    q0, p0 = np.array([1.5, 0.3]), np.array([-0.4, 1.1])
    q1, p1 = leapfrog(q0, p0, banana_grad, 0.05, 60)
    assert np.linalg.norm(q1 - q0) > 0.5  # it moved
    q2, p2 = leapfrog(q1, -p1, banana_grad, 0.05, 60)
    np.testing.assert_allclose(q2, q0, atol=1e-10)
    np.testing.assert_allclose(-p2, p0, atol=1e-10)


def test_leapfrog_preserves_volume():
    """det of the Jacobian of (q, p) -> (q', p') by central differences equals 1."""
    z0, h = np.array([1.2, -0.5, 0.3, 0.8]), 1e-5

    def flow(z):
        q, p = leapfrog(z[:2], z[2:], banana_grad, 0.1, 25)
        return np.concatenate([q, p])

    E = np.eye(4)
    jac = np.column_stack([(flow(z0 + h * E[i]) - flow(z0 - h * E[i])) / (2 * h) for i in range(4)])
    assert np.abs(jac - np.eye(4)).max() > 0.1  # a non-trivial map
    assert np.linalg.det(jac) == pytest.approx(1.0, abs=1e-6)


def test_energy_error_is_small_and_second_order():
    S = np.array([[2.0, 0.9], [0.9, 1.0]])
    P = np.linalg.inv(S)

    def energy(q, p):
        return 0.5 * q @ P @ q + kinetic_energy(p)

    q0, p0 = np.array([1.0, -0.5]), np.array([0.3, 0.9])
    errors = []
    for eps in (0.02, 0.01):
        n_steps = int(round(3.0 / eps))
        q1, p1 = leapfrog(q0, p0, lambda q: -P @ q, eps, n_steps)
        errors.append(abs(energy(q1, p1) - energy(q0, p0)))
    assert errors[0] < 1e-3
    assert errors[0] / errors[1] == pytest.approx(4.0, rel=0.2)


def test_leapfrog_gradient_calls_inputs_and_edge_cases():
    calls = []

    def grad(q):
        calls.append(q.copy())
        return -q

    q0, p0 = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    leapfrog(q0, p0, grad, 0.1, 7)
    assert len(calls) == 8
    np.testing.assert_array_equal(q0, [1.0, 2.0])  # inputs untouched
    q, p = leapfrog(q0, p0, grad, 0.1, 0)
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(p, p0)
    with pytest.raises(ValueError):
        leapfrog(q0, p0, grad, 0.1, -1)
    # one step by hand
    q1, p1 = leapfrog(q0, p0, lambda q: -q, 0.1, 1)
    p_half = p0 - 0.05 * q0
    np.testing.assert_allclose(q1, q0 + 0.1 * p_half)
    np.testing.assert_allclose(p1, p_half - 0.05 * (q0 + 0.1 * p_half))


def test_kinetic_energy():
    assert kinetic_energy(np.array([1.0, -2.0, 2.0])) == 4.5


def test_jumps_too_far_is_the_euclidean_distance_and_symmetric():
    """Against NumPy's norm on random pairs; the rule is symmetric in the two points (what
    makes rejecting unevaluated exact), NaN never counts as too far, and the default bound
    is 10 (1 + sqrt(d))."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        d = int(rng.integers(1, 6))
        q0, q1 = rng.normal(0, 3, d), rng.normal(0, 3, d)
        bound = float(rng.uniform(0.1, 10.0))
        expected = bool(np.linalg.norm(q1 - q0) > bound)
        assert jumps_too_far(q0, q1, bound) is expected
        assert jumps_too_far(q1, q0, bound) is expected
    assert not jumps_too_far(np.zeros(2), np.array([np.nan, 1e9]), 1.0)
    with np.errstate(over="ignore"):  # the step calls it inside one errstate per draw
        assert not jumps_too_far(np.zeros(2), np.full(2, 1e300), np.inf)
    assert [default_max_jump(d) for d in (1, 4, 9)] == [20.0, 30.0, 40.0]
