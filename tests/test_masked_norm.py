"""MaskedBatchNorm: flax's BatchNorm unchanged without an axis; with one, the statistics of the real rows of all
devices (unequal counts per device, padded rows holding huge values or NaN) against float64 NumPy, through
``jax.vmap`` with a named axis (the collectives a mesh axis runs); and a GCN encoder split by graphs over that axis
embedding as on one device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest
from flax import nnx

from bcjax.data import batch_graphs, from_graphs
from bcjax.models import GCNEncoder, MaskedBatchNorm
from tests._tolerance import assert_close


class MaskedBatchNormTest(absltest.TestCase):
  def test_without_an_axis_it_is_flax_batchnorm(self):
    x = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    mask = (np.arange(10) < 7)[:, None]
    ours = MaskedBatchNorm(4, momentum=0.9, rngs=nnx.Rngs(0))
    flax = nnx.BatchNorm(4, momentum=0.9, rngs=nnx.Rngs(0))
    for module in (ours, flax):
      module.train()
    np.testing.assert_array_equal(np.asarray(ours(x, mask=mask)), np.asarray(flax(x, mask=mask)))
    np.testing.assert_array_equal(np.asarray(ours.mean[...]), np.asarray(flax.mean[...]))

  @pytest.mark.heavy
  def test_split_rows_get_the_global_statistics(self):
    rng = np.random.default_rng(1)
    devices, rows, features = 3, 6, 4
    x = rng.normal(size=(devices, rows, features)) * 3.0 + 1.0
    counts = [6, 2, 4]  # unequal real rows per device: a mean of the devices' means would be wrong
    mask = np.arange(rows)[None, :] < np.asarray(counts)[:, None]
    x[~mask] = np.where(rng.uniform(size=(~mask).sum()) < 0.5, 1e30, np.nan)[:, None]
    module = MaskedBatchNorm(features, axis_name="d", momentum=0.9, epsilon=1e-5, rngs=nnx.Rngs(0))
    module.train()
    graphdef, state = nnx.split(module)

    def run(x, mask):
      m = nnx.merge(graphdef, state, copy=True)
      y = m(x, mask=mask[:, None])
      return jnp.where(mask[:, None], y, 0.0), m.mean[...], m.var[...]

    y, mean, var = jax.vmap(run, axis_name="d")(jnp.asarray(x), jnp.asarray(mask))
    real = x[mask]  # float64 NumPy on the gathered real rows
    mu, sigma2 = real.mean(axis=0), real.var(axis=0)
    assert_close(np.asarray(y)[mask], (real - mu) / np.sqrt(sigma2 + 1e-5), "reduction", scale=4.0)
    self.assertTrue(np.all(np.isfinite(np.asarray(y))))
    for d in range(devices):  # every device holds the same running statistics
      assert_close(np.asarray(mean[d]), 0.1 * mu, scale=np.max(np.abs(mu)))
      assert_close(np.asarray(var[d]), 0.9 + 0.1 * sigma2, scale=np.max(sigma2))

  @pytest.mark.heavy
  def test_images_split_over_an_axis_get_the_whole_batch_statistics(self):
    # [N, H, W, C] images with a row mask, as the image encoders call it: statistics over every real pixel
    rng = np.random.default_rng(3)
    devices, rows = 2, 4
    x = rng.normal(size=(devices * rows, 3, 3, 5)).astype(np.float32) * 2.0 + 0.5
    mask = np.array([True, True, True, False, True, False, False, False])
    x[~mask] = np.nan  # padded images hold anything
    flax = nnx.BatchNorm(5, momentum=0.9, epsilon=1e-5, rngs=nnx.Rngs(0))
    flax.train()
    want = np.asarray(flax(np.where(mask[:, None, None, None], x, 0.0), mask=mask[:, None, None, None]))
    module = MaskedBatchNorm(5, axis_name="d", momentum=0.9, epsilon=1e-5, rngs=nnx.Rngs(0))
    module.train()
    graphdef, state = nnx.split(module)

    def run(x, mask):
      m = nnx.merge(graphdef, state, copy=True)
      return m(x, mask=mask[:, None, None, None]), m.mean[...], m.var[...]

    y, mean, var = jax.vmap(run, axis_name="d")(
      jnp.asarray(x).reshape(devices, rows, 3, 3, 5), jnp.asarray(mask).reshape(devices, rows)
    )
    got = np.asarray(y).reshape(x.shape)
    assert_close(got[mask], want[mask], "network")
    real = x[mask].reshape(-1, 5).astype(np.float64)  # float64 NumPy over the real pixels
    assert_close(np.asarray(mean[0]), 0.1 * real.mean(axis=0), "reduction", scale=1.0)
    assert_close(np.asarray(var[1]), 0.9 + 0.1 * real.var(axis=0), "reduction", scale=1.0)
    assert_close(np.asarray(flax.mean[...]), np.asarray(mean[0]), "reduction", scale=1.0)


class GCNSplitTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_graphs_split_over_an_axis_embed_as_on_one_device(self):
    rng = np.random.default_rng(2)
    graphs = []
    for n in (5, 9, 3, 7, 4, 6):
      s = rng.integers(0, n, 2 * n)
      r = rng.integers(0, n, 2 * n)
      keep = s != r
      graphs.append((rng.normal(size=(n, 3)).astype(np.float32), s[keep], r[keep]))
    c = from_graphs(graphs, np.zeros(len(graphs), int))
    whole = GCNEncoder(3, 8, 2, 0.0, rngs=nnx.Rngs(0))  # 6 graphs, 34 nodes, on one device
    split = GCNEncoder(3, 8, 2, 0.0, axis_name="d", rngs=nnx.Rngs(0))
    for model in (whole, split):
      model.train()
    whole_def, whole_state = nnx.split(whole)
    expected = np.asarray(
      jax.jit(lambda g: nnx.merge(whole_def, whole_state, copy=True)(g))(
        batch_graphs(c, range(6), node_budget=64, edge_budget=128)
      )
    )[:6]
    parts = [batch_graphs(c, idx, num_graphs=3, node_budget=32, edge_budget=64) for idx in ([0, 1, 2], [3, 4, 5])]
    stacked = jax.tree.map(lambda *a: jnp.stack([jnp.asarray(v) for v in a]), *parts)
    graphdef, state = nnx.split(split)
    out = jax.jit(jax.vmap(lambda g: nnx.merge(graphdef, state, copy=True)(g), axis_name="d"))(stacked)
    got = np.concatenate([np.asarray(out[0])[:3], np.asarray(out[1])[:3]])
    assert_close(got, expected, "network")


if __name__ == "__main__":
  absltest.main()
