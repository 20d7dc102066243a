"""Host values to device arrays without compiling anything.

Under JAX 0.10 ``jnp.asarray(numpy_array)`` stages the value through a small compiled program, one per shape and
dtype: an experiment that converts its batches, padded evaluation sets and masks that way compiled over a hundred
such programs (a BC-Aligner test-preset run: 108) and dispatched thousands of them. ``jax.device_put`` transfers the
same value with the same dtype canonicalisation (float64 to float32 unless x64 is on) and compiles nothing.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def device_array(x: Any, dtype: Any = None) -> jax.Array:
  """``x`` as a :class:`jax.Array`, like ``jnp.asarray(x, dtype)``.

  NumPy arrays and scalars are transferred with :func:`jax.device_put` (no compiled program); anything else (a jax
  array, a tracer, a Python scalar or list) goes through ``jnp.asarray``.

  Args:
    x: the value.
    dtype: optional dtype to cast a host value to before the transfer.

  Returns:
    A jax array of ``x``'s values, with JAX's canonical dtype for it.
  """
  if isinstance(x, (np.ndarray, np.generic)):
    return jax.device_put(x if dtype is None else np.asarray(x, dtype))
  return jnp.asarray(x, dtype)


@jax.jit
def copy_tree(tree: Any) -> Any:
  """Fresh device copies of every leaf of ``tree``, in one compiled program per tree structure.

  For states that a jitted step donates, which must not share a buffer with the caller's arrays or with each other.
  Leaf by leaf outside ``jit``, each shape was a small program of its own and each leaf a dispatch.

  Args:
    tree: a pytree of arrays (host or device).

  Returns:
    The same tree of new device arrays.
  """
  return jax.tree.map(jnp.copy, tree)
