"""Argument validation shared by bcjax's public functions.

Every check raises an error that names the calling function, the offending argument and the shapes or values it
saw. Value checks (NaN, inf) only run on concrete arrays: under ``jax.jit`` the values are tracers and cannot be
inspected, so the checks run where a user calls a function eagerly and are skipped inside traced code.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(x) -> bool:
  """True when ``x`` holds values now (NumPy, Python scalars or a non-traced jax.Array)."""
  return not isinstance(x, jax.core.Tracer)


def as_float_array(fn: str, name: str, x, ndim: int | None = None, *, numpy: bool = False):
  """Converts ``x`` to a floating array, checking its rank and that it holds no NaN or inf.

  Returns a jax.Array, or with ``numpy=True`` a NumPy array in ``x``'s own precision (no float64 -> float32 cast).
  """
  if x is None:
    raise TypeError(f"{fn}: `{name}` is None; expected a floating array")
  try:
    dtype = jnp.result_type(x)
  except TypeError as e:
    raise TypeError(f"{fn}: `{name}` is not an array (got {type(x).__name__})") from e
  if not jnp.issubdtype(dtype, jnp.floating):
    raise TypeError(f"{fn}: `{name}` must have a real floating dtype, got {dtype}")
  arr = np.asarray(x) if numpy else jnp.asarray(x)
  if ndim is not None and arr.ndim != ndim:
    raise ValueError(f"{fn}: `{name}` must have rank {ndim}, got shape {tuple(arr.shape)}")
  check_finite(fn, name, arr)
  return arr


def check_finite(fn: str, name: str, x) -> None:
  """Raises ValueError when a concrete ``x`` holds NaN or inf; a traced ``x`` is not inspected."""
  if not is_concrete(x):
    return
  # NumPy, not jnp: inside a jit trace even ops on concrete arrays would be staged out as tracers.
  finite = np.isfinite(np.asarray(x))
  if not finite.all():
    raise ValueError(f"{fn}: `{name}` contains {int(finite.size - finite.sum())} NaN or inf value(s) "
                     f"(shape {tuple(np.shape(x))})")


def as_weight_chain(fn: str, name: str, weights: Sequence) -> list[jax.Array]:
  """Validates a chain ``[W_{j+1}, ..., W_k]`` of backward weights, W_i of shape [d_{i-1}, d_i]."""
  if isinstance(weights, (jax.Array, np.ndarray)):
    raise TypeError(f"{fn}: `{name}` must be a list of 2-D weight matrices, got a single array of shape "
                    f"{tuple(weights.shape)}")
  try:
    chain = list(weights)
  except TypeError as e:
    raise TypeError(f"{fn}: `{name}` must be a list of 2-D weight matrices, got {type(weights).__name__}") from e
  chain = [as_float_array(fn, f"{name}[{i}]", w, ndim=2) for i, w in enumerate(chain)]
  for i in range(len(chain) - 1):
    if chain[i].shape[1] != chain[i + 1].shape[0]:
      raise ValueError(
          f"{fn}: `{name}[{i}]` has shape {tuple(chain[i].shape)} but `{name}[{i + 1}]` has shape "
          f"{tuple(chain[i + 1].shape)}; W_i must be [d_(i-1), d_i] so that {chain[i].shape[1]} == "
          f"{chain[i + 1].shape[0]} (inner dimensions must match)")
  return chain


def check_positive_int(fn: str, name: str, value) -> int:
  """Returns ``value`` as an int, raising when it is not a positive integer."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
    raise ValueError(f"{fn}: `{name}` must be a positive integer, got {value!r}")
  return int(value)


def check_row_mask(fn: str, where, n: int):
  """Validates an optional boolean row mask of shape [n]; returns it as a jax array (or None)."""
  if where is None:
    return None
  where = jnp.asarray(where)
  if where.shape != (n,):
    raise ValueError(f"{fn}: `where` has shape {tuple(where.shape)}; expected a row mask of shape ({n},)")
  if where.dtype != jnp.bool_:
    raise TypeError(f"{fn}: `where` must be a boolean row mask, got dtype {where.dtype}")
  return where
