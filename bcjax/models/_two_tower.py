r"""Two-tower embedding model of the Gramian paper (Figure 1), in flax NNX.

Each entity is a bag-of-features input: per feature group, the mean of the group's input embeddings (padding
ignored; an empty bag gives 0); the groups are concatenated and mapped by an MLP with ReLU between layers to the
output embedding. The input embedding table is shared by both towers; the score is the dot product
:math:`s(x, y) = \langle u(x), v(y) \rangle`.

Reference: W. Krichene et al., "Efficient Training on Very Large Corpora via Gramian Estimation", ICLR 2019, section 4
and App. F.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx


def bag_mean(table: jax.Array, ids: jax.Array) -> jax.Array:
  """Mean embedding of each row's ids [n, m] (negative ids are padding) from ``table`` [V, d]; returns [n, d].

  Args:
    table: the embedding table, [V, d].
    ids: each row's ids, [n, m]; negative ids are padding.

  Returns:
    The mean embeddings, [n, d] (zero for a row of padding only).
  """
  valid = (ids >= 0).astype(table.dtype)
  vectors = table[jnp.maximum(ids, 0)] * valid[..., None]
  return jnp.sum(vectors, axis=1) / jnp.maximum(jnp.sum(valid, axis=1, keepdims=True), 1.0)


class Tower(nnx.Module):
  """MLP from the concatenated group embeddings to the output embedding (ReLU between layers, linear output)."""

  def __init__(self, in_dim: int, sizes: Sequence[int], *, rngs: nnx.Rngs):
    dims = [in_dim, *sizes]
    self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(dims, dims[1:])])

  def __call__(self, x: jax.Array) -> jax.Array:
    for layer in self.layers[:-1]:
      x = jax.nn.relu(layer(x))
    return self.layers[-1](x)


class TwoTower(nnx.Module):
  """Left tower u(x), right tower v(y) over a shared input embedding table.

  Args:
    vocab_size: size of the shared input vocabulary.
    input_dim: dimension of each input embedding.
    left_groups, right_groups: number of feature groups of a left / right entity.
    sizes: tower layer sizes; the last one is the output embedding dimension k.
    rngs: flax NNX random streams (``params``).
  """

  def __init__(
    self, vocab_size: int, input_dim: int, left_groups: int, right_groups: int, sizes: Sequence[int], *, rngs: nnx.Rngs
  ):
    if not sizes:
      raise ValueError("TwoTower: `sizes` needs at least the output dimension k")
    init = nnx.initializers.normal(stddev=input_dim**-0.5)
    self.inputs = nnx.Param(init(rngs.params(), (vocab_size, input_dim), jnp.float32))  # float32 under x64 too
    self.left = Tower(left_groups * input_dim, sizes, rngs=rngs)
    self.right = Tower(right_groups * input_dim, sizes, rngs=rngs)

  def _features(self, groups: Sequence[jax.Array]) -> jax.Array:
    table = self.inputs[...]
    return jnp.concatenate([bag_mean(table, ids) for ids in groups], axis=-1)

  def embed_left(self, groups: Sequence[jax.Array]) -> jax.Array:
    """u(x) [n, k] from the left entities' feature groups (each [n, m_g])."""
    return self.left(self._features(groups))

  def embed_right(self, groups: Sequence[jax.Array]) -> jax.Array:
    """v(y) [n, k] from the right entities' feature groups."""
    return self.right(self._features(groups))

  def __call__(self, left_groups, right_groups) -> jax.Array:
    """Scores s = <u(x_i), v(y_i)> of aligned left/right rows, [n]."""
    return jnp.sum(self.embed_left(left_groups) * self.embed_right(right_groups), axis=-1)
