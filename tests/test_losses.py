"""Tests of single_step_loss, multi_step_loss and alignment_error: NumPy float64 references, the error
decomposition identity (eq. 9), gradients, jit, vmap, masks and sharded means."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from jax.test_util import check_grads

from bcjax.alignment import (
  alignment_error,
  apply_chain,
  compose,
  multi_step_loss,
  multi_step_pull,
  semi_orthogonal,
  single_step_loss,
)
from tests._chains import np_compose, random_chain
from tests._tolerance import assert_close


def np_single(z_new, z_prev, w, per_dim=False):
  delta = z_new @ w.T - z_prev
  sq = (delta**2).sum(1)
  return (sq / delta.shape[1] if per_dim else sq).mean()


def np_multi(z_new, z_prev, w, history, per_dim=False):
  """Eq. (10) written literally: (1/k) sum_j mean ||W^j_{k-1} delta_k||^2 with explicit compositions."""
  k = len(history) + 1
  delta = z_new @ w.T - z_prev  # [n, d_(k-1)]
  total = 0.0
  for j in range(k):
    a = np_compose(history[j:], z_prev.shape[1])  # W^j_{k-1} = W_{j+1} ... W_{k-1}; identity when j = k-1
    v = delta @ a.T
    sq = (v**2).sum(1)
    total += (sq / a.shape[0] if per_dim else sq).mean()
  return total / k


class LossValueTest(parameterized.TestCase):
  @parameterized.product(per_dim=[False, True], dims=[(3, 4), (5, 2, 6), (4, 6, 3, 5, 7)])
  @pytest.mark.heavy
  def test_losses_match_numpy(self, per_dim, dims):
    rng = np.random.default_rng(sum(dims))
    zs, ws = random_chain(rng, list(dims), n=11)
    z_new, z_prev, w, history = zs[-1], zs[-2], ws[-1], ws[:-1]
    assert_close(single_step_loss(z_new, z_prev, w, per_dim=per_dim), np_single(z_new, z_prev, w, per_dim))
    assert_close(
      multi_step_loss(z_new, z_prev, w, history, per_dim=per_dim), np_multi(z_new, z_prev, w, history, per_dim)
    )

  def test_multi_step_with_empty_history_is_single_step(self):
    zs, ws = random_chain(np.random.default_rng(0), [4, 5], n=8)
    for per_dim in (False, True):
      assert_close(
        multi_step_loss(zs[1], zs[0], ws[0], [], per_dim=per_dim),
        single_step_loss(zs[1], zs[0], ws[0], per_dim=per_dim),
      )

  def test_per_dim_equals_torch_style_mse_of_each_term(self):
    # The reference's nn.MSELoss: mean over rows and coordinates of each term.
    zs, ws = random_chain(np.random.default_rng(1), [3, 4, 6], n=10)
    delta = zs[2] @ ws[1].T - zs[1]
    expected = (np.mean(delta**2) + np.mean((delta @ ws[0].T) ** 2)) / 2
    assert_close(multi_step_loss(zs[2], zs[1], ws[1], ws[:1], per_dim=True), expected)

  def test_alignment_error_is_mean_l2_distance(self):
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(13, 4)), rng.normal(size=(13, 4))
    assert_close(alignment_error(a, b), np.linalg.norm(a - b, axis=1).mean())


class ErrorDecompositionTest(parameterized.TestCase):
  """Eq. (9): delta^j_k = delta_{j+1} + W^j_{j+1} delta_{j+2} + ... + W^j_{k-1} delta_k."""

  @parameterized.parameters(range(5))
  @pytest.mark.heavy
  def test_multi_step_error_is_sum_of_carried_single_step_errors(self, seed):
    rng = np.random.default_rng(100 + seed)
    dims = list(rng.integers(2, 7, size=rng.integers(2, 6)))
    zs, ws = random_chain(rng, dims, n=9)
    big_k = len(ws)
    single = {i: np.asarray(apply_chain(zs[i], [ws[i - 1]])) - zs[i - 1] for i in range(1, big_k + 1)}  # delta_i
    for j in range(big_k):
      direct = np.asarray(apply_chain(zs[big_k], ws[j:])) - zs[j]  # eq. (8): W^j_k z_k - z_j
      summed = sum(single[i] @ np.asarray(compose(ws[j : i - 1], dim=dims[i - 1])).T for i in range(j + 1, big_k + 1))
      assert_close(direct, summed)

  @pytest.mark.heavy
  def test_multi_step_loss_is_mean_of_carried_last_error(self):
    # The terms of eq. (10) are exactly the last summands of eq. (9) for j = 0..k-1.
    rng = np.random.default_rng(7)
    zs, ws = random_chain(rng, [3, 5, 4, 6], n=12)
    delta_k = zs[3] @ ws[2].T - zs[2]
    terms = [np.mean(np.sum((delta_k @ np_compose(ws[j:2], 4).T) ** 2, 1)) for j in range(3)]
    assert_close(multi_step_loss(zs[3], zs[2], ws[2], ws[:2]), np.mean(terms))


class MultiStepPullTest(parameterized.TestCase):
  """R of multi_step_pull: the multi-step loss is the mean of delta^T R delta / c_(k-1), the single-step one of
  delta^T delta / c_(k-1)."""

  @parameterized.product(per_dim=[False, True], dims=[(3, 4), (5, 2, 6), (4, 6, 3, 5, 7)])
  @pytest.mark.heavy
  def test_the_multi_step_loss_is_the_quadratic_form_of_r(self, per_dim, dims):
    rng = np.random.default_rng(10 + sum(dims))
    zs, ws = random_chain(rng, list(dims), n=13)
    z_new, z_prev, w, history = zs[-1], zs[-2], ws[-1], ws[:-1]
    r = np.asarray(multi_step_pull(history, dim=dims[-2], per_dim=per_dim), np.float64)
    delta = z_new @ w.T - z_prev
    c = delta.shape[1] if per_dim else 1.0
    quadratic = np.mean(np.einsum("ni,ij,nj->n", delta, r, delta)) / c
    assert_close(quadratic, np_multi(z_new, z_prev, w, history, per_dim))  # the literal eq. (10), float64
    assert_close(multi_step_loss(z_new, z_prev, w, history, per_dim=per_dim), quadratic)
    assert_close(r, r.T, "linalg")
    self.assertGreaterEqual(np.linalg.eigvalsh(r).min(), -1e-5 * np.abs(r).max())

  @parameterized.parameters(False, True)
  @pytest.mark.heavy
  def test_kappa_is_the_loss_ratio_over_an_orthonormal_basis_of_residuals(self, per_dim):
    # E[delta^T R delta] / E[delta^T delta] = tr R / D for isotropic delta; an orthonormal basis averages exactly.
    rng = np.random.default_rng(5)
    _, ws = random_chain(rng, [3, 5, 4, 6], n=2)
    d = 6
    q = np.linalg.qr(rng.normal(size=(d, d)))[0]  # rows: an orthonormal basis of R^6
    z_prev, w = rng.normal(size=(d, d)), np.eye(d)  # W_k = I, so delta = z_k - z_(k-1) = q
    z_new = z_prev + q
    ratio = multi_step_loss(z_new, z_prev, w, ws, per_dim=per_dim) / single_step_loss(z_new, z_prev, w, per_dim=per_dim)
    r = np.asarray(multi_step_pull(ws, per_dim=per_dim), np.float64)
    assert_close(ratio, np.trace(r) / d)

  def test_orthogonal_chains_leave_the_single_step_loss(self):
    rng = np.random.default_rng(6)
    square = [np.linalg.qr(rng.normal(size=(4, 4)))[0] for _ in range(3)]
    for per_dim in (False, True):  # square orthogonal maps keep every norm: R = I
      assert_close(multi_step_pull(square, per_dim=per_dim), np.eye(4), "linalg", scale=1.0)  # unit-norm terms
    # Orthonormal rows (D_(j) < D_(k-1)): each carried term keeps D_j of the D_(k-1) directions, which the
    # reference's per-coordinate scaling restores on average: kappa = 1, though R is not I.
    rows = [np.asarray(semi_orthogonal(rng.normal(size=(2, 3)))), np.asarray(semi_orthogonal(rng.normal(size=(3, 5))))]
    r = np.asarray(multi_step_pull(rows, per_dim=True), np.float64)
    assert_close(np.trace(r) / 5, 1.0, "linalg")
    self.assertGreater(np.abs(r - np.eye(5)).max(), 0.1)
    # Without it the carried terms lose those directions: kappa = (5 + 3 + 2) / (3 * 5).
    assert_close(np.trace(np.asarray(multi_step_pull(rows), np.float64)) / 5, 10 / 15, "linalg")

  def test_empty_history_is_the_identity_and_needs_dim(self):
    np.testing.assert_array_equal(multi_step_pull([], dim=3), np.eye(3))
    with self.assertRaisesRegex(ValueError, "multi_step_pull: `history` is empty .* pass `dim`"):
      multi_step_pull([])
    with self.assertRaisesRegex(ValueError, r"`dim`=4 but the last history weight `history\[0\]` has shape \(2, 3\)"):
      multi_step_pull([np.ones((2, 3))], dim=4)
    with self.assertRaisesRegex(ValueError, "inner dimensions must match"):
      multi_step_pull([np.ones((2, 3)), np.ones((4, 5))])

  def test_jit_equals_no_jit(self):
    _, ws = random_chain(np.random.default_rng(8), [3, 4, 5], n=2)
    f = jax.jit(functools.partial(multi_step_pull, per_dim=True))
    assert_close(f(ws), multi_step_pull(ws, per_dim=True), "linalg")


class LossTransformTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    zs, ws = random_chain(np.random.default_rng(3), [3, 4, 5], n=6)
    self.z_new, self.z_prev, self.w, self.history = zs[2], zs[1], ws[1], ws[:1]

  @pytest.mark.heavy
  def test_gradients_match_finite_differences(self):
    check_grads(lambda w, z: single_step_loss(z, self.z_prev, w), (self.w, self.z_new), order=2, modes=["fwd", "rev"])
    check_grads(
      lambda w, z, h: multi_step_loss(z, self.z_prev, w, [h]),
      (self.w, self.z_new, self.history[0]),
      order=2,
      modes=["fwd", "rev"],
    )
    check_grads(lambda a: alignment_error(a, self.z_prev), (self.z_new @ self.w.T,), order=1, modes=["fwd", "rev"])

  def test_gradient_of_single_step_loss_closed_form(self):
    # d/dW mean ||W z - y||^2 = (2/n) (Z W^T - Y)^T Z
    n = self.z_new.shape[0]
    expected = 2.0 / n * (self.z_new @ self.w.T - self.z_prev).T @ self.z_new
    assert_close(jax.grad(single_step_loss, argnums=2)(self.z_new, self.z_prev, self.w), expected)

  def test_alignment_error_gradient_is_finite_at_exact_match(self):
    grad = jax.grad(alignment_error)(self.z_prev, self.z_prev)
    self.assertTrue(np.all(np.isfinite(grad)))
    np.testing.assert_array_equal(grad, 0.0)

  def test_jit_equals_no_jit(self):
    args = (self.z_new, self.z_prev, self.w)
    for per_dim in (False, True):
      f = functools.partial(single_step_loss, per_dim=per_dim)
      assert_close(jax.jit(f)(*args), f(*args))
      g = functools.partial(multi_step_loss, per_dim=per_dim)
      assert_close(jax.jit(g)(*args, self.history), g(*args, self.history))
    assert_close(
      jax.jit(alignment_error)(self.z_new[:, :4], self.z_prev), alignment_error(self.z_new[:, :4], self.z_prev)
    )

  def test_vmap_over_independent_problems_equals_loop(self):
    rng = np.random.default_rng(4)
    z_new, z_prev = rng.normal(size=(3, 6, 5)), rng.normal(size=(3, 6, 4))
    w, h = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 2, 4))
    batched = jax.vmap(lambda a, b, c, d: multi_step_loss(a, b, c, [d]))(z_new, z_prev, w, h)
    for i in range(3):
      assert_close(batched[i], np_multi(z_new[i], z_prev[i], w[i], [h[i]]))

  def test_where_mask_ignores_padded_rows(self):
    pad = np.concatenate([self.z_new, np.full((3, 5), 1e3)]), np.concatenate([self.z_prev, np.zeros((3, 4))])
    where = np.arange(9) < 6
    assert_close(single_step_loss(*pad, self.w, where=where), single_step_loss(self.z_new, self.z_prev, self.w))
    assert_close(
      multi_step_loss(*pad, self.w, self.history, where=where),
      multi_step_loss(self.z_new, self.z_prev, self.w, self.history),
    )
    assert_close(alignment_error(pad[1], pad[1] + 1.0, where=where), 2.0)

  def test_all_masked_batch_gives_zero_and_finite_gradient(self):
    where = np.zeros(6, bool)
    value, grad = jax.value_and_grad(single_step_loss, argnums=2)(self.z_new, self.z_prev, self.w, where=where)
    self.assertEqual(float(value), 0.0)
    self.assertTrue(np.all(np.isfinite(grad)))

  @pytest.mark.heavy
  def test_axis_name_gives_the_global_mean_on_every_shard(self):
    # Two shards of three rows, mapped with a named axis as pmap/shard_map would.
    shard = lambda x: x.reshape(2, 3, -1)
    f = jax.vmap(
      lambda a, b, m: multi_step_loss(a, b, self.w, self.history, where=m, axis_name="data"), axis_name="data"
    )
    where = np.array([[True, True, False], [True, True, True]])
    got = f(shard(self.z_new), shard(self.z_prev), where)
    expected = multi_step_loss(self.z_new, self.z_prev, self.w, self.history, where=where.reshape(-1))
    assert_close(got, np.full(2, expected))
    g = jax.vmap(lambda a, b: alignment_error(a, b, axis_name="data"), axis_name="data")
    assert_close(
      g(shard(self.z_new[:, :4]), shard(self.z_prev)), np.full(2, alignment_error(self.z_new[:, :4], self.z_prev))
    )

  def test_float32_stays_float32(self):
    f32 = lambda x: np.asarray(x, np.float32)
    self.assertEqual(single_step_loss(f32(self.z_new), f32(self.z_prev), f32(self.w)).dtype, jnp.float32)
    self.assertEqual(alignment_error(f32(self.z_prev), f32(self.z_prev)).dtype, jnp.float32)


if __name__ == "__main__":
  absltest.main()
