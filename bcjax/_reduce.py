"""Masked means over rows that may be sharded across devices, and the masking of padded rows."""

import jax
import jax.numpy as jnp


def zero_padded(x: jax.Array, where: jax.Array | None) -> jax.Array:
  """``x`` with the rows where ``where`` [n] is False replaced by zeros.

  Padded rows may hold anything (1e30, inf, NaN). Multiplying by a 0/1 mask would turn inf into NaN (inf·0) eagerly
  while XLA may fold the product away under ``jit``; selecting with ``jnp.where`` gives the same numbers both ways,
  and because the select's derivative is a select too, no NaN reaches the gradient of the real rows.
  """
  if where is None:
    return x
  return jnp.where(jnp.reshape(where, where.shape + (1,) * (x.ndim - where.ndim)), x, jnp.zeros((), x.dtype))


def psum_each(values: tuple, axis_name: str) -> tuple:
  """Each of ``values`` summed over the mapped axis ``axis_name``, by one ``psum`` per value.

  One ``psum`` of a tuple would do the same, but under ``jax.grad`` inside ``shard_map`` jax 0.8.1 (the declared
  floor) cannot transpose it when one member does not depend on the differentiated inputs (a row count): its
  transpose rule asserts that every member does.

  Args:
    values: arrays (or pytrees of arrays).
    axis_name: the mapped axis.

  Returns:
    The sums, in the same order.
  """
  return tuple(jax.lax.psum(v, axis_name) for v in values)


def row_mean(values: jax.Array, where: jax.Array | None = None, axis_name: str | None = None) -> jax.Array:
  r"""Mean of per-row ``values`` over valid rows, across devices when ``axis_name`` is given.

  .. math::
    \bar v = \frac{\sum_{i:\, m_i} v_i}{\max(1, \sum_i m_i)}

  Args:
    values: per-row values, [n].
    where: optional boolean mask of valid rows, [n]; padded rows are ``False`` and their values, whatever they are
      (inf or NaN included), are selected away rather than multiplied by 0.
    axis_name: optional name of a mapped axis (``shard_map``) over which the batch is split; the numerator and the
      count are summed over it so every device sees the global mean.

  Returns:
    A scalar. With no valid row the mean is 0, and its gradient is 0 rather than NaN.
  """
  if where is None:
    total, count = jnp.sum(values), jnp.asarray(values.shape[0], values.dtype)
  else:
    total, count = jnp.sum(zero_padded(values, where)), jnp.sum(where, dtype=values.dtype)
  if axis_name is not None:
    total, count = psum_each((total, count), axis_name)
  # max(count, 1): an all-padded batch contributes 0 instead of 0/0.
  return total / jnp.maximum(count, 1)
