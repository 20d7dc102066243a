"""The tolerance policy of tests/_tolerance.py, and a scan that keeps every comparison in the suite going through it."""

import ast
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from tests._tolerance import RTOL, assert_close, close, row_scale

# Calls that would bypass the policy.
_RAW = {
  "assert_allclose",
  "allclose",
  "isclose",
  "assert_almost_equal",
  "assert_array_almost_equal",
  "assertAlmostEqual",
  "assertNotAlmostEqual",
  "assert_approx_equal",
}


class PolicyTest(absltest.TestCase):
  def test_float32_reassociation_at_large_values_passes(self):
    # The flake that motivated the policy: jit vs eager differed by 1.9e-6 at values near 1.9 (relative 1e-6).
    x = np.float32(1.9)
    assert_close(np.array([x + np.float32(1.9e-6)]), np.array([x]))

  def test_float32_sum_reordering_passes_as_a_reduction(self):
    v = jax.random.normal(jax.random.key(0), (4096,), jnp.float32) * 100.0
    assert_close(jnp.sum(v), np.sum(np.asarray(v)[::-1]), scale=float(jnp.sum(jnp.abs(v))))

  def test_a_flipped_sign_or_dropped_factor_fails(self):
    want = np.linspace(1.0, 2.0, 5)
    for wrong in (-want, 0.5 * want, want + 1e-3):
      with self.assertRaises(AssertionError):
        assert_close(wrong, want)
      self.assertFalse(close(wrong, want))

  def test_each_entry_is_held_to_its_own_magnitude(self):
    # A 50 % error on a small entry beside a large one: a floor taken from the largest entry would let it pass.
    for dtype in (np.float32, np.float64):
      for op in RTOL:
        self.assertFalse(close(np.array([1.5e-3, 1e3], dtype), np.array([1e-3, 1e3], dtype), op), (dtype, op))
        with self.assertRaises(AssertionError):
          assert_close(np.array([1.5e-3, 1e3], dtype), np.array([1e-3, 1e3], dtype), op)
    # A cancellation is allowed the rounding of its terms only when the caller says how large they are.
    terms = np.array([1e3, -1e3 + 1e-4], np.float32)
    self.assertFalse(close(np.sum(terms), np.float64(1e-4)))
    assert_close(np.sum(terms), np.float64(1e-4), scale=2e3)
    # A per-entry scale covers only the entries it is given for.
    self.assertTrue(close([1e-12, 2.0], [0.0, 2.0], scale=[1.0, 0.0]))
    self.assertFalse(close([1e-12, 2.0 + 1e-9], [0.0, 2.0], scale=[1.0, 0.0]))
    with self.assertRaisesRegex(AssertionError, "1 of 2 entries differ"):
      assert_close([1e-12, 2.0 + 1e-9], [0.0, 2.0], scale=[1.0, 0.0])

  def test_float64_is_held_to_rounding(self):
    want = np.linspace(1.0, 2.0, 5)
    with self.assertRaises(AssertionError):
      assert_close(want * (1 + 1e-7), want)  # passes in float32, not in float64
    assert_close(np.float32(1.0) * np.ones(5, np.float32) * (1 + 1e-7), np.ones(5))

  def test_float32_tolerances_are_relative_and_at_least_1e_5_for_reductions(self):
    self.assertGreaterEqual(RTOL["reduction"][1], 1e-5)
    for op, (f64, f32) in RTOL.items():
      self.assertLess(f64, f32, op)

  def test_a_float64_result_with_float32_parts_is_held_to_float32(self):
    # A float64 loss assembled from float32 pieces (a float32 model under x64): its dtype says float64, but each part
    # was rounded to float32. The float64 reference differs by float32 rounding, ~1e-8 relative and more.
    rng = np.random.default_rng(0)
    parts = rng.normal(size=(1000,)) * 10.0
    exact = np.float64(np.sum(parts**2))
    mixed = np.float64(np.sum(parts.astype(np.float32).astype(np.float64) ** 2))  # float64 sum of float32 parts
    self.assertEqual(mixed.dtype, np.float64)
    self.assertGreater(abs(mixed - exact) / exact, RTOL["reduction"][0])  # the float64 bound cannot hold
    self.assertFalse(close(mixed, exact))
    assert_close(mixed, exact, precision="float32")
    # Declaring the precision never widens a tolerance, and a wrong answer still fails under it.
    self.assertFalse(close(np.float32(mixed) * np.float32(1.001), exact, precision="float64"))
    self.assertFalse(close(1.0001 * mixed, exact, precision="float32"))
    with self.assertRaisesRegex(ValueError, "precision"):
      close(mixed, exact, precision="float16")

  def test_an_entry_near_zero_in_a_float32_tensor_is_held_to_its_row(self):
    # A float32 matrix product whose entry (0, 0) cancels to ~1e-4 while its terms are of order 10: two summation
    # orders (what 1 and 4 devices do) agree to float32 rounding of the row, not of the entry itself.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 64)).astype(np.float32) * 10.0
    w = rng.normal(size=(64, 3)).astype(np.float32)
    x[0, -1] = 0.0
    x[0, -1] = -np.float32(np.dot(x[0].astype(np.float64), w[:, 0].astype(np.float64)) - 1e-4) / w[-1, 0]
    forward = x @ w
    backward = np.stack([[np.sum((x[i] * w[:, j])[::-1], dtype=np.float32) for j in range(3)] for i in range(4)])
    self.assertLess(abs(float(forward[0, 0])), 1e-2)
    self.assertFalse(close(backward, forward, "network"))  # relative-only: the near-zero entry fails
    assert_close(backward, forward, "network", scale=row_scale(x) * row_scale(w.T).T)
    # The row scale still catches a wrong entry anywhere, the near-zero one included.
    for i, j in ((0, 0), (2, 1)):
      wrong = backward.copy()
      wrong[i, j] += 0.01 * float(np.linalg.norm(x[i]) * np.linalg.norm(w[:, j]))
      self.assertFalse(close(wrong, forward, "network", scale=row_scale(x) * row_scale(w.T).T), (i, j))
    assert_close(row_scale(np.array([[3.0, 4.0], [0.0, 1.0]])), np.array([[5.0], [1.0]]), "elementwise")

  def test_nan_is_never_close(self):
    with self.assertRaises(AssertionError):
      assert_close(np.array([np.nan]), np.array([np.nan]))

  def test_zero_expectation_needs_a_scale_and_other_tolerances_need_statistical(self):
    with self.assertRaisesRegex(TypeError, "scale="):
      assert_close(np.zeros(3), np.zeros(3))
    assert_close(np.full(3, 1e-12), np.zeros(3), scale=1.0)
    with self.assertRaisesRegex(TypeError, "statistical"):
      assert_close(np.ones(3), np.ones(3), atol=1e-6)
    with self.assertRaisesRegex(TypeError, "explicit"):
      assert_close(np.ones(3), np.ones(3), "statistical", atol=0.1)
    assert_close(np.ones(3) * 1.01, np.ones(3), "statistical", rtol=0.02, atol=0.0)

  def test_no_test_compares_floats_outside_the_policy(self):
    offenders = []
    for path in sorted(Path(__file__).parent.glob("*.py")):
      if path.name == "_tolerance.py":
        continue
      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
          name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
          if name in _RAW:
            offenders.append(f"{path.name}:{node.lineno} {name}")
    self.assertEqual(offenders, [], "compare through tests._tolerance.assert_close / close")


if __name__ == "__main__":
  absltest.main()
