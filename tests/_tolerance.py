"""The suite's tolerance policy: every numerical comparison in ``tests/`` goes through :func:`assert_close`.

Why a policy: a float32 comparison with an absolute-only tolerance such as ``atol=1e-6`` fails as soon as the values
are larger than about 8 (float32's spacing there is ~1e-6), and an ordinary reassociation under ``jax.jit`` then
turns CI red. So:

* The working precision is float32 when either side is a float32 (or narrower) array, else float64. Python
  numbers, lists and integer arrays count as exact (float64). A result's dtype does not say which precision made
  it: a float64 loss from a step that computes in float32 (a float32 model under ``jax_enable_x64``, a float64
  mean of float32 distances) carries float32 rounding. The caller then states ``precision="float32"``, the
  narrowest precision the computation actually used; the policy never picks a precision wider than the operands'.
* The relative tolerance is sized to the operation (:data:`RTOL`): one rounding per entry ("elementwise"), sums and
  matrix products whose rounding grows with the number of terms and with the summation order ("reduction", at
  least 1e-5 in float32), linear algebra such as eigendecompositions and solves ("linalg"), and deep compositions
  such as conv nets, GNN stacks and BatchNorm ("network").
* Each entry is held to its own expected magnitude: ``|actual_i - desired_i| <= rtol·|desired_i|``. There is no
  floor taken from the largest entry, which would let a small entry beside a large one be wrong by any amount
  (``close([1.5e-3, 1e3], [1e-3, 1e3])`` is false in float32). Where an entry is the result of a cancellation (a
  sum of large terms that comes out near zero), its rounding error scales with the terms, not with the result: the
  caller passes ``scale=``, the magnitude of the terms (a number, or an array that broadcasts against the entries),
  and the bound becomes ``rtol·(|desired_i| + scale_i)``. An expectation that is exactly zero everywhere needs
  ``scale=``. The same holds for any entry of a float32 tensor that comes out near zero, such as one coordinate of
  an embedding or a matrix product: its error is set by the norm of the row it was summed from, which
  :func:`row_scale` gives as a per-row ``scale``.
* Tolerances that come from sampling or from an optimiser, not from rounding (Monte-Carlo means, fitted weights),
  use ``op="statistical"`` and state ``rtol`` and ``atol`` explicitly; no other op accepts them.
* NaN is never close to anything.
"""

import numpy as np

# op -> (float64 rtol, float32 rtol)
RTOL = {
  "elementwise": (1e-12, 2e-6),
  "reduction": (1e-10, 1e-5),
  "linalg": (1e-8, 1e-4),
  "network": (1e-8, 2e-4),
}
_NARROW = {np.dtype(np.float16), np.dtype(np.float32)}


_PRECISIONS = {"float64": 0, "float32": 1}


def _precision(*values, declared: str | None = None) -> int:
  """0 for float64 (exact), 1 for float32 or narrower: the narrowest of the operands' dtypes and ``declared``, the
  precision the caller says the computation used."""
  if declared is not None:
    if declared not in _PRECISIONS:
      raise ValueError(f"assert_close: `precision` must be one of {sorted(_PRECISIONS)}, got {declared!r}")
    if _PRECISIONS[declared]:
      return 1
  for v in values:
    dtype = getattr(v, "dtype", None)
    if dtype is not None and (np.dtype(dtype) in _NARROW or str(dtype) == "bfloat16"):
      return 1
  return 0


def row_scale(x, axis: int = -1) -> np.ndarray:
  """The Euclidean norm of each row of ``x`` along ``axis``, kept as a broadcastable axis: the ``scale`` of every
  entry that a matrix product or a network layer summed from that row (an entry near zero carries the rounding of
  its row, not of itself)."""
  return np.linalg.norm(np.asarray(x, np.float64), axis=axis, keepdims=True)


