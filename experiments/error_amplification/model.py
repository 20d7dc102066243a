"""The version-k embedding model M_k of the demo (flax NNX): an MLP encoder with tanh output and a linear head."""

import jax
import jax.numpy as jnp
from flax import nnx

from bcjax.alignment import BackwardLinear


class Encoder(nnx.Module):
  """z_k = tanh(MLP(x)) of width D_k; the intended task reads y_hat = z_k H."""

  def __init__(self, in_dim: int, dim: int, out_dim: int, layers: int, *, rngs: nnx.Rngs):
    sizes = [in_dim] + [dim] * layers
    self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes, sizes[1:])])
    self.head = nnx.Linear(dim, out_dim, use_bias=False, rngs=rngs)

  def embed(self, x: jax.Array) -> jax.Array:
    for layer in self.layers[:-1]:
      x = jax.nn.relu(layer(x))
    return jnp.tanh(self.layers[-1](x))

  def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    z = self.embed(x)
    return z, self.head(z)


class VersionModel(nnx.Module):
  """M_k together with its backward transformation B_k (absent for version 0 and for NoTrans/Non-BC)."""

  def __init__(self, encoder: Encoder, backward: BackwardLinear | None):
    self.encoder = encoder
    self.backward = backward
