"""Tests of bcjax.gramian: Gramian-form identities against float64 double sums, Monte-Carlo unbiasedness (Prop. 1, 3),
PSD preservation (Prop. 2, SOGram), SOGram's closed form and variance bound (Prop. 5), the low-rank prior, the logQ
sign, estimator-state stability and bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from hypothesis import given
from hypothesis import strategies as st

from bcjax.gramian import (
  batch_gramian,
  cross_gramian,
  double_sum_penalty,
  full_gramian,
  global_orthogonal_penalty,
  gramian,
  gramian_form_penalty,
  gramian_penalty,
  low_rank_prior_penalty,
  penalty_surrogate,
  sagram,
  sampled_softmax_loss,
  sampling_probabilities,
  sogram,
)
from tests._bad_inputs import bad_input_test_case
from tests._tolerance import assert_close


def np_double_sum(u, v, mu=None, nu=None):
  mu = np.ones(len(u)) if mu is None else mu
  nu = np.ones(len(v)) if nu is None else nu
  total = 0.0
  for i in range(len(u)):
    for j in range(len(v)):
      total += mu[i] * nu[j] * float(u[i] @ v[j]) ** 2
  return total / (len(u) * len(v))


class PenaltyTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.u, self.v = rng.normal(size=(13, 4)), rng.normal(size=(9, 4))
    self.counts = rng.integers(1, 100, size=50).astype(float)

  def test_gramian_matches_numpy_with_weights_and_mask(self):
    a = np.random.default_rng(1).uniform(0, 2, size=13)
    assert_close(gramian(self.u), self.u.T @ self.u / 13)
    assert_close(gramian(self.u, a), (self.u * a[:, None]).T @ self.u / 13)
    where = np.arange(13) < 10
    assert_close(gramian(self.u, where=where), self.u[:10].T @ self.u[:10] / 10)

  def test_all_pairs_penalty_equals_gramian_inner_product(self):
    u, v = self.u[:9], self.v
    assert_close(gramian_penalty(gramian(u), gramian(v)), np_double_sum(u, v))

  @parameterized.parameters("uniform", "linear", "sqrt")
  def test_double_sum_equals_gramian_form_for_every_sampling_scheme(self, kind):
    p = sampling_probabilities(self.counts, kind)
    rng = np.random.default_rng(2)
    i, j = rng.choice(50, 13, p=p), rng.choice(50, 9, p=p)
    mu, nu = 1 / (50 * p[i]), 1 / (50 * p[j])
    expected = np_double_sum(self.u, self.v, mu, nu)
    assert_close(double_sum_penalty(self.u, self.v, mu, nu), expected)
    assert_close(gramian_form_penalty(self.u, self.v, mu, nu), expected)

  @pytest.mark.heavy
  def test_low_rank_prior_penalty_equals_double_sum(self):
    rng = np.random.default_rng(3)
    u, v, q, r = rng.normal(size=(7, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 2)), rng.normal(size=(7, 2))
    expected = np.mean((u @ v.T - q @ r.T) ** 2)
    assert_close(low_rank_prior_penalty(u, v, q, r), expected)

  def test_global_orthogonal_penalty(self):
    gu = gramian(self.u)
    expected = max(np.sum(np.asarray(gu) ** 2), 0.25) + 0.25
    assert_close(global_orthogonal_penalty(gu, np.zeros((4, 4))), expected)

  @pytest.mark.heavy
  def test_surrogate_gradient_equals_penalty_gradient_with_exact_gramians(self):
    u, v = self.u[:9], self.v
    g = lambda u, v: gramian_penalty(gramian(u), gramian(v))
    s = lambda u, v: penalty_surrogate(u, v, gramian(u), gramian(v))
    for a, b in zip(jax.grad(g, argnums=(0, 1))(u, v), jax.grad(s, argnums=(0, 1))(u, v)):
      assert_close(b, a)  # both carry (2/n) G_v u_i
    assert_close(s(u, v), 2 * g(u, v))  # its value estimates 2g

  @pytest.mark.heavy
  def test_surrogate_gradient_is_unbiased_monte_carlo(self):
    # Prop. 1: batches drawn uniformly, exact Gramians held fixed -> E[grad of surrogate] = grad g.
    u, v = jnp.asarray(self.u[:9]), jnp.asarray(self.v)
    n, size = 9, 3
    gu, gv = gramian(u), gramian(v)
    full = jax.grad(lambda u: gramian_penalty(gramian(u), gv))(u)

    def batch_grad(key):
      idx = jax.random.randint(key, (size,), 0, n)
      return jax.grad(lambda uu: penalty_surrogate(uu[idx], v[idx], gu, gv))(u)

    grads = jax.vmap(batch_grad)(jax.random.split(jax.random.key(0), 40000))
    assert_close(np.mean(grads, axis=0), full, "statistical", rtol=0.03, atol=2e-3)

  @pytest.mark.heavy
  def test_prior_surrogate_gradient_matches_prior_penalty(self):
    # Prop. 6 for both towers: the left tower's prior term is -2<u_i, H_v q_i>, the right one's -2<v_i, H_u r_i>.
    rng = np.random.default_rng(4)
    u, v, q, r = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    surrogate = lambda uu, vv: penalty_surrogate(
      uu, vv, gramian(u), gramian(v), q=q, r=r, hu_hat=cross_gramian(u, q), hv_hat=cross_gramian(v, r)
    )
    exact = jax.grad(lambda uu, vv: low_rank_prior_penalty(uu, vv, q, r), argnums=(0, 1))(u, v)
    sur = jax.grad(surrogate, argnums=(0, 1))(u, v)
    assert_close(sur[0], exact[0], err_msg="left tower")
    assert_close(sur[1], exact[1], err_msg="right tower")
    # Its value estimates 2 (g^P - c), c = <G_q, G_r> (a constant in theta).
    c = gramian_penalty(gramian(q), gramian(r))
    assert_close(surrogate(u, v), 2 * (low_rank_prior_penalty(u, v, q, r) - c))

  @pytest.mark.heavy
  def test_logq_correction_recovers_the_full_partition_function(self):
    rng = np.random.default_rng(5)
    n, k, m = 40, 4, 200000
    items, x = rng.normal(size=(n, k)), rng.normal(size=(1, k))
    q = sampling_probabilities(rng.integers(1, 50, n), "linear")
    sample = rng.choice(n, m, p=q)
    scores = (x @ items.T)[0]
    full = np.log(np.sum(np.exp(scores)))
    for sign, expect_close in ((1.0, True), (-1.0, False)):
      loss = float(sampled_softmax_loss(x, items[sample], np.array([0]), log_q=sign * np.log(q[sample])))
      estimate = loss + (scores[sample[0]] - sign * np.log(q[sample[0]])) - np.log(m)
      self.assertEqual(abs(estimate - full) < 0.05, expect_close, (sign, estimate, full))


def random_trajectory(seed, n=12, k=3):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(n, k)), rng.normal(size=(n, k))  # old cache, current embeddings


# One compile per number of refreshed rows: eagerly, each example's update ran op by op (~12 s for the examples).
_SAG = sagram(12, beta="sag")
_jit_sag_update = jax.jit(_SAG.update)


class EstimatorTest(parameterized.TestCase):
  @pytest.mark.heavy
  def test_saga_estimate_is_unbiased_monte_carlo(self):
    cache, current = map(jnp.asarray, random_trajectory(0))
    a = jnp.asarray(np.random.default_rng(1).uniform(0.5, 2, size=12))
    est = sagram(12, beta="saga")
    state = est.init(cache, weights=a)

    def one(key):
      idx = jax.random.randint(key, (4,), 0, 12)  # uniform, with replacement
      return est.update(state, current[idx], indices=idx, weights=a[idx])[0].gramian

    mean = np.mean(jax.vmap(one)(jax.random.split(jax.random.key(0), 30000)), axis=0)
    assert_close(mean, gramian(current, a), "statistical", rtol=0.03, atol=0.02)

  @given(st.integers(0, 2**31 - 1), st.lists(st.integers(0, 11), min_size=1, max_size=8))
  @pytest.mark.heavy
  def test_sag_estimate_is_psd_gramian_of_refreshed_cache(self, seed, idx):
    cache, current = random_trajectory(seed)
    idx = np.asarray(idx)
    estimate, state = _jit_sag_update(_SAG.init(cache), current[idx], indices=idx)
    refreshed = cache.copy()
    refreshed[idx] = current[idx]  # duplicates carry equal rows here
    assert_close(estimate.gramian, gramian(refreshed))
    assert_close(state.gramian_sum, gramian(refreshed))
    np.testing.assert_array_equal(state.cache, refreshed)
    self.assertGreaterEqual(np.linalg.eigvalsh(np.asarray(estimate.gramian)).min(), -1e-12)

  @given(st.integers(0, 2**31 - 1), st.floats(0.01, 1.0), st.integers(1, 6))
  def test_sogram_stays_psd(self, seed, alpha, steps):
    rng = np.random.default_rng(seed)
    est = sogram(alpha)
    state = est.init(jax.ShapeDtypeStruct((3,), jnp.float64))
    for _ in range(steps):
      g, state = est.update(state, rng.normal(size=(2, 3)), weights=rng.uniform(0, 3, size=2))
    self.assertGreaterEqual(np.linalg.eigvalsh(np.asarray(g.gramian)).min(), -1e-12)

  @pytest.mark.heavy
  def test_saga_projection_gives_psd(self):
    cache, current = random_trajectory(3)
    est = sagram(12, beta="saga", project=True)
    g, _ = est.update(est.init(cache * 3), current[:1] * 0.1, indices=np.array([0]))
    self.assertGreaterEqual(np.linalg.eigvalsh(np.asarray(g.gramian)).min(), -1e-12)

  def test_sogram_equals_closed_form_weighted_sum(self):
    rng = np.random.default_rng(4)
    alpha = 0.3
    batches = [rng.normal(size=(5, 3)) for _ in range(6)]
    est = sogram(alpha)
    state = est.init(batches[0])
    for x in batches:
      g, state = est.update(state, x)
    t = len(batches)
    closed = sum(alpha * (1 - alpha) ** (t - tau) * x.T @ x / 5 for tau, x in enumerate(batches, start=1))
    assert_close(g.gramian, closed)
    self.assertEqual(int(state.count), 6)

  @pytest.mark.heavy
  def test_sogram_variance_bound_of_prop5(self):
    # Fixed embeddings: G-bar^(t) = (1 - (1-alpha)^t) G, and E||G-hat - G-bar||^2 <= sigma^2 alpha / (2 - alpha),
    # with sigma^2 the variance of a one-batch estimate.
    _, u = random_trajectory(5, n=30, k=3)
    u = jnp.asarray(u)
    g_true = gramian(u)
    size, alpha, t = 2, 0.2, 60
    est = sogram(alpha)

    def run(key):
      def step(state, k):
        idx = jax.random.randint(k, (size,), 0, 30)
        return est.update(state, u[idx])[1], None

      state, _ = jax.lax.scan(step, est.init(u), jax.random.split(key, t))
      return state.gramian

    keys = jax.random.split(jax.random.key(1), 4000)
    finals = jax.vmap(run)(keys)
    g_bar = (1 - (1 - alpha) ** t) * g_true
    variance = float(np.mean(np.sum((np.asarray(finals) - np.asarray(g_bar)) ** 2, axis=(1, 2))))
    one = jax.vmap(lambda k: gramian(u[jax.random.randint(k, (size,), 0, 30)]))(keys)
    sigma2 = float(np.mean(np.sum((np.asarray(one) - np.asarray(g_true)) ** 2, axis=(1, 2))))
    self.assertLessEqual(variance, sigma2 * alpha / (2 - alpha) * 1.05)
    self.assertGreater(variance, 0.5 * sigma2 * alpha / (2 - alpha))  # the bound is tight at fixed parameters

  @parameterized.parameters("linear", "sqrt")
  @pytest.mark.heavy
  def test_batch_gramian_with_inverse_probability_weights_is_unbiased(self, kind):
    rng = np.random.default_rng(6)
    counts = rng.integers(1, 100, 20)
    u = jnp.asarray(rng.normal(size=(20, 3)))
    p = jnp.asarray(sampling_probabilities(counts, kind))
    est = batch_gramian(sampling=kind, counts=counts)
    state = est.init(u)

    def one(key):
      idx = jax.random.choice(key, 20, (5,), p=p)
      return est.update(state, u[idx], indices=idx)[0].gramian

    mean = np.mean(jax.vmap(one)(jax.random.split(jax.random.key(2), 40000)), axis=0)
    assert_close(mean, gramian(u), "statistical", rtol=0.05, atol=0.03)

  @pytest.mark.heavy
  def test_prior_variants_track_cross_gramians(self):
    rng = np.random.default_rng(7)
    cache, current = random_trajectory(8)
    q = rng.normal(size=(12, 2))
    est = sagram(12, beta="sag", prior_dim=2)
    estimate, _ = est.update(est.init(cache, prior=q), current, indices=np.arange(12), prior=q)
    assert_close(estimate.cross, cross_gramian(current, q))
    so = sogram(1.0, prior_dim=2)
    g, _ = so.update(so.init(current), current, prior=q)
    assert_close(g.cross, cross_gramian(current, q))

  @parameterized.named_parameters(
    ("sogram", lambda: sogram(0.1), {}),
    ("sagram", lambda: sagram(12, beta="saga"), {"indices": np.array([1, 2])}),
    ("batch", lambda: batch_gramian(sampling="uniform"), {}),
  )
  def test_state_is_stable_under_lax_cond_and_keeps_float32(self, make, kwargs):
    est = make()
    cache = np.random.default_rng(9).normal(size=(12, 3)).astype(np.float32)
    state = est.init(cache)
    x = cache[:2]

    @jax.jit
    def maybe(state, flag):
      return jax.lax.cond(flag, lambda s: est.update(s, x, **kwargs)[1], lambda s: s, state)

    new = maybe(state, True)
    same = maybe(state, False)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(state)):
      self.assertEqual((a.shape, a.dtype), (b.shape, b.dtype))
    for leaf in jax.tree.leaves(new):
      if jnp.issubdtype(leaf.dtype, jnp.floating):
        self.assertEqual(leaf.dtype, jnp.float32)
    self.assertEqual(int(same.count), 0)
    self.assertEqual(int(new.count), 1)


BAD = [
  ("alpha_zero", lambda: sogram(0.0), ValueError, ["`alpha`"]),
  ("alpha_above_one", lambda: sogram(1.5), ValueError, ["`alpha`", "1.5"]),
  ("beta_unknown", lambda: sagram(10, beta="sgd"), ValueError, ["`beta`", "sgd"]),
  ("n_zero", lambda: sagram(0), ValueError, ["`n`"]),
  ("init_rows_mismatch", lambda: sagram(5).init(np.ones((4, 3))), ValueError, ["`embeddings`", "n=5"]),
  (
    "k_mismatch",
    lambda: sogram(0.1).update(sogram(0.1).init(np.ones((2, 3))), np.ones((2, 4))),
    ValueError,
    ["`embeddings`", "k=3"],
  ),
  (
    "negative_weights",
    lambda: gramian(np.ones((2, 2)), np.array([1.0, -1.0])),
    ValueError,
    ["`weights`", "non-negative"],
  ),
  (
    "index_out_of_range",
    lambda: sagram(3).update(sagram(3).init(np.ones((3, 2))), np.ones((1, 2)), indices=np.array([3])),
    ValueError,
    ["`indices`", "[0, 3)"],
  ),
  ("penalty_shape_mismatch", lambda: gramian_penalty(np.eye(2), np.eye(3)), ValueError, ["`gu`", "`gv`"]),
  ("sampling_needs_counts", lambda: batch_gramian(sampling="sqrt"), ValueError, ["`counts`"]),
  ("unknown_sampling", lambda: sampling_probabilities([1, 2], "zipf"), ValueError, ["`kind`", "zipf"]),
  (
    "surrogate_k_mismatch",
    lambda: penalty_surrogate(np.ones((2, 3)), np.ones((2, 3)), np.eye(2), np.eye(2)),
    ValueError,
    ["`gu_hat`", "k=3"],
  ),
  (
    "prior_missing",
    lambda: sogram(0.5, prior_dim=2).update(sogram(0.5, prior_dim=2).init(np.ones((1, 3))), np.ones((1, 3))),
    ValueError,
    ["`prior`"],
  ),
]


BadInputTest = bad_input_test_case(BAD)


class FullGramianTest(parameterized.TestCase):
  """The exact oracle: (1/n) Σ_i x_i x_iᵀ over every entity, whatever the chunking, split over devices or not."""

  def setUp(self):
    super().setUp()
    self.x = np.random.default_rng(11).normal(size=(37, 4))
    self.embed = lambda i: jnp.asarray(self.x)[i] * 1.0  # traced gather, as a tower's forward pass would be

  @parameterized.parameters(1, 5, 36, 37, 64)
  def test_equals_numpy_for_any_chunking(self, chunk):
    assert_close(full_gramian(self.embed, 37, chunk_size=chunk), self.x.T @ self.x / 37)

  def test_jit_and_devices_splitting_the_chunks(self):
    want = self.x.T @ self.x / 37
    assert_close(jax.jit(lambda: full_gramian(self.embed, 37, chunk_size=6))(), want)
    # 3 devices share 7 chunks (one device gets a chunk past the end, which must add nothing).
    split = jax.vmap(lambda _: full_gramian(self.embed, 37, chunk_size=6, axis_name="d"), axis_name="d")(jnp.arange(3))
    for g in split:
      assert_close(g, want)

  def test_bad_inputs(self):
    with self.assertRaisesRegex(ValueError, "num_entities"):
      full_gramian(self.embed, 0)
    with self.assertRaisesRegex(ValueError, "chunk_size"):
      full_gramian(self.embed, 37, chunk_size=0)
    with self.assertRaisesRegex(ValueError, r"`embed` must map 5 indices to \[5, k\]"):
      full_gramian(lambda i: jnp.ones((3,)), 37, chunk_size=5)


if __name__ == "__main__":
  absltest.main()
