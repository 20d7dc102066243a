"""Argument validation shared by bcjax's public functions.

Every check raises an error that names the calling function, the offending argument and the shapes or values it
saw. Value checks (NaN, inf) only run on concrete arrays: under ``jax.jit`` the values are tracers and cannot be
inspected, so the checks run where a user calls a function eagerly and are skipped inside traced code.
"""

from collections.abc import Sequence
from typing import Literal, overload

import jax
import jax.numpy as jnp
import numpy as np

from bcjax._device import device_array


def is_concrete(x) -> bool:
  """True when ``x`` holds values now (NumPy, Python scalars or a non-traced jax.Array)."""
  return not isinstance(x, jax.core.Tracer)


@overload
def as_float_array(
  fn: str, name: str, x, ndim: int | None = None, *, numpy: Literal[False] = False, finite: bool = True
) -> jax.Array: ...


@overload
def as_float_array(
  fn: str, name: str, x, ndim: int | None = None, *, numpy: Literal[True], finite: bool = True
) -> np.ndarray: ...


def as_float_array(
  fn: str, name: str, x, ndim: int | None = None, *, numpy: bool = False, finite: bool = True
) -> jax.Array | np.ndarray:
  """Converts ``x`` to a floating array, checking its rank and (unless ``finite=False``) that it holds no NaN or inf.

  Returns a jax.Array, or with ``numpy=True`` a NumPy array in ``x``'s own precision (no float64 -> float32 cast).
  Functions with a row mask pass ``finite=False`` and call :func:`check_finite` with the mask once it is validated:
  padded rows may hold anything.
  """
  if x is None:
    raise TypeError(f"{fn}: `{name}` is None; expected a floating array")
  try:
    dtype = jnp.result_type(x)
  except TypeError as e:
    raise TypeError(f"{fn}: `{name}` is not an array (got {type(x).__name__})") from e
  if not jnp.issubdtype(dtype, jnp.floating):
    raise TypeError(f"{fn}: `{name}` must have a real floating dtype, got {dtype}")
  arr = np.asarray(x) if numpy else device_array(x)
  if ndim is not None and arr.ndim != ndim:
    raise ValueError(f"{fn}: `{name}` must have rank {ndim}, got shape {tuple(arr.shape)}")
  if finite:
    check_finite(fn, name, arr)
  return arr


def check_finite(fn: str, name: str, x, where=None) -> None:
  """Raises ValueError when a concrete ``x`` holds NaN or inf in a valid row; a traced ``x`` is not inspected.

  ``where`` [n] (validated, boolean) restricts the check to the rows it marks: padded rows are ignored by the
  computation, so their content must not make an eager call fail where the jitted one succeeds.
  """
  if not is_concrete(x) or (where is not None and not is_concrete(where)):
    return
  # NumPy, not jnp: inside a jit trace even ops on concrete arrays would be staged out as tracers.
  values = np.asarray(x)
  if where is not None:
    values = values[np.asarray(where)]
  finite = np.isfinite(values)
  if not finite.all():
    rows = " in rows where `where` is True" if where is not None else ""
    raise ValueError(
      f"{fn}: `{name}` contains {int(finite.size - finite.sum())} NaN or inf value(s){rows} "
      f"(shape {tuple(np.shape(x))})"
    )


def as_weight_chain(fn: str, name: str, weights: Sequence) -> list[jax.Array]:
  """Validates a chain ``[W_{j+1}, ..., W_k]`` of backward weights, W_i of shape [d_{i-1}, d_i]."""
  if isinstance(weights, (jax.Array, np.ndarray)):
    raise TypeError(
      f"{fn}: `{name}` must be a list of 2-D weight matrices, got a single array of shape {tuple(weights.shape)}"
    )
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
        f"{chain[i + 1].shape[0]} (inner dimensions must match)"
      )
  return chain


def as_int(fn: str, name: str, value, *, low: int | None = None, high: int | None = None) -> int:
  """``value`` as a Python int.

  A Python or NumPy integer, or a concrete 0-d integer array (bools and floats are refused, since ``int(2.7)`` would
  silently truncate); optionally checked to lie in [low, high].
  """
  dtype = getattr(value, "dtype", None)
  integral = isinstance(value, (int, np.integer)) or (
    dtype is not None and np.ndim(value) == 0 and jnp.issubdtype(dtype, jnp.integer)
  )
  if isinstance(value, (bool, np.bool_)) or not integral or not is_concrete(value):
    raise TypeError(
      f"{fn}: `{name}` must be an integer (Python, NumPy or a 0-d integer array), got {type(value).__name__} {value!r}"
    )
  out = int(value)
  if (low is not None and out < low) or (high is not None and out > high):
    bounds = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
    raise ValueError(f"{fn}: `{name}` must be an integer in {bounds}, got {out}")
  return out


def as_float(fn: str, name: str, value) -> float:
  """``value`` as a finite Python float: a Python or NumPy number, or a concrete 0-d real array (bools are refused)."""
  dtype = getattr(value, "dtype", None)
  numeric = isinstance(value, (int, float, np.integer, np.floating)) or (
    dtype is not None
    and np.ndim(value) == 0
    and (jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating))
  )
  if isinstance(value, (bool, np.bool_)) or not numeric or not is_concrete(value):
    raise TypeError(
      f"{fn}: `{name}` must be a real number (Python, NumPy or a 0-d array), got {type(value).__name__} {value!r}"
    )
  out = float(value)
  if not np.isfinite(out):
    raise ValueError(f"{fn}: `{name}` must be finite, got {out}")
  return out


def as_float_in(
  fn: str, name: str, value, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> float:
  """``value`` as a float in the interval from ``low`` to ``high`` (open ends as asked).

  Any number type, as :func:`as_float`. Raises ValueError, naming the interval, for a value outside it (NaN included).
  """
  interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
  try:
    out = as_float(fn, name, value)
  except (TypeError, ValueError):
    raise ValueError(f"{fn}: `{name}` must be a number in {interval}, got {value!r}") from None
  if out < low or out > high or (low_open and out == low) or (high_open and out == high):
    raise ValueError(f"{fn}: `{name}` must lie in {interval}, got {value!r}")
  return out


def check_positive_int(fn: str, name: str, value) -> int:
  """Returns ``value`` as an int, raising when it is not a positive integer."""
  try:
    return as_int(fn, name, value, low=1)
  except (TypeError, ValueError):
    raise ValueError(f"{fn}: `{name}` must be a positive integer, got {value!r}") from None


def check_row_mask(fn: str, where, n: int) -> jax.Array | None:
  """Validates an optional boolean row mask of shape [n]; returns it as a jax array (or None)."""
  if where is None:
    return None
  where = device_array(where)
  if where.shape != (n,):
    raise ValueError(f"{fn}: `where` has shape {tuple(where.shape)}; expected a row mask of shape ({n},)")
  if where.dtype != jnp.bool_:
    raise TypeError(f"{fn}: `where` must be a boolean row mask, got dtype {where.dtype}")
  return where
