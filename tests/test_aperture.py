"""Tests of the automatic apertures: Jaeger's norm gradient against float64 NumPy finite differences of ‖C(R, α)‖²_F,
its maximiser against a dense NumPy search, closed forms, scale equivariance (hypothesis), batching, jit and bad
inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from hypothesis import given, settings
from hypothesis import strategies as st

from bcjax.conceptors import aperture_norm_gradient, conceptor_from_correlation, optimal_aperture, relative_aperture
from tests._bad_inputs import bad_input_test_case
from tests._tolerance import assert_close


def random_correlation(seed: int, n: int, rank: int | None = None, scale: float = 1.0) -> np.ndarray:
  """X^T X / m of Gaussian rows with per-direction scales spanning two decades; rank < n gives a singular R."""
  rng = np.random.default_rng(seed)
  m = n if rank is None else rank
  x = rng.normal(size=(3 * n, n)) * np.logspace(-1, 1, n)
  if rank is not None:
    x = x[:, :m] @ rng.normal(size=(m, n))
  return scale * (x.T @ x) / x.shape[0]


def squared_norm_np(r: np.ndarray, log_alpha: float) -> float:
  """‖C(R, α)‖²_F with C = R (R + α⁻² I)⁻¹, straight from the definition in float64."""
  c = r @ np.linalg.inv(r + np.exp(-2.0 * log_alpha) * np.eye(len(r)))
  return float(np.sum(c * c))


def norm_gradient_np(r: np.ndarray, log_alpha: float, h: float = 1e-4) -> float:
  """d‖C‖²_F / d log α by a fourth-order central difference."""
  f = lambda t: squared_norm_np(r, t)
  return (-f(log_alpha + 2 * h) + 8 * f(log_alpha + h) - 8 * f(log_alpha - h) + f(log_alpha - 2 * h)) / (12 * h)


def dense_argmax_np(r: np.ndarray, points: int = 4001) -> tuple[float, float]:
  """(log α, ∇) of the best point of a dense log grid spanning every eigenvalue's scale with margin."""
  sigma = np.linalg.eigvalsh(r)
  sigma = sigma[sigma > 1e-12 * sigma.max()]
  grid = np.linspace(0.5 * np.log(2 / sigma.max()) - 2, 0.5 * np.log(2 / sigma.min()) + 2, points)
  values = np.array([norm_gradient_np(r, t) for t in grid])
  return float(grid[values.argmax()]), float(values.max())


class NormGradientTest(parameterized.TestCase):
  @parameterized.product(seed=[0, 1], rank=[None, 3], alpha=[0.05, 0.7, 4.0])
  def test_equals_finite_difference_of_the_squared_norm(self, seed, rank, alpha):
    r = random_correlation(seed, 6, rank)
    assert_close(
      aperture_norm_gradient(r, alpha), norm_gradient_np(r, np.log(alpha)), "statistical", rtol=1e-7, atol=1e-10
    )

  def test_batched_over_matrices_and_apertures(self):
    rs = np.stack([random_correlation(s, 5) for s in range(3)])
    alphas = np.array([0.3, 1.0, 2.5])
    got = aperture_norm_gradient(rs, alphas)
    self.assertEqual(got.shape, (3,))
    assert_close(
      got, [norm_gradient_np(r, np.log(a)) for r, a in zip(rs, alphas)], "statistical", rtol=1e-7, atol=1e-10
    )

  def test_scale_law(self):
    r = random_correlation(2, 5)
    assert_close(aperture_norm_gradient(9.0 * r, 0.5), aperture_norm_gradient(r, 1.5), "reduction")


_jit_optimal_aperture, _jit_conceptor = jax.jit(optimal_aperture), jax.jit(conceptor_from_correlation)


