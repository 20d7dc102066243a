"""Tests of compose, compositions, apply_backward, apply_chain and notrans against float64 NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from hypothesis import given
from hypothesis import strategies as st

from bcjax.alignment import apply_backward, apply_chain, compose, compositions, notrans
from tests._chains import np_compose, random_chain
from tests._tolerance import assert_close


class ComposeTest(parameterized.TestCase):
  @parameterized.parameters([(3,), (5, 2), (4, 6, 3, 8)])
  def test_compose_equals_left_to_right_product(self, *dims):
    rng = np.random.default_rng(len(dims))
    ws = [rng.normal(size=(dims[i], dims[i + 1])) for i in range(len(dims) - 1)]
    got = compose(ws, dim=dims[-1]) if ws else compose([], dim=dims[0])
    assert_close(got, np_compose(ws, dims[-1]))

  def test_empty_chain_is_identity_of_given_dim(self):
    np.testing.assert_array_equal(compose([], dim=4), np.eye(4))

  def test_compositions_match_compose_for_every_j(self):
    rng = np.random.default_rng(0)
    _, ws = random_chain(rng, [3, 5, 4, 6], n=2)
    comps = compositions(ws)
    self.assertLen(comps, 3)
    for j in range(3):
      assert_close(comps[j], np_compose(ws[j:], 6))
      self.assertEqual(comps[j].shape, (ws[j].shape[0], 6))
    assert_close(comps[-1], ws[-1])

  def test_compositions_of_empty_chain_is_empty(self):
    self.assertEqual(compositions([]), [])

  def test_apply_backward_is_row_vector_form_of_w_times_z(self):
    rng = np.random.default_rng(1)
    z, w = rng.normal(size=(7, 5)), rng.normal(size=(3, 5))
    expected = np.stack([w @ z_i for z_i in z])  # the paper's column-vector W_k z_k, row by row
    assert_close(apply_backward(z, w), expected)

  def test_apply_chain_equals_composed_weight(self):
    rng = np.random.default_rng(2)
    zs, ws = random_chain(rng, [4, 6, 5], n=9)
    assert_close(apply_chain(zs[-1], ws), zs[-1] @ np_compose(ws, 5).T)
    assert_close(apply_chain(zs[-1], ws[1:]), zs[-1] @ ws[1].T)
    np.testing.assert_array_equal(apply_chain(zs[-1], []), zs[-1])

  def test_notrans_takes_leading_coordinates(self):
    z = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(notrans(z, 3), z[:, :3])
    np.testing.assert_array_equal(notrans(z, 4), z)

  def test_jit_equals_no_jit(self):
    rng = np.random.default_rng(3)
    zs, ws = random_chain(rng, [2, 3, 4, 5], n=6)
    assert_close(jax.jit(compose)(ws), compose(ws))
    jitted = jax.jit(compositions)(ws)
    for a, b in zip(jitted, compositions(ws)):
      assert_close(a, b)
    assert_close(jax.jit(apply_chain)(zs[-1], ws), apply_chain(zs[-1], ws))
    np.testing.assert_array_equal(jax.jit(notrans, static_argnums=1)(zs[-1], 2), notrans(zs[-1], 2))

  def test_vmap_over_a_stack_of_chains_equals_loop(self):
    rng = np.random.default_rng(4)
    w1, w2 = rng.normal(size=(5, 2, 3)), rng.normal(size=(5, 3, 4))
    batched = jax.vmap(lambda a, b: compose([a, b]))(w1, w2)
    for i in range(5):
      assert_close(batched[i], w1[i] @ w2[i])

  def test_grad_of_composition_matches_closed_form(self):
    rng = np.random.default_rng(5)
    w1, w2, c = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(2, 4))
    # d/dW1 <C, W1 W2> = C W2^T
    grad = jax.grad(lambda a: jnp.sum(c * compose([a, w2])))(w1)
    assert_close(grad, c @ w2.T)

  def test_float32_inputs_stay_float32(self):
    ws = [np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)]
    self.assertEqual(compose(ws).dtype, jnp.float32)
    self.assertEqual(apply_chain(np.ones((1, 4), np.float32), ws).dtype, jnp.float32)

  @given(st.lists(st.integers(1, 5), min_size=2, max_size=5), st.integers(0, 2**31 - 1))
  @pytest.mark.heavy
  def test_composition_is_associative_under_splitting(self, dims, seed):
    rng = np.random.default_rng(seed)
    ws = [rng.normal(size=(dims[i], dims[i + 1])) for i in range(len(dims) - 1)]
    for cut in range(1, len(ws)):
      assert_close(compose(ws[:cut]) @ compose(ws[cut:]), compose(ws))


if __name__ == "__main__":
  absltest.main()
