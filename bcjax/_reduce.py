"""Masked means over rows that may be sharded across devices."""

import jax
import jax.numpy as jnp


def row_mean(values: jax.Array, where: jax.Array | None = None, axis_name: str | None = None) -> jax.Array:
  r"""Mean of per-row ``values`` over valid rows, across devices when ``axis_name`` is given.

  .. math::
    \bar v = \frac{\sum_i m_i v_i}{\max(1, \sum_i m_i)}

  Args:
    values: per-row values, [n].
    where: optional boolean mask of valid rows, [n]; padded rows are ``False``.
    axis_name: optional name of a mapped axis (``jax.pmap``/``shard_map``) over which the batch is split; the
      numerator and the count are summed over it so every device sees the global mean.

  Returns:
    A scalar. With no valid row the mean is 0, and its gradient is 0 rather than NaN.
  """
  mask = jnp.ones(values.shape, values.dtype) if where is None else jnp.asarray(where, values.dtype)
  total = jnp.sum(values * mask)
  count = jnp.sum(mask)
  if axis_name is not None:
    total = jax.lax.psum(total, axis_name)
    count = jax.lax.psum(count, axis_name)
  # max(count, 1): an all-padded batch contributes 0 instead of 0/0.
  return total / jnp.maximum(count, 1)
