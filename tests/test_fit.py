"""Tests of post-hoc fitting: closed form vs NumPy, the post-hoc identity (the least-squares W_k also minimises the
multi-step loss), gradient fitting converging to it, and the BackwardLinear module."""

import jax
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from flax import nnx

from bcjax.alignment import (
  BackwardLinear,
  apply_backward,
  fit_posthoc,
  init_backward,
  least_squares_backward,
  multi_step_loss,
  single_step_loss,
)
from tests._chains import random_chain
from tests._tolerance import assert_close


class PosthocTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    zs, ws = random_chain(np.random.default_rng(0), [3, 4, 6], n=200)
    self.z_new, self.z_prev, self.history = zs[2], zs[1], ws[:1]

  def test_least_squares_matches_numpy(self):
    expected = np.linalg.lstsq(self.z_new, self.z_prev, rcond=None)[0].T
    assert_close(least_squares_backward(self.z_new, self.z_prev), expected)

  def test_ridge_matches_normal_equations(self):
    n, d = self.z_new.shape
    rho = 0.3
    expected = np.linalg.solve(self.z_new.T @ self.z_new + n * rho * np.eye(d), self.z_new.T @ self.z_prev).T
    assert_close(least_squares_backward(self.z_new, self.z_prev, ridge=rho), expected)
    # and it is a stationary point of the penalised objective
    grad = jax.grad(lambda w: single_step_loss(self.z_new, self.z_prev, w) + rho * (w**2).sum())(expected)
    assert_close(grad, 0.0, scale=10.0)  # the data and ridge terms are O(10)

  @pytest.mark.heavy
  def test_least_squares_solution_is_stationary_for_both_losses(self):
    w = least_squares_backward(self.z_new, self.z_prev)
    for loss in (
      lambda w: single_step_loss(self.z_new, self.z_prev, w),
      lambda w: multi_step_loss(self.z_new, self.z_prev, w, self.history),
    ):
      assert_close(jax.grad(loss)(w), 0.0, scale=10.0)

  @parameterized.parameters("single", "multi")
  @pytest.mark.heavy
  def test_gradient_fit_converges_to_least_squares(self, loss):
    # At 2e-2 Adam keeps wandering by ~3e-3 around the optimum, and where it stands after 4000 steps depends on
    # round-off (another XLA optimisation level moved it by 2.5e-3); at 1e-2 it settles within 8e-4 either way.
    fit = fit_posthoc(
      self.z_new, self.z_prev, self.history, key=jax.random.key(0), loss=loss, steps=4000, learning_rate=1e-2
    )
    w_star = least_squares_backward(self.z_new, self.z_prev)
    assert_close(fit.w, w_star, "statistical", rtol=0, atol=2e-3)
    self.assertEqual(fit.losses.shape, (4000,))
    self.assertLess(float(fit.losses[-1]), float(fit.losses[0]))

  @pytest.mark.heavy
  def test_mini_batch_fit_is_deterministic_and_decreases_loss(self):
    kwargs = dict(key=jax.random.key(3), loss="multi", steps=300, batch_size=32)
    a = fit_posthoc(self.z_new, self.z_prev, self.history, **kwargs)
    b = fit_posthoc(self.z_new, self.z_prev, self.history, **kwargs)
    np.testing.assert_array_equal(a.w, b.w)
    full = lambda w: float(multi_step_loss(self.z_new, self.z_prev, w, self.history))
    w0 = init_backward(jax.random.split(jax.random.key(3))[0], 4, 6, dtype=np.float64)
    self.assertLess(full(a.w), 0.5 * full(w0))

  @parameterized.parameters("single", "multi")
  @pytest.mark.heavy
  def test_counted_batches_equal_their_unfolded_rows_and_continue_exactly(self, loss):
    rng = np.random.default_rng(4)
    n = self.z_new.shape[0]
    drawn = rng.integers(0, n, size=(6, 12))  # six batches of 12 rows with repeats
    unfolded = (drawn, np.ones(drawn.shape))
    folded_rows, folded_counts = [], []
    for b in drawn:  # each batch as its distinct rows with counts, padded with count 0 to a common width
      rows, counts = np.unique(b, return_counts=True)
      folded_rows.append(np.pad(rows, (0, 12 - len(rows))))
      folded_counts.append(np.pad(counts, (0, 12 - len(counts))).astype(float))
    folded = (np.stack(folded_rows), np.stack(folded_counts))
    kwargs = dict(key=jax.random.key(5), loss=loss, learning_rate=1e-2)
    a = fit_posthoc(self.z_new, self.z_prev, self.history, batches=unfolded, **kwargs)
    b = fit_posthoc(self.z_new, self.z_prev, self.history, batches=folded, **kwargs)
    assert_close(b.losses, a.losses)
    assert_close(b.w, a.w)
    # step 0's loss is the mean over the batch's rows at the initial W (float64 NumPy)
    w0 = np.asarray(init_backward(jax.random.split(jax.random.key(5))[0], 4, 6, dtype=np.float64))
    delta = self.z_new[drawn[0]] @ w0.T - self.z_prev[drawn[0]]
    terms = [np.sum(delta**2, axis=1)]
    for w in reversed(self.history):
      delta = delta @ np.asarray(w).T
      terms.append(np.sum(delta**2, axis=1))
    per_row = terms[0] if loss == "single" else np.mean(terms, axis=0)
    assert_close(a.losses[0], per_row.mean())
    # three steps, then three more from the returned state, equal six steps at once
    first = fit_posthoc(self.z_new, self.z_prev, self.history, batches=(folded[0][:3], folded[1][:3]), **kwargs)
    second = fit_posthoc(
      self.z_new,
      self.z_prev,
      self.history,
      batches=(folded[0][3:], folded[1][3:]),
      init=first,
      loss=loss,
      learning_rate=1e-2,
    )
    assert_close(second.w, b.w)
    assert_close(np.concatenate([first.losses, second.losses]), b.losses)

  def test_bad_batches_are_refused(self):
    ok = (np.zeros((2, 3), int), np.ones((2, 3)))
    for batches, message in (
      ((np.zeros((2, 3), int), np.ones((2, 4))), "same shape"),
      ((np.zeros((2, 3), int), -np.ones((2, 3))), "counts must be >= 0"),
      ((np.full((2, 3), 999), np.ones((2, 3))), r"lie in \[0, 200\)"),
      ((np.zeros((2, 3)), np.ones((2, 3))), "integer ids"),
      ("rows", "a pair"),
    ):
      with self.assertRaisesRegex(ValueError, message):
        fit_posthoc(self.z_new, self.z_prev, key=jax.random.key(0), batches=batches)
    with self.assertRaisesRegex(ValueError, "holds 2 steps"):
      fit_posthoc(self.z_new, self.z_prev, key=jax.random.key(0), batches=ok, steps=3)
    with self.assertRaisesRegex(ValueError, "pass `key`"):
      fit_posthoc(self.z_new, self.z_prev, batches=ok)

  def test_init_backward_is_torch_default_uniform(self):
    w = np.asarray(init_backward(jax.random.key(1), 50, 16))
    self.assertEqual(w.shape, (50, 16))
    self.assertLessEqual(np.abs(w).max(), 1 / 4)
    self.assertGreater(np.abs(w).max(), 0.9 / 4)  # spread over the whole interval

  def test_backward_linear_module_applies_its_weight(self):
    module = BackwardLinear(4, 6, rngs=nnx.Rngs(0))
    assert_close(module(self.z_new), apply_backward(self.z_new, module.w[...]))
    self.assertEqual(module.w[...].shape, (4, 6))


if __name__ == "__main__":
  absltest.main()
