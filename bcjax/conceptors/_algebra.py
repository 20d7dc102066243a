r"""Conceptor matrices and their Boolean algebra (Jaeger 2014; Jaeger, JMLR 2017).

A conceptor is a symmetric positive-semidefinite :math:`N \times N` matrix with eigenvalues in :math:`[0, 1]`.
Every function takes matrices with optional leading batch axes, ``[..., N, N]``, is jittable, and is
differentiable where the operation is (see each docstring). Spectral maps go through the symmetric eigendecomposition
(``eigh``) so results are exactly symmetric; their derivatives are given in closed form (``custom_jvp``) because the
generic ``eigh`` derivative is undefined at repeated eigenvalues, which every rank-deficient conceptor has.

Singular inputs use fixed-shape projector algebra instead of slicing null-space bases, so the same code runs under
``jit``. An eigenvalue counts as 0 (or 1) when it is within ``tol`` of it; the default is
:math:`10 N \varepsilon_{\rm dtype}` (about 1e-14 for N = 6 in float64, Jaeger's Matlab tolerance).

References:
  H. Jaeger, "Controlling Recurrent Neural Networks by Conceptors", arXiv:1403.3369, 2014.
  H. Jaeger, "Using Conceptors to Manage Neural Long-Term Memories for Temporal Patterns", JMLR 18, 2017.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks, _reduce
from bcjax._reduce import zero_padded

# Helpers ---------------------------------------------------------------------------------------------------------


def _t(m: jax.Array) -> jax.Array:
  return jnp.swapaxes(m, -1, -2)


def _sym(m: jax.Array) -> jax.Array:
  """Symmetric part; removes round-off asymmetry before eigh."""
  return (m + _t(m)) / 2


def _from_spectrum(u: jax.Array, s: jax.Array) -> jax.Array:
  """U diag(s) U^T for batched U [..., N, N] and s [..., N], made bitwise symmetric."""
  return _sym((u * s[..., None, :]) @ _t(u))


def _eye_like(m: jax.Array) -> jax.Array:
  return jnp.broadcast_to(jnp.eye(m.shape[-1], dtype=m.dtype), m.shape)


def default_tol(n: int, dtype) -> float:
  """10 N eps(dtype): eigenvalues this close to 0 (or 1) are treated as exactly 0 (or 1).

  Args:
    n: N, the conceptor's size.
    dtype: the conceptor's dtype.

  Returns:
    The tolerance, a float.
  """
  return 10.0 * n * float(jnp.finfo(dtype).eps)


def _as_square(fn: str, name: str, m) -> jax.Array:
  """A floating [..., N, N] array; concrete inputs must also be symmetric and finite."""
  m = _checks.as_float_array(fn, name, m)
  if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
    raise ValueError(f"{fn}: `{name}` must be a square matrix [..., N, N], got shape {tuple(m.shape)}")
  if _checks.is_concrete(m):
    host = np.asarray(m)
    scale = max(1.0, float(np.abs(host).max(initial=0.0)))
    asym = float(np.abs(host - np.swapaxes(host, -1, -2)).max(initial=0.0))
    if asym > math.sqrt(float(jnp.finfo(m.dtype).eps)) * scale:
      raise ValueError(f"{fn}: `{name}` must be symmetric; max |M - M^T| = {asym:.3g} (shape {tuple(m.shape)})")
  return m


def _as_conceptor(fn: str, name: str, c) -> jax.Array:
  """A square symmetric [..., N, N] array whose eigenvalues lie in [0, 1].

  Checked on concrete inputs, to round-off 100·N·eps: the Boolean operations are only defined, and only return
  conceptors, for such matrices.
  """
  c = _as_square(fn, name, c)
  if _checks.is_concrete(c) and c.size:
    host = np.asarray(c, np.float64)
    s = np.linalg.eigvalsh((host + np.swapaxes(host, -1, -2)) / 2)
    slack = 100.0 * c.shape[-1] * float(jnp.finfo(c.dtype).eps)
    lo, hi = float(s.min()), float(s.max())
    if lo < -slack or hi > 1.0 + slack:
      raise ValueError(
        f"{fn}: `{name}` is not a conceptor: its eigenvalues span [{lo:.4g}, {hi:.4g}], outside "
        f"[0, 1] (shape {tuple(c.shape)}); build conceptors with `conceptor` or "
        f"`conceptor_from_correlation`"
      )
  return c


def _conceptor_pair(fn: str, c, b, tol) -> tuple[jax.Array, jax.Array, float]:
  """Validates two conceptors of the same N, broadcast to a common batch shape and dtype, and the tolerance."""
  c, b = _as_conceptor(fn, "c", c), _as_conceptor(fn, "b", b)
  if c.shape[-1] != b.shape[-1]:
    raise ValueError(
      f"{fn}: `c` has shape {tuple(c.shape)} and `b` has shape {tuple(b.shape)}; both must be N x N with the same N"
    )
  dtype = jnp.promote_types(c.dtype, b.dtype)
  c, b = jnp.broadcast_arrays(c.astype(dtype), b.astype(dtype))
  return c, b, default_tol(c.shape[-1], dtype) if tol is None else float(tol)


def _check_scalar(fn: str, name: str, value, *, allow_zero: bool = False, allow_inf: bool = False) -> None:
  """Aperture-like scalars: positive (or 0 / inf when allowed), never NaN; traced values are not inspected."""
  if not _checks.is_concrete(value):
    return
  arr = np.asarray(value, dtype=float)
  bad = np.isnan(arr) | (arr < 0) | ((arr == 0) & (not allow_zero)) | (np.isinf(arr) & (not allow_inf))
  if bad.any():
    allowed = "[0, inf]" if allow_zero and allow_inf else "(0, inf)"
    raise ValueError(f"{fn}: `{name}` must lie in {allowed}, got {value!r}")


def _pinv_spectral(s: jax.Array, tol: float) -> jax.Array:
  """Eigenvalues of the pseudo-inverse: 1/s above tol, 0 below (safe division: no inf in the unused branch)."""
  keep = s > tol
  return jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0)


# Conceptors from data ---------------------------------------------------------------------------------------------


@jax.custom_jvp
def _conceptor_of(r: jax.Array, eps: jax.Array) -> jax.Array:
  sigma, u = jnp.linalg.eigh(_sym(r))
  sigma = jnp.maximum(sigma, 0.0)  # R is PSD; round-off can make zero eigenvalues slightly negative
  return _from_spectrum(u, sigma / (sigma + eps[..., None]))


@_conceptor_of.defjvp
def _conceptor_of_jvp(primals, tangents):
  # C = I - eps K with K = (R + eps I)^-1, so dC = eps K dR K - K C d(eps): no eigenvalue gaps involved.
  r, eps = primals
  dr, deps = tangents
  sigma, u = jnp.linalg.eigh(_sym(r))
  sigma = jnp.maximum(sigma, 0.0)
  e = eps[..., None]
  c = _from_spectrum(u, sigma / (sigma + e))
  k = _from_spectrum(u, 1.0 / (sigma + e))
  dc = e[..., None] * (k @ _sym(dr) @ k) - (k @ c) * deps[..., None, None]
  return c, dc


def conceptor_from_correlation(r: ArrayLike, alpha: ArrayLike = 1.0) -> jax.Array:
  r"""Conceptor of a correlation matrix, :math:`C(R, \alpha) = R (R + \alpha^{-2} I)^{-1}`.

  .. math::
    R = U \operatorname{diag}(\sigma) U^\top \;\Rightarrow\; C = U \operatorname{diag}\!\Big(\frac{\sigma_i}{\sigma_i +
    \alpha^{-2}}\Big) U^\top, \qquad s_i \in [0, 1).

  Args:
    r: symmetric PSD correlation matrix, [..., N, N].
    alpha: aperture :math:`\alpha > 0` (finite), a scalar or [...].

  Returns:
    C, [..., N, N]: symmetric, eigenvalues in [0, 1). Differentiable in ``r`` and ``alpha`` everywhere.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import conceptor_from_correlation
    >>> conceptor_from_correlation(jnp.diag(jnp.array([1.0, 3.0, 0.0]))).diagonal().tolist()
    [0.5, 0.75, 0.0]
  """
  fn = "conceptor_from_correlation"
  r = _as_square(fn, "r", r)
  _check_scalar(fn, "alpha", alpha)
  alpha = jnp.asarray(alpha, r.dtype)
  eps = jnp.broadcast_to(alpha**-2.0, r.shape[:-2])
  return _conceptor_of(r, eps)


def correlation(x: ArrayLike, *, where: ArrayLike | None = None, axis_name: str | None = None) -> jax.Array:
  r"""Uncentred correlation matrix of row samples, :math:`R = X^\top X / n` (Jaeger's and Liu et al.'s convention).

  Args:
    x: samples as rows, [..., n, N].
    where: optional boolean mask of valid rows, [..., n].
    axis_name: mapped axis over which the rows are sharded; sums and counts are then global.

  Returns:
    R, [..., N, N].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for samples that are not rows [..., n, N], no (unmasked) row, or NaN/inf.
  """
  fn = "correlation"
  x = _checks.as_float_array(fn, "x", x, finite=False)
  if x.ndim < 2:
    raise ValueError(f"{fn}: `x` must hold samples as rows, [..., n, N]; got shape {tuple(x.shape)}")
  if where is None:
    count = jnp.full(x.shape[:-2], x.shape[-2], x.dtype)
  else:
    where = jnp.asarray(where)
    if where.shape != x.shape[:-1] or where.dtype != jnp.bool_:
      raise ValueError(
        f"{fn}: `where` must be a boolean mask of shape {tuple(x.shape[:-1])}, got {tuple(where.shape)} {where.dtype}"
      )
    count = jnp.sum(where, axis=-1, dtype=x.dtype)
  _checks.check_finite(fn, "x", x, where)
  x = zero_padded(x, where)
  total = _t(x) @ x
  if axis_name is not None:
    total, count = _reduce.psum_each((total, count), axis_name)
  if _checks.is_concrete(count) and np.any(np.asarray(count) == 0):
    raise ValueError(f"{fn}: `x` has no (unmasked) rows; a correlation matrix needs at least one sample")
  return total / jnp.maximum(count, 1)[..., None, None]


def conceptor(
  x: ArrayLike, alpha: ArrayLike = 1.0, *, where: ArrayLike | None = None, axis_name: str | None = None
) -> jax.Array:
  r"""Conceptor of row samples: :math:`C = R (R + \alpha^{-2} I)^{-1}`, :math:`R = X^\top X / n` (not centred).

  It is the minimiser of :math:`\mathbb E\lVert x - Cx \rVert^2 + \alpha^{-2} \lVert C \rVert_F^2`.

  Args:
    x: samples as rows, [..., n, N].
    alpha: aperture :math:`\alpha > 0`.
    where: optional boolean mask of valid rows, [..., n].
    axis_name: mapped axis over which the rows are sharded.

  Returns:
    C, [..., N, N], symmetric with eigenvalues :math:`\sigma_i / (\sigma_i + \alpha^{-2}) \in [0, 1)`.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import conceptor
    >>> c = conceptor(jnp.array([[2.0, 0.0], [0.0, 0.0]]), alpha=1.0)  # R = diag(2, 0)
    >>> [[round(float(v), 4) for v in row] for row in c]
    [[0.6667, 0.0], [0.0, 0.0]]
  """
  _check_scalar("conceptor", "alpha", alpha)
  return conceptor_from_correlation(correlation(x, where=where, axis_name=axis_name), alpha)


# Boolean operations ----------------------------------------------------------------------------------------------


def negation(c: ArrayLike) -> jax.Array:
  r"""NOT: :math:`\neg C = I - C`.

  Args:
    c: a conceptor, [..., N, N].

  Returns:
    ¬C, [..., N, N].

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import negation
    >>> negation(jnp.diag(jnp.array([0.25, 1.0]))).diagonal().tolist()
    [0.75, 0.0]
  """
  c = _as_conceptor("negation", "c", c)
  return _eye_like(c) - c


def _conjunction_parts(c: jax.Array, b: jax.Array, tol: float):
  """Returns (C ^ B, C^+, B^+) from one eigendecomposition of each operand."""
  # Jaeger's general AND: C ^ B = (P (C^+ + B^+ - I) P)^+ with P the projector onto range(C) ∩ range(B).
  s_c, u_c = jnp.linalg.eigh(_sym(c))
  s_b, u_b = jnp.linalg.eigh(_sym(b))
  null_c = _from_spectrum(u_c, (s_c <= tol).astype(c.dtype))
  null_b = _from_spectrum(u_b, (s_b <= tol).astype(c.dtype))
  # range(C) ∩ range(B) = (N(C) + N(B))^perp = null space of the PSD sum of the two null projectors.
  s_m, u_m = jnp.linalg.eigh(null_c + null_b)
  p = _from_spectrum(u_m, (s_m <= tol).astype(c.dtype))
  eye = _eye_like(c)
  pinv_c = _from_spectrum(u_c, _pinv_spectral(s_c, tol))
  pinv_b = _from_spectrum(u_b, _pinv_spectral(s_b, tol))
  a = p @ (pinv_c + pinv_b - eye) @ p
  # A is invertible on range(P) and zero off it; padding with I - P gives an invertible matrix whose inverse, less
  # I - P, is A's pseudo-inverse. With an empty intersection this returns exactly 0.
  q = eye - p
  return _sym(jnp.linalg.inv(a + q) - q), pinv_c, pinv_b


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _conjunction(c, b, tol):
  return _conjunction_parts(c, b, tol)[0]


@_conjunction.defjvp
def _conjunction_jvp(tol, primals, tangents):
  # d (C^-1 + B^-1 - I)^-1 = Z (C^-1 dC C^-1 + B^-1 dB B^-1) Z, with pseudo-inverses in the singular case.
  c, b = primals
  dc, db = tangents
  z, pc, pb = _conjunction_parts(c, b, tol)
  return z, z @ (pc @ _sym(dc) @ pc + pb @ _sym(db) @ pb) @ z


def conjunction(c: ArrayLike, b: ArrayLike, *, tol: float | None = None) -> jax.Array:
  r"""AND, valid for singular conceptors (Jaeger 2014, general definition).

  .. math::
    C \wedge B = W \big(W^\top (C^\dagger + B^\dagger - I) W\big)^{-1} W^\top,

  with the columns of W an orthonormal basis of :math:`\mathcal R(C) \cap \mathcal R(B)` (0 when the intersection
  is {0}). For nonsingular C and B this is :math:`(C^{-1} + B^{-1} - I)^{-1}`, and
  :math:`C(R,\alpha) \wedge C(Q,\alpha) = C((R^{-1} + Q^{-1})^{-1}, \alpha)`.

  Differentiable for nonsingular C and B (the derivative of the invertible formula; with singular inputs the same
  formula with pseudo-inverses, i.e. the derivative along rank-preserving perturbations).

  Args:
    c: a conceptor, [..., N, N].
    b: a conceptor, [..., N, N].
    tol: eigenvalues <= tol count as 0; default :func:`default_tol`.

  Returns:
    C ∧ B, [..., N, N].

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import conjunction
    >>> p, q = jnp.diag(jnp.array([1.0, 1.0, 0.0])), jnp.diag(jnp.array([0.0, 1.0, 1.0]))
    >>> conjunction(p, q).round(6).diagonal().tolist()  # projectors: intersection of subspaces
    [0.0, 1.0, 0.0]
  """
  c, b, tol = _conceptor_pair("conjunction", c, b, tol)
  return _conjunction(c, b, tol)


def disjunction(c: ArrayLike, b: ArrayLike, *, tol: float | None = None) -> jax.Array:
  r"""OR by de Morgan: :math:`C \vee B = \neg(\neg C \wedge \neg B)`, valid when eigenvalues equal 1.

  For conceptors of data, correlations add: :math:`C(R,\alpha) \vee C(Q,\alpha) = C(R + Q, \alpha)`.

  Args:
    c: a conceptor, [..., N, N].
    b: a conceptor, [..., N, N].
    tol: eigenvalues within tol of 0 or 1 count as 0 or 1; default :func:`default_tol`.

  Returns:
    C ∨ B, [..., N, N].

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import disjunction
    >>> c = jnp.diag(jnp.array([0.5, 0.0]))  # C(R, 1) with R = diag(1, 0); C v C = C(2R, 1)
    >>> [round(float(v), 4) for v in disjunction(c, c).diagonal()]
    [0.6667, 0.0]
  """
  c, b, tol = _conceptor_pair("disjunction", c, b, tol)
  return _eye_like(c) - _conjunction(_eye_like(c) - c, _eye_like(b) - b, tol)


# Aperture and quota ----------------------------------------------------------------------------------------------


def _phi_spectrum(s: jax.Array, gamma: jax.Array, tol: float) -> jax.Array:
  # 0 and 1 are fixed points of phi; snapping eigenvalues within tol keeps round-off (1 - 1e-16) from being
  # blown up by a tiny gamma.
  s = jnp.where(s >= 1.0 - tol, 1.0, jnp.where(s <= tol, 0.0, s))
  g = gamma[..., None]
  finite = (g > 0) & jnp.isfinite(g)
  safe_g = jnp.where(finite, g, 1.0)
  regular = s / (s + safe_g**-2.0 * (1.0 - s))
  regular = jnp.where((s <= tol) & finite, 0.0, regular)  # s = 0 stays 0 (avoids 0/0 in round-off land)
  at_zero = (s >= 1.0 - tol).astype(s.dtype)  # gamma = 0: projector onto the 1-eigenspace
  at_inf = (s > tol).astype(s.dtype)  # gamma = inf: projector onto range(C)
  return jnp.where(finite, regular, jnp.where(g == 0, at_zero, at_inf))


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _phi(c, gamma, tol):
  s, u = jnp.linalg.eigh(_sym(c))
  return _from_spectrum(u, _phi_spectrum(jnp.clip(s, 0.0, 1.0), gamma, tol))


@_phi.defjvp
def _phi_jvp(tol, primals, tangents):
  # For 0 < gamma < inf: phi = C M^-1, M = g I + (1 - g) C, g = gamma^-2, so d phi = g M^-1 dC M^-1 and
  # d phi / d gamma = U diag(2 gamma^-3 s (1 - s) / (s + g (1 - s))^2) U^T. The limits are piecewise constant.
  c, gamma = primals
  dc, dgamma = tangents
  s, u = jnp.linalg.eigh(_sym(c))
  s = jnp.clip(s, 0.0, 1.0)
  out = _from_spectrum(u, _phi_spectrum(s, gamma, tol))
  g_ = gamma[..., None]
  finite = (g_ > 0) & jnp.isfinite(g_)
  safe = jnp.where(finite, g_, 1.0)
  g = safe**-2.0
  denom = s + g * (1.0 - s)
  m_inv = _from_spectrum(u, 1.0 / denom)
  d_c = g[..., None] * (m_inv @ _sym(dc) @ m_inv)
  d_gamma = _from_spectrum(u, 2.0 * safe**-3.0 * s * (1.0 - s) / denom**2) * dgamma[..., None, None]
  keep = finite[..., None]
  return out, jnp.where(keep, d_c + d_gamma, 0.0)


def aperture_adaptation(c: ArrayLike, gamma: ArrayLike, *, tol: float | None = None) -> jax.Array:
  r"""Aperture adaptation :math:`\varphi(C, \gamma) = C (C + \gamma^{-2} (I - C))^{-1}`, :math:`\gamma \in [0, \infty]`.

  Spectrally :math:`s \mapsto s / (s + \gamma^{-2}(1 - s))`, so :math:`\varphi(C(R, \alpha), \gamma) = C(R,
  \gamma\alpha)`. The limits: :math:`\gamma = 0` keeps the eigenvalues equal to 1 and zeroes the rest (projector
  onto the 1-eigenspace); :math:`\gamma = \infty` maps every positive eigenvalue to 1 (projector onto the range).
  Differentiable in C and :math:`\gamma` for :math:`0 < \gamma < \infty`.

  Args:
    c: conceptor, [..., N, N].
    gamma: :math:`\gamma \ge 0` (``float('inf')`` allowed), scalar or [...].
    tol: eigenvalues within tol of 0 or 1 count as 0 or 1; default :func:`default_tol`.

  Returns:
    :math:`\varphi(C, \gamma)`, [..., N, N].

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import aperture_adaptation
    >>> c = jnp.diag(jnp.array([0.5, 1.0, 0.0]))
    >>> [round(float(v), 4) for v in aperture_adaptation(c, 2.0).diagonal()]
    [0.8, 1.0, 0.0]
    >>> aperture_adaptation(c, float("inf")).diagonal().tolist(), aperture_adaptation(c, 0.0).diagonal().tolist()
    ([1.0, 1.0, 0.0], [0.0, 1.0, 0.0])
  """
  c = _as_conceptor("aperture_adaptation", "c", c)
  _check_scalar("aperture_adaptation", "gamma", gamma, allow_zero=True, allow_inf=True)
  gamma = jnp.broadcast_to(jnp.asarray(gamma, c.dtype), c.shape[:-2])
  tol = default_tol(c.shape[-1], c.dtype) if tol is None else float(tol)
  return _phi(c, gamma, tol)


def quota(c: ArrayLike) -> jax.Array:
  r"""Quota :math:`Q(C) = \operatorname{tr}(C) / N \in [0, 1]`: the fraction of the space C claims.

  Args:
    c: a conceptor, [..., N, N].

  Returns:
    Q(C), [...].

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import quota
    >>> float(quota(jnp.diag(jnp.array([1.0, 0.5, 0.0, 0.5]))))
    0.5
  """
  c = _as_conceptor("quota", "c", c)
  return jnp.trace(c, axis1=-2, axis2=-1) / c.shape[-1]
