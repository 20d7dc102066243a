"""The two-tower model and its Gramian-penalty train step: bag means against NumPy, the entity sampler's
distribution and weights, SOGram with alpha = 1 reproducing the sampling baseline exactly, and training progress."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from flax import nnx

from bcjax.data import synthetic_link_corpus
from bcjax.gramian import batch_gramian, sogram
from bcjax.models import TwoTower, bag_mean
from experiments.two_tower.data import make_sampler, sample, train_data
from experiments.two_tower.train import init_state, make_optimizer, make_train_step
from tests._tolerance import assert_close


class BagMeanTest(absltest.TestCase):

  def test_matches_numpy_with_padding(self):
    rng = np.random.default_rng(0)
    table = rng.normal(size=(7, 3))
    ids = np.array([[1, 2, -1], [-1, -1, -1], [4, 4, 6]])
    want = np.stack([table[[1, 2]].mean(0), np.zeros(3), table[[4, 4, 6]].mean(0)])
    assert_close(bag_mean(jnp.asarray(table), jnp.asarray(ids)), want)

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
    step = make_train_step(graphdef, opt, estimator, lam=1.0, batch_size=64, penalty_batch_size=32)
    losses = []
    for t in range(steps):
      state, metrics = step(state, self.data, jax.random.key(t))
      losses.append(float(metrics["observed_loss"]))
    return state, losses

  def test_sogram_with_alpha_one_is_the_sampling_baseline(self):
    a, _ = self.run_steps(sogram(1.0), 5)
    b, _ = self.run_steps(batch_gramian(sampling="uniform"), 5)
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
      assert_close(x, y, "network")  # five Adam steps apart only by float32 fusion order

  def test_training_lowers_the_loss_and_keeps_state_shapes(self):
    est = sogram(0.1)
    state, losses = self.run_steps(est, 60)
    self.assertLess(np.mean(losses[-10:]), 0.8 * np.mean(losses[:5]))
    self.assertEqual(state.left_estimator.gramian.shape, (8, 8))
    self.assertEqual(int(state.step), 60)
    self.assertTrue(all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(state.params)))

  def test_bad_optimizer(self):
    with self.assertRaisesRegex(ValueError, "optimizer must be one of"):
      make_optimizer("lbfgs", 0.1)


if __name__ == "__main__":
  absltest.main()