class OptimalApertureTest(parameterized.TestCase):
  @parameterized.product(seed=[0, 1, 2], rank=[None, 2])
  @pytest.mark.heavy
  def test_maximises_the_norm_gradient(self, seed, rank):
    r = random_correlation(seed, 6, rank)
    log_alpha = float(np.log(optimal_aperture(r)))
    best_t, best_value = dense_argmax_np(r)
    # No point of the dense grid beats it, it sits at a stationary point, and it is the grid's peak.
    self.assertGreaterEqual(norm_gradient_np(r, log_alpha), best_value - 1e-9)
    assert_close(
      norm_gradient_np(r, log_alpha + 1e-3) - norm_gradient_np(r, log_alpha - 1e-3),
      0.0,
      "statistical",
      rtol=0,
      atol=1e-7,
    )
    self.assertLess(abs(log_alpha - best_t), 0.01)

  @pytest.mark.heavy
  def test_picks_the_higher_of_two_peaks(self):
    # Two clusters of eigenvalues 4 decades apart: 2 small ones, 4 large ones. The large cluster's peak is higher.
    u = np.linalg.qr(np.random.default_rng(3).normal(size=(6, 6)))[0]
    r = (u * np.array([1e-4, 1e-4, 1.0, 1.0, 1.0, 1.0])) @ u.T
    r = (r + r.T) / 2
    # The small cluster's falling terms move the peak from sqrt(2) by about 1e-7 (relative).
    assert_close(optimal_aperture(r), np.sqrt(2.0), "statistical", rtol=1e-5, atol=0)
    self.assertLess(abs(dense_argmax_np(r, 8001)[0] - 0.5 * np.log(2.0)), 0.01)

  @parameterized.parameters(0.01, 1.0, 250.0)
  def test_closed_form_for_isotropic_r(self, s):
    assert_close(optimal_aperture(s * np.eye(4)), np.sqrt(2.0 / s), "linalg")

  @settings(max_examples=25, deadline=None)
  @given(st.integers(0, 2**31 - 1), st.integers(2, 7), st.sampled_from([1e-3, 0.1, 10.0, 1e3]))
  @pytest.mark.heavy
  def test_scale_equivariant_and_conceptor_invariant(self, seed, n, c):
    r = random_correlation(seed, n)
    # jitted, one compile per n (eagerly, the 25 examples ran op by op); the eager path has its own test below
    alpha, alpha_scaled = _jit_optimal_aperture(r), _jit_optimal_aperture(c**2 * r)
    assert_close(alpha_scaled * c, alpha, "linalg")
    assert_close(_jit_conceptor(c**2 * r, alpha_scaled), _jit_conceptor(r, alpha), "linalg", scale=1.0)

  @pytest.mark.heavy
  def test_batched_jit_and_eager_agree(self):
    rs = np.stack([random_correlation(s, 5, rank) for s, rank in ((0, None), (1, 2), (2, None))])
    eager = optimal_aperture(rs)
    self.assertEqual(eager.shape, (3,))
    assert_close(eager, [optimal_aperture(r) for r in rs], "linalg")
    assert_close(jax.jit(optimal_aperture)(rs), eager, "linalg")

  @pytest.mark.heavy
  def test_float32(self):
    r = random_correlation(4, 6)
    got = optimal_aperture(jnp.asarray(r, jnp.float32))
    self.assertEqual(got.dtype, jnp.float32)
    assert_close(got, np.float32(optimal_aperture(r)), "linalg")

  def test_no_gradient_flows(self):
    r = random_correlation(5, 4)
    self.assertEqual(float(jnp.abs(jax.grad(lambda m: optimal_aperture(m))(r)).max()), 0.0)

  def test_refinement_beats_the_grid(self):
    r = random_correlation(6, 6)
    coarse = optimal_aperture(r, grid_size=3, refine_steps=0)
    fine = optimal_aperture(r, grid_size=3)
    self.assertGreater(norm_gradient_np(r, float(np.log(fine))), norm_gradient_np(r, float(np.log(coarse))))


class RelativeApertureTest(parameterized.TestCase):
  def test_closed_form(self):
    r = random_correlation(7, 5)
    assert_close(relative_aperture(r, ratio=3.0), np.sqrt(3.0 * 5 / np.trace(r)), "reduction")

  @pytest.mark.heavy
  def test_default_agrees_with_jaeger_on_isotropic_r(self):
    assert_close(relative_aperture(0.3 * np.eye(3)), optimal_aperture(0.3 * np.eye(3)), "linalg")

  def test_scale_equivariant_and_batched(self):
    rs = np.stack([random_correlation(s, 4) for s in range(2)])
    assert_close(relative_aperture(16.0 * rs) * 4.0, relative_aperture(rs), "reduction")
    self.assertEqual(relative_aperture(rs).shape, (2,))


def _not_psd():
  return np.diag([1.0, -0.5])


BAD = [
  ("not_psd", lambda: optimal_aperture(_not_psd()), ValueError, ["optimal_aperture", "`r`", "semidefinite", "-0.5"]),
  ("empty", lambda: optimal_aperture(np.zeros((0, 0))), ValueError, ["`r`", "empty", "(0, 0)"]),
  ("nan", lambda: optimal_aperture(np.array([[1.0, np.nan], [np.nan, 1.0]])), ValueError, ["`r`", "NaN"]),
  ("zero", lambda: optimal_aperture(np.zeros((3, 3))), ValueError, ["`r`", "zero"]),
  ("asymmetric", lambda: optimal_aperture(np.array([[1.0, 1.0], [0.0, 1.0]])), ValueError, ["`r`", "symmetric"]),
  ("not_square", lambda: optimal_aperture(np.ones((2, 3))), ValueError, ["`r`", "square"]),
  ("grid", lambda: optimal_aperture(np.eye(2), grid_size=2), ValueError, ["grid_size", "2"]),
  ("relative_nan", lambda: relative_aperture(np.diag([np.inf, 1.0])), ValueError, ["relative_aperture", "`r`"]),
  ("ratio", lambda: relative_aperture(np.eye(2), ratio=-1.0), ValueError, ["`ratio`", "positive"]),
  ("gradient_alpha", lambda: aperture_norm_gradient(np.eye(2), 0.0), ValueError, ["`alpha`", "positive"]),
  (
    "gradient_not_psd",
    lambda: aperture_norm_gradient(_not_psd(), 1.0),
    ValueError,
    ["aperture_norm_gradient", "semidefinite"],
  ),
]

BadInputTest = bad_input_test_case(BAD)


if __name__ == "__main__":
  absltest.main()
