"""The two-tower model and its Gramian-penalty train step: bag means against NumPy, the entity sampler's
distribution and weights, SOGram with alpha = 1 reproducing the sampling baseline exactly, and training progress."""

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from absl.testing import absltest
from flax import nnx

from bcjax.data import synthetic_link_corpus
from bcjax.gramian import batch_gramian, penalty_surrogate, sogram
from bcjax.models import TwoTower, bag_mean
from experiments.two_tower.data import make_sampler, pair_capacity, sample, train_data
from experiments.two_tower.softmax import softmax_train_step
from experiments.two_tower.sparse import step_rows, update_rows
from experiments.two_tower.train import exact_gramians, gramian_train_step, init_state, make_optimizer
from tests._tolerance import assert_close


class BagMeanTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_matches_numpy_with_padding(self):
    rng = np.random.default_rng(0)
    table = rng.normal(size=(7, 3))
    ids = np.array([[1, 2, -1], [-1, -1, -1], [4, 4, 6]])
    want = np.stack([table[[1, 2]].mean(0), np.zeros(3), table[[4, 4, 6]].mean(0)])
    assert_close(bag_mean(jnp.asarray(table), jnp.asarray(ids)), want)

  @pytest.mark.heavy
  def test_score_is_dot_product_of_towers(self):
    model = TwoTower(20, 4, 1, 2, (8, 3), rngs=nnx.Rngs(0))
    left = (jnp.array([[1], [2]]),)
    right = (jnp.array([[3], [4]]), jnp.array([[5, -1], [6, 7]]))
    assert_close(model(left, right), jnp.sum(model.embed_left(left) * model.embed_right(right), -1))


class SamplerTest(absltest.TestCase):
  def test_frequencies_and_inverse_probability_weights(self):
    counts = np.array([0.0, 1.0, 3.0, 12.0])
    sampler = make_sampler(counts, "linear", smoothing=1.0)
    p = (counts + 1) / (counts + 1).sum()
    idx, mu = sample(sampler, jax.random.key(0), 200_000)
    freq = np.bincount(np.asarray(idx), minlength=4) / 200_000
    assert_close(freq, p, "statistical", rtol=0, atol=4e-3)
    assert_close(mu, 1.0 / (4 * p[np.asarray(idx)]))


class TrainStepTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self.corpus = synthetic_link_corpus(300, 3000, num_clusters=10, seed=0)
    self.data = train_data(self.corpus, "sqrt")

  def run_steps(self, estimator, steps: int, optimizer="adam", lr=1e-2):
    model = TwoTower(self.corpus.vocab_size, 8, 3, 3, (16, 8), rngs=nnx.Rngs(params=jax.random.key(0)))
    graphdef, params = nnx.split(model)
    opt = make_optimizer(optimizer, lr)
    state = init_state(graphdef, params, opt, estimator, 8)
    step = gramian_train_step(graphdef, opt, estimator, lam=1.0, batch_size=64, penalty_batch_size=32)
    losses = []
    for t in range(steps):
      state, metrics = step(state, self.data, jax.random.key(t))
      losses.append(float(metrics["observed_loss"]))
    return state, losses

  @pytest.mark.heavy
  def test_sogram_with_alpha_one_is_the_sampling_baseline(self):
    a, _ = self.run_steps(sogram(1.0), 5)
    b, _ = self.run_steps(batch_gramian(sampling="uniform"), 5)
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
      assert_close(x, y, "network")  # five Adam steps apart only by float32 fusion order

  @pytest.mark.heavy
  def test_training_lowers_the_loss_and_keeps_state_shapes(self):
    est = sogram(0.1)
    state, losses = self.run_steps(est, 60)
    self.assertLess(np.mean(losses[-10:]), 0.8 * np.mean(losses[:5]))
    self.assertEqual(state.extra[0].gramian.shape, (8, 8))
    self.assertEqual(int(state.step), 60)
    self.assertTrue(all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(state.params)))

  @pytest.mark.heavy
  def test_seeds_of_one_size_share_the_compiled_step_and_padding_is_never_drawn(self):
    other = synthetic_link_corpus(300, 3000, num_clusters=10, seed=1)
    e, size = len(self.corpus.train.left), self.data.pair_left.shape[0]
    self.assertNotEqual(len(other.train.left), e)  # the seeds keep different numbers of distinct links ...
    self.assertGreater(size, e)  # ... padded to one length
    np.testing.assert_array_equal(np.asarray(self.data.pair_left)[:e], self.corpus.train.left)
    # A drawn padding row would put its NaN target into the loss.
    poisoned = self.data._replace(pair_target=self.data.pair_target.at[e:].set(jnp.nan))
    model = TwoTower(self.corpus.vocab_size, 8, 3, 3, (16, 8), rngs=nnx.Rngs(params=jax.random.key(0)))
    graphdef, params = nnx.split(model)
    opt, est = make_optimizer("sgd", 1e-2), sogram(0.1)
    state = init_state(graphdef, params, opt, est, 8)
    step = gramian_train_step(graphdef, opt, est, lam=1.0, batch_size=256, penalty_batch_size=32)
    for t, data in enumerate([poisoned] * 8 + [train_data(other, "sqrt")]):
      state, metrics = step(state, data, jax.random.key(t))
      self.assertTrue(np.isfinite(float(metrics["loss"])), t)
    self.assertEqual(step._cache_size(), 1)

  @hypothesis.given(st.integers(1, 10**9))
  def test_pair_capacity_pads_by_at_most_a_32nd(self, e):
    size = pair_capacity(e)
    self.assertGreaterEqual(size, e)
    self.assertLessEqual(size - e, max(e // 32, 1))
    self.assertEqual(pair_capacity(size), size)

  def test_bad_optimizer(self):
    with self.assertRaisesRegex(ValueError, "optimizer must be one of"):
      make_optimizer("lbfgs", 0.1)


class OracleAndSoftmaxTest(absltest.TestCase):
  """The exact-Gramian oracle and the in-batch sampled-softmax baseline of experiments.gramian_training."""

  def setUp(self):
    super().setUp()
    self.corpus = synthetic_link_corpus(60, 400, num_clusters=4, seed=1)
    self.data = train_data(self.corpus, "uniform")
    model = TwoTower(self.corpus.vocab_size, 6, 3, 3, (8, 5), rngs=nnx.Rngs(params=jax.random.key(2)))
    self.graphdef, self.params = nnx.split(model)

  def embeddings(self, params):
    model = nnx.merge(self.graphdef, params)
    return model.embed_left(self.data.left_groups), model.embed_right(self.data.right_groups)

  def first_step_is_exact_then_trains(self, step, state):
    """The first step's penalty metric is the exact penalty at the starting parameters (float64 NumPy); 30 steps
    lower the loss without a non-finite value. Returns the final state."""
    u, v = (np.asarray(x, np.float64) for x in self.embeddings(state.params))
    exact = np.mean((u @ v.T) ** 2)
    state, metrics = step(state, self.data, jax.random.key(0))
    assert_close(np.float32(metrics["penalty_estimate"]), np.float32(exact), "reduction")
    losses = [float(metrics["loss"])]
    for t in range(1, 30):
      state, metrics = step(state, self.data, jax.random.key(t))
      losses.append(float(metrics["loss"]))
    self.assertTrue(np.all(np.isfinite(losses)))
    self.assertLess(np.mean(losses[-5:]), np.mean(losses[:5]))
    return state

  @pytest.mark.heavy
  def test_oracle_gradient_equals_the_double_sum_gradient(self):
    params = jax.tree.map(lambda p: p.astype(jnp.float64), self.params)  # float64 throughout
    g_u, g_v = exact_gramians(self.graphdef, params, self.data, chunk_size=7)
    u, v = self.embeddings(params)
    u64, v64 = np.asarray(u), np.asarray(v)
    assert_close(g_u, u64.T @ u64 / len(u64))
    assert_close(g_v, v64.T @ v64 / len(v64))

    def double_sum(p):  # (1/(n m)) Σ_ij <u_i, v_j>², written out
      a, b = self.embeddings(p)
      return jnp.mean((a @ b.T) ** 2)

    def oracle(p):  # the surrogate on every entity (weights 1) with the oracle's constant Gramians
      a, b = self.embeddings(p)
      return penalty_surrogate(a, b, g_u, g_v)

    want, got = jax.grad(double_sum)(params), jax.grad(oracle)(params)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
      assert_close(x, y, "reduction", scale=float(np.max(np.abs(y))) or 1.0)

  @pytest.mark.heavy
  def test_oracle_step_reports_the_exact_penalty_and_trains(self):
    opt = make_optimizer("adam", 1e-2)
    state = init_state(self.graphdef, self.params, opt, None, 5)
    step = gramian_train_step(
      self.graphdef, opt, None, lam=1.0, batch_size=32, penalty_batch_size=16, exact_chunk_size=16
    )
    state = self.first_step_is_exact_then_trains(step, state)
    self.assertEqual(state.extra[0], ())

  @pytest.mark.heavy
  def test_sagram_step_starts_from_exact_caches_and_trains(self):
    from bcjax.gramian import sagram
    from experiments.gramian_training.configs import PRESETS
    from experiments.gramian_training.run import method_step

    n = self.corpus.left.num_entities
    opt = make_optimizer("adam", 1e-2)
    estimator = (sagram(n), sagram(n))
    caches = self.embeddings(self.params)  # every entity under the initial parameters (Alg. 1 line 4)
    state = init_state(self.graphdef, self.params, opt, estimator, 5, caches)
    self.assertEqual(state.extra[0].cache.shape, (n, 5))
    step = gramian_train_step(self.graphdef, opt, estimator, lam=1.0, batch_size=32, penalty_batch_size=16)
    u = np.asarray(caches[0], np.float64)  # a copy: the step donates the state holding the caches
    # Before the first update the cache is every current embedding, so the SAGA estimate is the exact Gramian.
    state = self.first_step_is_exact_then_trains(step, state)
    # The caches hold the embeddings of the rows last drawn, not the initial ones.
    self.assertGreater(float(np.max(np.abs(np.asarray(state.extra[0].cache) - u))), 0.0)
    with self.assertRaisesRegex(ValueError, "sagram-sqrt: SAGram samples its cache rows uniformly"):
      method_step("sagram-sqrt", self.graphdef, opt, PRESETS["test"], None, (n, n))

  @pytest.mark.heavy
  def test_estimation_error_against_float64_references(self):
    from bcjax.gramian import sagram
    from experiments.two_tower.train import make_estimation_error

    opt, n, batch = make_optimizer("adam", 1e-2), self.corpus.left.num_entities, 16
    u, v = (np.asarray(x, np.float64) for x in self.embeddings(self.params))
    exact = (u.T @ u / len(u), v.T @ v / len(v))
    # Sampling: the weighted batch Gramian (1/|B|) Σ mu_i x_i x_i^T of the rows the function draws (sqrt sampling,
    # so the weights mu = 1/(n p) are not all 1).
    est, sqrt = batch_gramian(sampling="uniform"), train_data(self.corpus, "sqrt")
    state = init_state(self.graphdef, self.params, opt, est, 5)
    rng = jax.random.key(7)
    got = make_estimation_error(self.graphdef, est, penalty_batch_size=batch, exact_chunk_size=16)(state, sqrt, rng)
    self.assertGreater(float(np.std(np.asarray(sqrt.left_sampler.mu))), 0.01)
    for side, (sampler, x, g) in enumerate(((sqrt.left_sampler, u, exact[0]), (sqrt.right_sampler, v, exact[1]))):
      idx, mu = (np.asarray(a, np.float64) for a in sample(sampler, jax.random.fold_in(rng, side), batch))
      rows = x[idx.astype(int)]
      g_hat = (rows * mu[:, None]).T @ rows / batch
      assert_close(got[side], np.float32(np.linalg.norm(g_hat - g) / np.linalg.norm(g)), "reduction")
    # SAGram from exact caches: no error; SOGram with alpha = 1 keeps only the batch: sampling's error.
    caches = self.embeddings(self.params)
    pair = (sagram(n), sagram(n))
    state = init_state(self.graphdef, self.params, opt, pair, 5, caches)
    got = make_estimation_error(self.graphdef, pair, penalty_batch_size=batch)(state, self.data, rng)
    assert_close(got, np.zeros(2, np.float32), "reduction", scale=1.0)
    state = init_state(self.graphdef, self.params, opt, sogram(1.0), 5)
    zero_history = make_estimation_error(self.graphdef, sogram(1.0), penalty_batch_size=batch)(state, self.data, rng)
    sampling_error = make_estimation_error(self.graphdef, est, penalty_batch_size=batch)(
      init_state(self.graphdef, self.params, opt, est, 5), self.data, rng
    )
    assert_close(zero_history, sampling_error, "reduction")
    self.assertTrue(np.all(np.asarray(sampling_error) > 0.01))  # 16 rows of 60 are not the whole corpus

  def test_log_q_is_the_pair_frequency(self):
    right = self.corpus.train.right
    probe = right[:10]
    want = np.log(np.bincount(right, minlength=self.corpus.right.num_entities)[probe] / len(right))
    assert_close(np.asarray(self.data.right_log_q)[probe], np.float32(want), "elementwise")
    unseen = np.setdiff1d(np.arange(self.corpus.right.num_entities), right)
    self.assertTrue(np.all(np.isfinite(np.asarray(self.data.right_log_q))))  # no -inf for entities never drawn
    if len(unseen):
      assert_close(np.asarray(self.data.right_log_q)[unseen], np.float32(np.log(1.0 / len(right))), "elementwise")

  @pytest.mark.heavy
  def test_softmax_step_loss_equals_numpy_and_the_correction_sign_matters(self):
    opt = make_optimizer("sgd", 0.0)
    key, tau, batch = jax.random.key(5), 0.5, 24
    # The step's own draw, from the corpus's unpadded pairs: the padding rows must never be drawn.
    pairs = np.asarray(jax.random.randint(key, (batch,), 0, len(self.corpus.train.left)))
    model = nnx.merge(self.graphdef, self.params)
    left = self.corpus.train.left[pairs]
    u = np.asarray(model.embed_left(tuple(g[left] for g in self.data.left_groups)), np.float64)
    right = self.corpus.train.right[pairs]
    v = np.asarray(model.embed_right(tuple(g[right] for g in self.data.right_groups)), np.float64)
    log_q = np.log(
      np.bincount(self.corpus.train.right, minlength=self.corpus.right.num_entities)[right]
      / len(self.corpus.train.right)
    )

    def reference(sign):
      logits = u @ v.T / tau - sign * log_q[None, :]
      lse = np.log(np.sum(np.exp(logits - logits.max(1, keepdims=True)), 1)) + logits.max(1)
      return float(np.mean(lse - np.diag(logits)))

    for correct, want in ((True, reference(1.0)), (False, reference(0.0))):
      state = init_state(self.graphdef, jax.tree.map(jnp.array, self.params), opt, None, 5)  # the step donates it
      step = softmax_train_step(self.graphdef, opt, batch_size=batch, temperature=tau, correct=correct)
      _, metrics = step(state, self.data, key)
      assert_close(np.float32(metrics["loss"]), np.float32(want), "reduction", err_msg=f"correct={correct}")
    self.assertGreater(abs(reference(-1.0) - reference(1.0)), 1e-3)  # a flipped correction would be caught
    with self.assertRaisesRegex(ValueError, "temperature"):
      softmax_train_step(self.graphdef, opt, batch_size=batch, temperature=0.0)


if __name__ == "__main__":
  absltest.main()


class RowSparseTest(absltest.TestCase):
  """Optimisers that update only the input-table rows a step uses (experiments.two_tower.sparse): Adagrad and SGD
  against optax's dense updates in float64, lazy Adam against a NumPy reference."""

  def setUp(self):
    super().setUp()
    # Few pages over a larger vocabulary: most table rows are untouched by any one step.
    self.corpus = synthetic_link_corpus(200, 1500, num_clusters=8, seed=3)
    self.data = train_data(self.corpus, "linear")
    model = TwoTower(self.corpus.vocab_size, 6, 3, 3, (12, 5), rngs=nnx.Rngs(params=jax.random.key(4)))
    self.graphdef, params = nnx.split(model)
    self.params = jax.tree.map(lambda x: x.astype(jnp.float64), params)

  def train(self, optimizer, make_step, steps=4):
    state = init_state(self.graphdef, jax.tree.map(jnp.copy, self.params), optimizer, make_step.estimator, 5)
    step = make_step(optimizer)
    for t in range(steps):
      state, _ = step(state, self.data, jax.random.key(10 + t))
    return state

  def steps(self):
    def gramian(estimator):
      def make(opt):
        return gramian_train_step(self.graphdef, opt, estimator, lam=2.0, batch_size=48, penalty_batch_size=24)

      make.estimator = estimator
      return make

    def softmax(opt):
      return softmax_train_step(self.graphdef, opt, batch_size=48, temperature=0.5)

    softmax.estimator = batch_gramian(sampling="uniform")
    # candidate sampling runs the SOGram step's code with another estimator: SOGram stands for both
    return {"sogram": gramian(sogram(0.2)), "oracle": gramian(None), "softmax": softmax}

  @pytest.mark.heavy
  def test_adagrad_and_sgd_equal_optax_dense_updates_for_every_step_kind(self):
    """Every step kind: the Gramian step (SOGram), the exact oracle's and the sampled softmax's."""
    table = lambda p: np.asarray(p["inputs"][...])
    cases = [(name, "adagrad", optax.adagrad(0.3)) for name in self.steps()] + [("sogram", "sgd", optax.sgd(0.3))]
    for name, kind, dense_optimizer in cases:
      with self.subTest(f"{kind} {name}"):
        make_step = self.steps()[name]
        sparse = self.train(make_optimizer(kind, 0.3), make_step)
        dense = self.train(dense_optimizer, make_step)
        for x, y in zip(jax.tree.leaves(sparse.params), jax.tree.leaves(dense.params)):
          assert_close(x, y, "elementwise")
        moved = np.any(table(sparse.params) != table(self.params), axis=1)
        self.assertGreater(moved.sum(), 0)
        self.assertLess(moved.sum(), len(moved))  # rows no step used are untouched, as the dense update leaves them
        if kind == "adagrad":
          assert_close(
            sparse.opt_state.table[0].sum_of_squares["inputs"][...],
            dense.opt_state[0].sum_of_squares["inputs"][...],
            "elementwise",
          )
          assert_close(
            sparse.opt_state.towers[0].sum_of_squares["left"]["layers"][0]["kernel"][...],
            dense.opt_state[0].sum_of_squares["left"]["layers"][0]["kernel"][...],
            "elementwise",
          )

  @pytest.mark.heavy
  def test_step_rows_reindexes_the_bags_into_the_distinct_rows(self):
    groups = (jnp.array([[3, -1], [7, 3]]), jnp.array([[0, 7, -1]]))
    rows, local = step_rows(groups, 10)
    np.testing.assert_array_equal(rows, [0, 3, 7, 10, 10, 10, 10])
    table = jnp.arange(10.0)[:, None] * jnp.array([[1.0, -2.0]])
    small = table.at[rows].get(mode="fill", fill_value=0.0)
    for g, l in zip(groups, local):
      np.testing.assert_array_equal(l < 0, g < 0)
      np.testing.assert_array_equal(bag_mean(small, l), bag_mean(table, g))

  @pytest.mark.heavy
  def test_adagrad_rows_match_the_closed_form_and_padding_rows_are_not_written(self):
    table, transform = {"t": jnp.ones((4, 2))}, optax.adagrad(0.5)
    state = transform.init(table)
    grads = {"t": jnp.array([[1.0, -2.0], [5.0, 5.0]])}
    new, state = update_rows(transform, table, state, jnp.array([2, 4]), grads)
    a = 0.1 + np.array([1.0, 4.0])
    assert_close(state[0].sum_of_squares["t"][2], a, "elementwise")
    assert_close(new["t"][2], 1.0 - 0.5 * np.array([1.0, -2.0]) / np.sqrt(a + 1e-7), "elementwise")
    np.testing.assert_array_equal(np.asarray(new["t"])[[0, 1, 3]], 1.0)  # row 4 is padding: nothing written
    np.testing.assert_array_equal(np.asarray(state[0].sum_of_squares["t"])[[0, 1, 3]], 0.1)

  @pytest.mark.heavy
  def test_lazy_adam_against_numpy_and_equal_to_adam_where_every_row_is_used(self):
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    rng = np.random.default_rng(0)
    theta0 = rng.normal(size=(5, 3))
    schedule = [np.array([0, 2, 4]), np.array([1, 2]), np.array([0, 1, 2, 3, 4]), np.array([2])]
    grads = [rng.normal(size=(len(r), 3)) for r in schedule]
    transform = optax.adam(lr)
    table = {"t": jnp.asarray(theta0)}
    state = transform.init(table)
    theta, m, v = theta0.copy(), np.zeros_like(theta0), np.zeros_like(theta0)
    for t, (rows, g) in enumerate(zip(schedule, grads), start=1):
      table, state = update_rows(transform, table, state, jnp.asarray(rows), {"t": jnp.asarray(g)})
      # lazy Adam: only the used rows' moments and parameters change; the bias correction counts every step
      m[rows] = b1 * m[rows] + (1 - b1) * g
      v[rows] = b2 * v[rows] + (1 - b2) * g**2
      theta[rows] -= lr * (m[rows] / (1 - b1**t)) / (np.sqrt(v[rows] / (1 - b2**t)) + eps)
      assert_close(table["t"], theta, "elementwise")
      assert_close(state[0].mu["t"], m, "elementwise")
    # Where a step uses every row, lazy Adam is Adam: the third step from equal states.
    start = {"t": jnp.asarray(theta0)}
    full_grad = {"t": jnp.asarray(grads[0][[0, 0, 0, 0, 0]])}
    lazy, _ = update_rows(transform, start, transform.init(start), jnp.arange(5), full_grad)
    updates, _ = transform.update(full_grad, transform.init(start), start)
    assert_close(lazy["t"], optax.apply_updates(start, updates)["t"], "elementwise")
    # ... and where a row is skipped it is not: dense Adam keeps moving row 3 on its momentum, lazy Adam does not.
    _, state = update_rows(transform, start, transform.init(start), jnp.arange(5), full_grad)
    moved, _ = update_rows(transform, start, state, jnp.array([0]), {"t": jnp.ones((1, 3))})
    np.testing.assert_array_equal(np.asarray(moved["t"][3]), theta0[3])
    dense_state = transform.update(full_grad, transform.init(start), start)[1]
    updates, _ = transform.update({"t": jnp.zeros((5, 3)).at[0].set(1.0)}, dense_state, start)
    self.assertTrue(np.all(np.asarray(updates["t"][3]) != 0.0))
