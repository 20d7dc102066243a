"""GraphSAGE on jraph.GraphsTuple against a dense float64 NumPy reference (multi-edges, isolated nodes, BatchNorm
over all nodes, padding masks), jit vs no-jit."""

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest
from absl.testing import absltest
from flax import nnx

from bcjax.models import GraphSAGE, mean_aggregate
from tests._tolerance import assert_close


def graph(senders, receivers, n):
  senders, receivers = np.asarray(senders, np.int32), np.asarray(receivers, np.int32)
  return jraph.GraphsTuple(
    nodes=np.zeros((n, 1)),
    edges=None,
    senders=senders,
    receivers=receivers,
    n_node=np.array([n]),
    n_edge=np.array([len(senders)]),
    globals=None,
  )


def np_sage(model: GraphSAGE, senders, receivers, h, mask=None):
  """Dense reference: A[i, j] = number of edges j -> i; mean = A h / max(deg, 1); BN with the biased batch variance."""
  n = h.shape[0]
  a = np.zeros((n, n))
  np.add.at(a, (receivers, senders), 1.0)
  mask = np.ones(n, bool) if mask is None else mask
  for i, (conv, norm) in enumerate(zip(model.convs, model.norms)):
    mean = a @ h / np.maximum(a.sum(1, keepdims=True), 1.0)
    x = (
      mean @ np.asarray(conv.lin_l.kernel[...], np.float64)
      + np.asarray(conv.lin_l.bias[...], np.float64)
      + h @ np.asarray(conv.lin_r.kernel[...], np.float64)
    )
    mu, var = x[mask].mean(0), x[mask].var(0)
    x = (x - mu) / np.sqrt(var + 1e-5) * np.asarray(norm.scale[...]) + np.asarray(norm.bias[...])
    h = np.maximum(x, 0.0) if i < len(model.convs) - 1 else x
  return h


class SageTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    # user 0 -> item 3 twice (a multi-edge), node 5 isolated; both directions as in the reference.
    s, r = [0, 0, 1, 2, 1], [3, 3, 3, 4, 4]
    self.senders, self.receivers = np.array(s + r), np.array(r + s)
    self.n = 6
    self.h = np.random.default_rng(0).normal(size=(self.n, 4))

  def test_mean_aggregate_counts_multi_edges_and_zeroes_isolated_nodes(self):
    g = graph(self.senders, self.receivers, self.n)
    agg = np.asarray(mean_aggregate(g, jnp.asarray(self.h)))
    assert_close(agg[3], (2 * self.h[0] + self.h[1]) / 3)
    assert_close(agg[5], 0.0, scale=np.abs(self.h).max())

  @pytest.mark.heavy
  def test_matches_dense_reference_in_train_mode(self):
    model = GraphSAGE(4, 3, rngs=nnx.Rngs(0))
    model = jax.tree.map(lambda x: x.astype(jnp.float64) if hasattr(x, "dtype") else x, model)
    g = graph(self.senders, self.receivers, self.n)
    want = np_sage(model, self.senders, self.receivers, self.h)
    assert_close(model(g, jnp.asarray(self.h)), want, "network")

  @pytest.mark.heavy
  def test_padding_nodes_do_not_change_real_outputs(self):
    model = GraphSAGE(4, 2, rngs=nnx.Rngs(1))
    g = graph(self.senders, self.receivers, self.n)
    plain = np.asarray(model(g, jnp.asarray(self.h, jnp.float32)))
    padded_h = np.concatenate([self.h, np.full((2, 4), 7.0)]).astype(np.float32)
    mask = np.array([True] * self.n + [False, False])
    # the padding edge points from and to a padding node (jraph's convention)
    gp = graph(np.append(self.senders, 7), np.append(self.receivers, 7), self.n + 2)
    padded = np.asarray(model(gp, jnp.asarray(padded_h), jnp.asarray(mask)))
    assert_close(padded[: self.n], plain, "network")

  @pytest.mark.heavy
  def test_jit_matches_eager(self):
    model = GraphSAGE(4, 2, rngs=nnx.Rngs(2))
    g = graph(self.senders, self.receivers, self.n)
    h = jnp.asarray(self.h, jnp.float32)
    graphdef, state = nnx.split(model)

    @jax.jit
    def forward(state, h):
      return nnx.merge(graphdef, state)(g, h)

    assert_close(forward(state, h), model(g, h), "network")

  @pytest.mark.heavy
  def test_the_bias_under_batch_norm_gets_its_exact_zero_gradient(self):
    """Train mode: BatchNorm removes b_l (shifting it leaves the output unchanged), so its gradient is exactly 0,
    and the other parameters still get theirs. Eval mode (running statistics): b_l shifts the output, and its
    gradient is the closed form."""
    g = graph(self.senders, self.receivers, self.n)
    h = jnp.asarray(self.h)
    model = GraphSAGE(4, 2, rngs=nnx.Rngs(3))
    model = jax.tree.map(lambda x: x.astype(jnp.float64) if hasattr(x, "dtype") else x, model)
    weights = jnp.asarray(np.random.default_rng(1).normal(size=(self.n, 4)))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss(p):
      return jnp.sum(weights * nnx.merge(graphdef, p, rest, copy=True)(g, h))

    grads = nnx.to_pure_dict(jax.grad(loss)(params))
    for conv in grads["convs"].values():
      self.assertFalse(np.any(np.asarray(conv["lin_l"]["bias"])))
      self.assertTrue(np.all(np.abs(np.asarray(conv["lin_l"]["kernel"])) > 0))
    bias = model.convs[0].lin_l.bias
    before = np.asarray(model(g, h))  # train mode: adding to b_l leaves the output as it was, up to rounding
    bias[...] = bias[...] + 0.5
    assert_close(model(g, h), before, "network")

    model.eval()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    grads = nnx.to_pure_dict(jax.grad(loss)(params))
    # eval mode, last layer: out = (x - running mean) / sqrt(running var + eps) * scale + beta, x linear in b_l
    stats = model.norms[1]
    want = np.sum(np.asarray(weights), 0) * np.asarray(stats.scale[...]) / np.sqrt(np.asarray(stats.var[...]) + 1e-5)
    assert_close(np.asarray(grads["convs"][1]["lin_l"]["bias"]), want, "reduction")

  def test_bad_depth(self):
    with self.assertRaisesRegex(ValueError, "`layers` must be >= 1"):
      GraphSAGE(4, 0, rngs=nnx.Rngs(0))


if __name__ == "__main__":
  absltest.main()