def tolerances(actual, desired, op: str = "reduction", *, scale=None, rtol=None, atol=None, precision=None):
  """(rtol, atol) that :func:`assert_close` uses for these operands; ``atol`` is ``rtol·scale`` (a number or an
  array), zero when no ``scale`` is given. ``precision`` ("float32" or "float64") is the precision the computation
  used, when narrower than the operands' dtypes say."""
  if op == "statistical":
    if rtol is None or atol is None:
      raise TypeError(
        "assert_close: op='statistical' needs explicit `rtol` and `atol` (the sampling or "
        "optimisation error the test allows)"
      )
    return float(rtol), float(atol)
  if op not in RTOL:
    raise ValueError(f"assert_close: unknown op {op!r}; choose from {sorted(RTOL)} or 'statistical'")
  if rtol is not None or atol is not None:
    raise TypeError(
      f"assert_close: op={op!r} takes its tolerance from the policy; use op='statistical' for a "
      f"tolerance that is not about rounding"
    )
  rtol = RTOL[op][_precision(actual, desired, declared=precision)]
  if scale is None:
    expected = np.abs(np.asarray(desired, np.float64))
    expected = expected[np.isfinite(expected)]  # a NaN or inf expectation fails the comparison itself
    if expected.size and not np.any(expected):
      raise TypeError(
        "assert_close: the expected value is exactly zero; pass `scale=`, the magnitude of the terms "
        "whose result should cancel"
      )
    return rtol, 0.0
  scale = np.abs(np.asarray(scale, np.float64))
  if not np.all(np.isfinite(scale)):
    raise ValueError(f"assert_close: `scale` must be finite, got {scale}")
  return rtol, rtol * (float(scale) if scale.ndim == 0 else scale)


def assert_close(
  actual, desired, op: str = "reduction", *, scale=None, rtol=None, atol=None, precision=None, err_msg: str = ""
):
  """Asserts ``|actual - desired| <= rtol·|desired| + atol`` entrywise under the policy above."""
  rtol, atol = tolerances(actual, desired, op, scale=scale, rtol=rtol, atol=atol, precision=precision)
  a, d = np.asarray(actual, np.float64), np.asarray(desired, np.float64)
  if np.ndim(atol) == 0:
    np.testing.assert_allclose(
      a, d, rtol=rtol, atol=atol, equal_nan=False, err_msg=f"{err_msg} (op={op}, rtol={rtol:.1e}, atol={atol:.1e})"
    )
    return
  # A per-entry floor (rtol times a per-entry scale), which np.testing.assert_allclose cannot report.
  a, d, floor = np.broadcast_arrays(a, d, atol)
  bad = ~_within(a, d, rtol, floor)
  if bad.any():
    i = np.unravel_index(np.argmax(np.where(bad, np.abs(a - d) - floor - rtol * np.abs(d), -np.inf)), a.shape)
    raise AssertionError(
      f"{err_msg} (op={op}, rtol={rtol:.1e}, atol=rtol·scale): {int(bad.sum())} of {a.size} "
      f"entries differ; worst at {tuple(int(j) for j in i)}: actual {a[i]!r}, desired {d[i]!r}, "
      f"allowed {floor[i] + rtol * abs(d[i]):.3g}"
    )


def _within(a: np.ndarray, d: np.ndarray, rtol: float, atol) -> np.ndarray:
  """The policy's entrywise test, ``|a - d| <= atol + rtol·|d|`` (False wherever either side is NaN)."""
  return np.abs(a - d) <= atol + rtol * np.abs(d)


def close(actual, desired, op: str = "reduction", *, scale=None, rtol=None, atol=None, precision=None) -> bool:
  """Whether :func:`assert_close` would pass (for tests that assert two results differ)."""
  rtol, atol = tolerances(actual, desired, op, scale=scale, rtol=rtol, atol=atol, precision=precision)
  a, d = np.broadcast_arrays(np.asarray(actual, np.float64), np.asarray(desired, np.float64))
  return bool(np.all(_within(a, d, rtol, atol)))
