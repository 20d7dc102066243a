"""ICL's losses against float64 NumPy references and the paper's identities: Theorem 1 (L^{I,X'} = L^{I,X} + L^{II})
with exact set means, NCE-II = 0 at α = 0 or r = 1, the reference's negative counts and column mask, finite gradients
at extreme similarities, inert padded rows, jit vs no-jit, and sharded (vmap with axis_name) vs unsharded."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from hypothesis import given, settings
from hypothesis import strategies as st

from bcjax.contrastive import (
  icl_objective,
  info_nce,
  log_change_ratio,
  mixed_info_nce,
  nce_ii,
  nce_ii_from_log_ratio,
  new_negative_mask,
  old_negative_count,
)
from tests._tolerance import assert_close

TAU = 0.1


def np_logf(a, b, tau=TAU):
  a = a / np.linalg.norm(a, axis=1, keepdims=True)
  b = b / np.linalg.norm(b, axis=1, keepdims=True)
  return a @ b.T / tau


def views(seed, b=6, d=5, m=4):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(b, d)), rng.normal(size=(b, d)), rng.normal(size=(m, d)), rng.normal(size=(m, d))


_jit_info_nce, _jit_nce_ii = jax.jit(info_nce), jax.jit(nce_ii)


class TheoremTest(parameterized.TestCase):
  @given(st.integers(0, 10_000), st.floats(0.0, 1.0), st.integers(1, 6))
  @settings(max_examples=40, deadline=None)
  @pytest.mark.heavy
  def test_equivalence_with_exact_means(self, seed, alpha, k):
    anchor, positive, _, _ = views(seed)
    rng = np.random.default_rng(seed + 1)
    s_old, s_new = rng.normal(size=(k, 5)), rng.normal(size=(k, 5))  # the whole noise sets: sums = K · means
    # jitted (one compile per K), as the losses run in training; eagerly, 40 examples x 12 calls took ~20 s
    l_old = np.asarray(
      [float(_jit_info_nce(anchor[i : i + 1], positive[i : i + 1], negatives=s_old)) for i in range(6)]
    )
    l_ii = np.asarray(
      [float(_jit_nce_ii(anchor[i : i + 1], positive[i : i + 1], s_new, alpha, old_negatives=s_old)) for i in range(6)]
    )
    f_pos = np.exp(np.sum(np_logf(anchor, positive) * np.eye(6), axis=1))
    e_old, e_new = np.exp(np_logf(anchor, s_old)).mean(1), np.exp(np_logf(anchor, s_new)).mean(1)
    l_grown = -np.log(f_pos / (f_pos + k * ((1 - alpha) * e_old + alpha * e_new)))  # L^{I,X'} with E_X' (Lemma 1)
    # l_old + l_ii can cancel to far below either term: the rounding scales with the terms.
    assert_close(l_old + l_ii, l_grown, scale=np.abs(l_old) + np.abs(l_ii))

  @pytest.mark.heavy
  def test_nce_ii_vanishes(self):
    anchor, positive, z_new, _ = views(0)
    self.assertEqual(float(nce_ii(anchor, positive, z_new, 0.0)), 0.0)  # α = 0: nothing new
    # r = 1 when the new negatives are the old ones
    assert_close(
      float(nce_ii(anchor, positive, z_new, 0.4, old_negatives=z_new)), 0.0, scale=10.0
    )  # log-sums of cos/τ = O(10)
    assert_close(nce_ii_from_log_ratio(jnp.zeros(3), 0.7), 0.0, scale=1.0)
    assert_close(nce_ii_from_log_ratio(jnp.array([0.3]), 1.0), [0.3])

  def test_icl_objective_weights(self):
    assert_close(float(icl_objective(2.0, 4.0, 0.25)), 0.75 * 2.0 + 0.25 * 4.0)
    with self.assertRaisesRegex(ValueError, "`alpha`"):
      icl_objective(1.0, 1.0, 1.5)


class ReferenceFormTest(parameterized.TestCase):
  def test_info_nce_in_batch_against_numpy(self):
    anchor, positive, _, _ = views(1)
    logits = np_logf(anchor, positive)
    expected = np.mean(np.log(np.exp(logits).sum(1)) - np.diag(logits))  # B − 1 cross-view negatives
    assert_close(float(info_nce(anchor, positive)), expected)
    assert_close(float(jax.jit(info_nce)(anchor, positive)), expected)

  def test_nce_ii_against_numpy(self):
    anchor, positive, z_new, _ = views(2)
    logits, new = np.exp(np_logf(anchor, positive)), np.exp(np_logf(anchor, z_new))
    u = np.diag(logits) + new.sum(1)
    d = logits.sum(1)
    alpha = 0.3
    expected = np.mean(np.log((1 - alpha) + alpha * u / d))
    assert_close(float(nce_ii(anchor, positive, z_new, alpha)), expected)
    assert_close(log_change_ratio(anchor, positive, z_new), np.log(u / d))

  def test_negative_counts_match_the_reference_table(self):
    counts = [old_negative_count(a / 10, 32) for a in range(1, 10)]
    self.assertEqual(counts, [27, 24, 21, 18, 15, 12, 9, 6, 3])

  def test_new_negative_mask(self):
    m = np.asarray(new_negative_mask(6, 2))
    np.testing.assert_array_equal(m.sum(1), [2] * 6)  # every anchor gets exactly new_num new negatives
    np.testing.assert_array_equal(m[0], [0, 1, 1, 0, 0, 0])  # anchors < new_num use columns 0..new_num but self
    np.testing.assert_array_equal(m[4], [1, 1, 0, 0, 0, 0])  # the others use columns 0..new_num-1
    self.assertFalse(np.any(np.diag(m)))

  def test_mixed_info_nce_against_numpy(self):
    anchor, positive, _, z_old = views(3)
    b, new_num = 6, 2
    logits = np.exp(np_logf(anchor, positive))
    mask = np.asarray(new_negative_mask(b, new_num))
    den = np.diag(logits) + (logits * mask).sum(1) + np.exp(np_logf(anchor, z_old)).sum(1)
    expected = np.mean(np.log(den / np.diag(logits)))
    assert_close(float(mixed_info_nce(anchor, positive, z_old, new_num)), expected)


class RobustnessTest(parameterized.TestCase):
  @parameterized.parameters(0.0, 0.5, 1.0)
  @pytest.mark.heavy
  def test_gradients_finite_at_extreme_similarities(self, alpha):
    d = 4
    same = jnp.tile(jnp.eye(d)[:1], (5, 1))  # anchors, positives and negatives all identical: cos = 1 everywhere
    opposite = -same
    for z_new in (same[:3], opposite[:3]):
      g = jax.grad(lambda a, p, n: nce_ii(a, p, n, alpha, temperature=0.01), argnums=(0, 1, 2))(same, same, z_new)
      self.assertTrue(all(np.isfinite(np.asarray(x)).all() for x in g))
    g = jax.grad(
      lambda a: info_nce(a, opposite, temperature=0.01) + mixed_info_nce(a, same, opposite[:2], 1, temperature=0.01)
    )(same)
    self.assertTrue(np.isfinite(np.asarray(g)).all())
    # a single real anchor has no in-batch negative: loss log(1) = 0, gradient 0 (not NaN)
    where = jnp.array([True, False, False, False, False])
    self.assertEqual(float(info_nce(same, same, where=where)), 0.0)
    self.assertTrue(np.isfinite(np.asarray(jax.grad(lambda a: info_nce(a, same, where=where))(same))).all())

  @pytest.mark.heavy
  def test_padded_rows_are_inert(self):
    anchor, positive, z_new, _ = views(4)
    rng = np.random.default_rng(9)
    pad_a, pad_p = (
      np.concatenate([anchor, 1e3 * rng.normal(size=(3, 5))]),
      np.concatenate([positive, rng.normal(size=(3, 5))]),
    )
    pad_n = np.concatenate([z_new, rng.normal(size=(2, 5))])
    where = np.arange(9) < 6
    nwhere = np.arange(6) < 4
    assert_close(float(info_nce(pad_a, pad_p, where=where)), float(info_nce(anchor, positive)))
    assert_close(
      float(nce_ii(pad_a, pad_p, pad_n, 0.3, where=where, new_negatives_where=nwhere)),
      float(nce_ii(anchor, positive, z_new, 0.3)),
    )
    g = jax.grad(lambda a: nce_ii(a, pad_p, pad_n, 0.3, where=where, new_negatives_where=nwhere))(pad_a)
    np.testing.assert_array_equal(np.asarray(g)[6:], 0.0)

  @pytest.mark.heavy
  def test_sharded_equals_unsharded(self):
    anchor, positive, z_new, _ = views(5, b=8, m=4)
    shard = lambda x: x.reshape(2, -1, x.shape[-1])
    sharded = jax.vmap(
      lambda a, p, n: (info_nce(a, p, axis_name="d"), nce_ii(a, p, n, 0.4, axis_name="d")), axis_name="d"
    )(shard(anchor), shard(positive), shard(z_new))
    assert_close(float(sharded[0][0]), float(info_nce(anchor, positive)))
    assert_close(float(sharded[1][1]), float(nce_ii(anchor, positive, z_new, 0.4)))

  @pytest.mark.heavy
  def test_mixed_info_nce_sharded_picks_the_one_device_negatives(self):
    anchor, positive, _, z_old = views(11, b=8, m=4)
    new_num = 5  # anchors 0..4 take columns 0..5 but self, the others 0..4: rows of both devices are negatives
    want = float(mixed_info_nce(anchor, positive, z_old, new_num))
    shard = lambda x: x.reshape(2, -1, x.shape[-1])
    # jitted: op by op, each of the vmapped loss's primitives would compile a program of its own (~10 s in all)
    got = jax.jit(jax.vmap(lambda a, p, o: mixed_info_nce(a, p, o, new_num, axis_name="d"), axis_name="d"))(
      shard(anchor), shard(positive), shard(z_old)
    )
    assert_close(np.asarray(got), [want, want])
    # blocks of 4 real rows and one padding row each (as graph batches split over devices): the real positions
    pad = lambda x: np.concatenate([x.reshape(2, 4, -1), np.full((2, 1, x.shape[-1]), 1e30)], axis=1)
    where = np.tile(np.arange(5) < 4, (2, 1))
    positions = np.array([[0, 1, 2, 3, 4], [4, 5, 6, 7, 8]])
    old = np.stack([z_old[:2], z_old[2:]])
    got = jax.jit(
      jax.vmap(
        lambda a, p, o, w, q: mixed_info_nce(a, p, o, new_num, where=w, positions=q, axis_name="d"), axis_name="d"
      )
    )(pad(anchor), pad(positive), old, where, positions)
    assert_close(np.asarray(got), [want, want])
    # the default positions count the padding rows and pick other negatives: the positions matter
    default = jax.jit(
      jax.vmap(lambda a, p, o, w: mixed_info_nce(a, p, o, new_num, where=w, axis_name="d"), axis_name="d")
    )(pad(anchor), pad(positive), old, where)
    self.assertGreater(abs(float(default[0]) - want), 1e-4 * abs(want))

  def test_bad_inputs(self):
    anchor, positive, z_new, _ = views(6)
    with self.assertRaisesRegex(ValueError, r"`positive` has shape \(5, 5\)"):
      info_nce(anchor, positive[:5])
    with self.assertRaisesRegex(ValueError, r"`alpha` .* must lie in \[0, 1\], got 1.5"):
      nce_ii(anchor, positive, z_new, 1.5)
    with self.assertRaisesRegex(ValueError, "`negatives` has shape"):
      nce_ii(anchor, positive, z_new[:, :3], 0.5)
    with self.assertRaisesRegex(ValueError, r"`new_num` must be an integer in \[0, B-1\] = \[0, 5\], got 6"):
      mixed_info_nce(anchor, positive, z_new, 6)
    with self.assertRaisesRegex(ValueError, r"`temperature` must lie in \(0, inf\)"):
      info_nce(anchor, positive, temperature=0.0)


if __name__ == "__main__":
  absltest.main()
