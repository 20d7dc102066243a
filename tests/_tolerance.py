"""The suite's tolerance policy: every numerical comparison in ``tests/`` goes through :func:`assert_close`.

Why a policy: a float32 comparison with an absolute-only tolerance such as ``atol=1e-6`` fails as soon as the values
are larger than about 8 (float32's spacing there is ~1e-6), and an ordinary reassociation under ``jax.jit`` then
turns CI red. So:

* The working precision is float32 when either side is a float32 (or narrower) array, else float64. Python
  numbers, lists and integer arrays count as exact (float64).
* The relative tolerance is sized to the operation (:data:`RTOL`): one rounding per entry ("elementwise"), sums and
  matrix products whose rounding grows with the number of terms and with the summation order ("reduction", at
  least 1e-5 in float32), linear algebra such as eigendecompositions and solves ("linalg"), and deep compositions
  such as conv nets, GNN stacks and BatchNorm ("network").
* The absolute floor is that relative tolerance times the magnitude of the expected values (their largest absolute
  value), because rounding errors scale with the magnitude of the terms, not with each result entry. When the
  expected value is exactly zero (a cancellation), the caller passes ``scale=``, the magnitude of the terms that
  cancel.
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


def _precision(*values) -> int:
  """0 for float64 (exact), 1 for float32 or narrower."""
  for v in values:
    dtype = getattr(v, "dtype", None)
    if dtype is not None and (np.dtype(dtype) in _NARROW or str(dtype) == "bfloat16"):
      return 1
  return 0


def tolerances(actual, desired, op: str = "reduction", *, scale=None, rtol=None, atol=None) -> tuple[float, float]:
  """(rtol, atol) that :func:`assert_close` uses for these operands."""
  if op == "statistical":
    if rtol is None or atol is None:
      raise TypeError("assert_close: op='statistical' needs explicit `rtol` and `atol` (the sampling or "
                      "optimisation error the test allows)")
    return float(rtol), float(atol)
  if op not in RTOL:
    raise ValueError(f"assert_close: unknown op {op!r}; choose from {sorted(RTOL)} or 'statistical'")
  if rtol is not None or atol is not None:
    raise TypeError(f"assert_close: op={op!r} takes its tolerance from the policy; use op='statistical' for a "
                    f"tolerance that is not about rounding")
  rtol = RTOL[op][_precision(actual, desired)]
  if scale is None:
    expected = np.abs(np.asarray(desired, np.float64))
    expected = expected[np.isfinite(expected)]  # a NaN or inf expectation fails the comparison itself
    scale = float(np.max(expected)) if expected.size else 1.0
    if scale == 0.0:
      raise TypeError("assert_close: the expected value is exactly zero; pass `scale=`, the magnitude of the terms "
                      "whose result should cancel")
  return rtol, rtol * float(scale)


def assert_close(actual, desired, op: str = "reduction", *, scale=None, rtol=None, atol=None, err_msg: str = ""):
  """Asserts ``|actual - desired| <= rtol·|desired| + atol`` entrywise under the policy above."""
  rtol, atol = tolerances(actual, desired, op, scale=scale, rtol=rtol, atol=atol)
  np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(desired, np.float64), rtol=rtol, atol=atol,
                             equal_nan=False, err_msg=f"{err_msg} (op={op}, rtol={rtol:.1e}, atol={atol:.1e})")


def close(actual, desired, op: str = "reduction", *, scale=None, rtol=None, atol=None) -> bool:
  """Whether :func:`assert_close` would pass (for tests that assert two results differ)."""
  rtol, atol = tolerances(actual, desired, op, scale=scale, rtol=rtol, atol=atol)
  a, d = np.broadcast_arrays(np.asarray(actual, np.float64), np.asarray(desired, np.float64))
  return bool(np.all(np.abs(a - d) <= atol + rtol * np.abs(d)))
