r"""The exact Gramian of a whole corpus, computed in chunks: the oracle every Gramian estimator approximates.

.. math::
  G = \frac1n \sum_{i=0}^{n-1} x_i \otimes x_i, \qquad x_i = f_\theta(i),

with the n embeddings produced ``chunk_size`` at a time inside ``jax.lax.scan``, so memory stays
:math:`O(\text{chunk} \cdot k + k^2)` however large n is, and the cost is one forward pass over the corpus
(:math:`O(n k^2)` for the sums). Krichene et al. (ICLR 2019, eq. 3) define the penalty through it; SAGram, SOGram and
sampling estimate it from batches.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from bcjax import _checks
from bcjax.gramian._penalty import gramian


def full_gramian(
  embed: Callable[[jax.Array], jax.Array], num_entities: int, *, chunk_size: int = 4096, axis_name: str | None = None
) -> jax.Array:
  r"""Exact :math:`G = \frac1n \sum_{i<n} x_i \otimes x_i` of all n entities, ``chunk_size`` rows at a time.

  Args:
    embed: maps entity indices [c] (int32) to their embeddings [c, k]; pure and traceable (it runs inside
      ``lax.scan``). The last chunk is padded with index ``n - 1`` and its padded rows are masked out.
    num_entities: n >= 1.
    chunk_size: rows per chunk (>= 1); memory is O(chunk_size · k).
    axis_name: a mapped axis whose devices split the chunks between them (chunk j goes to device j mod D); the
      partial sums are psum'd, so every device returns the full G. Without it one device computes all chunks.

  Returns:
    G, [k, k] (symmetric PSD), in the embeddings' dtype.

  Raises:
    ValueError: naming the argument, for ``num_entities`` or ``chunk_size`` below 1, or an ``embed`` that does not
      return [chunk_size, k].
  """
  fn = "full_gramian"
  n = _checks.as_int(fn, "num_entities", num_entities, low=1)
  chunk_size = _checks.as_int(fn, "chunk_size", chunk_size, low=1)
  chunk_size = min(chunk_size, n)
  num_chunks = -(-n // chunk_size)
  device: Any
  devices: Any
  if axis_name is None:
    device, devices = 0, 1
  else:
    device, devices = jax.lax.axis_index(axis_name), jax.lax.axis_size(axis_name)
  per_device = -(-num_chunks // devices)
  offsets = jnp.arange(chunk_size, dtype=jnp.int32)

  def chunk_sum(j):
    rows = (j * devices + device) * chunk_size + offsets
    valid = rows < n
    x = embed(jnp.minimum(rows, n - 1))
    # gramian() divides by the valid count; multiplying back gives the chunk's sum (0 for a chunk past the end).
    return gramian(x, where=valid) * jnp.sum(valid, dtype=x.dtype)

  first = jax.eval_shape(lambda: embed(offsets))
  if first.ndim != 2 or first.shape[0] != chunk_size:
    raise ValueError(
      f"{fn}: `embed` must map {chunk_size} indices to [{chunk_size}, k] embeddings, got shape {tuple(first.shape)}"
    )

  def body(total, j):
    return total + chunk_sum(j), None

  total, _ = jax.lax.scan(body, jnp.zeros((first.shape[1],) * 2, first.dtype), jnp.arange(per_device))
  if axis_name is not None:
    total = jax.lax.psum(total, axis_name)
  return total / n
