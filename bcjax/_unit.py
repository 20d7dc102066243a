"""Rows scaled to unit L2 norm, the one normalisation every cosine in bcjax goes through (a zero row stays zero)."""

import jax
import jax.numpy as jnp
import numpy as np


def unit_rows(z, dtype=None) -> np.ndarray:
  """``z``'s rows (its last axis) divided by their L2 norms, in NumPy.

  Args:
    z: an array [..., D].
    dtype: the precision to compute and return in (default: ``z``'s own).

  Returns:
    An array of ``z``'s shape; a zero row stays zero.
  """
  z = np.asarray(z, dtype)
  norm = np.linalg.norm(z, axis=-1, keepdims=True)
  return z / np.where(norm > 0, norm, 1.0)


def unit_rows_jax(z) -> jax.Array:
  """:func:`unit_rows` in JAX (traceable), in ``z``'s precision."""
  norm = jnp.linalg.norm(z, axis=-1, keepdims=True)
  return z / jnp.where(norm > 0, norm, 1.0)
