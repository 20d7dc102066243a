r"""Gramians, the all-pairs penalty and its gradient surrogates (Krichene et al., ICLR 2019, sections 2-3, App. B-D).

Embeddings are rows: left embeddings ``u`` [n, k], right embeddings ``v`` [n, k]. The all-pairs penalty

.. math::
  g(\theta) = \frac{1}{n^2} \sum_{i,j} \langle u_i, v_j \rangle^2 = \langle G_u, G_v \rangle, \qquad
  G_u = \frac1n \sum_i u_i \otimes u_i \quad (2)\text{-}(4)

costs :math:`O(nk^2)` in Gramian form instead of :math:`O(n^2 k)`.

References:
  W. Krichene, N. Mayoraz, S. Rendle, L. Zhang, X. Yi, L. Hong, E. Chi, J. Anderson, "Efficient Training on Very
  Large Corpora via Gramian Estimation", ICLR 2019. https://arxiv.org/abs/1807.07187
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks, _reduce
from bcjax._reduce import zero_padded


def _rows(fn: str, name: str, x, *, finite: bool = True) -> jax.Array:
  return _checks.as_float_array(fn, name, x, ndim=2, finite=finite)


def _row_weights(fn: str, name: str, weights, n: int, dtype, *, where=None) -> jax.Array:
  """Optional per-row weights [n] (non-negative on valid rows); ones when None."""
  if weights is None:
    return jnp.ones((n,), dtype)
  w = _checks.as_float_array(fn, name, weights, ndim=1, finite=False)
  if w.shape[0] != n:
    raise ValueError(f"{fn}: `{name}` has shape {tuple(w.shape)}; expected one weight per row, ({n},)")
  _checks.check_finite(fn, name, w, where)
  if _checks.is_concrete(w) and (where is None or _checks.is_concrete(where)):
    valid = np.asarray(w) if where is None else np.asarray(w)[np.asarray(where)]
    if np.any(valid < 0):
      raise ValueError(f"{fn}: `{name}` must be non-negative (min {float(np.min(valid))})")
  return w.astype(dtype)


def _valid_rows(fn: str, where, arrays: dict) -> tuple[jax.Array | None, jax.Array, list[jax.Array]]:
  """Validates the row mask and the valid rows of ``arrays``, zeroing the padded ones.

  Validates the row mask, checks the valid rows of ``arrays`` (name -> [n, ...]) for NaN/inf and zeroes the padded ones.
  Returns (mask or None, count of valid rows, the arrays).
  """
  n = next(iter(arrays.values())).shape[0]
  where = _checks.check_row_mask(fn, where, n)
  dtype = next(iter(arrays.values())).dtype
  out = []
  for name, x in arrays.items():
    _checks.check_finite(fn, name, x, where)
    out.append(zero_padded(x, where))
  count = jnp.asarray(n, dtype) if where is None else jnp.sum(where, dtype=dtype)
  return where, count, out


def cross_gramian(
  x: ArrayLike,
  y: ArrayLike,
  weights: ArrayLike | None = None,
  *,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""Weighted cross-Gramian :math:`\frac1n \sum_i a_i\, x_i \otimes y_i` over the rows of x [n, k] and y [n, r].

  With ``y = q`` (a low-rank prior) this is :math:`H_u` of App. B. ``where`` excludes padded rows from both the sum
  and the count n; ``axis_name`` sums over devices so every device gets the global Gramian.

  Args:
    x: rows [n, k].
    y: rows [n, r].
    weights: per-row weights :math:`a_i`, [n] (ones when None).
    where: mask of the real rows, [n].
    axis_name: mapped axis the rows are split over.

  Returns:
    [k, r].

  Raises:
    ValueError: ``x`` and ``y`` with different numbers of rows, or a malformed mask or weights.
  """
  fn = "cross_gramian"
  x, y = _rows(fn, "x", x, finite=False), _rows(fn, "y", y, finite=False)
  if x.shape[0] != y.shape[0]:
    raise ValueError(f"{fn}: `x` {tuple(x.shape)} and `y` {tuple(y.shape)} must have the same rows")
  n = x.shape[0]
  where, count, (x, y) = _valid_rows(fn, where, {"x": x, "y": y})
  a = zero_padded(_row_weights(fn, "weights", weights, n, x.dtype, where=where), where)
  total = x.T @ (a[:, None] * y)
  if axis_name is not None:
    total, count = _reduce.psum_each((total, count), axis_name)
  return total / jnp.maximum(count, 1)  # an all-padded batch gives 0, not 0/0


def gramian(
  x: ArrayLike, weights: ArrayLike | None = None, *, where: ArrayLike | None = None, axis_name: str | None = None
) -> jax.Array:
  r"""Gramian (eq. 3) with optional weights (App. C): :math:`G^a = \frac1n \sum_i a_i\, x_i \otimes x_i`.

  Args:
    x: embeddings, [n, k].
    weights: non-negative :math:`a_i`, [n]; uniform when None.
    where: optional boolean row mask, [n] (masked rows do not count in n).
    axis_name: mapped axis over which the rows are sharded.

  Returns:
    The symmetric PSD Gramian, [k, k].

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.gramian import gramian
    >>> gramian(jnp.array([[1.0, 0.0], [1.0, 2.0]])).tolist()
    [[1.0, 1.0], [1.0, 2.0]]
  """
  return cross_gramian(x, x, weights, where=where, axis_name=axis_name)


def gramian_penalty(gu: ArrayLike, gv: ArrayLike) -> jax.Array:
  r"""The penalty in Gramian form, :math:`g = \langle G_u, G_v \rangle = \sum_{ab} (G_u)_{ab} (G_v)_{ab}` (eq. 4).

  Args:
    gu: :math:`G_u`, [k, k].
    gv: :math:`G_v`, [k, k].

  Returns:
    :math:`g`, a scalar.

  Raises:
    ValueError: Gramians of different shapes, or not matrices.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.gramian import gramian_penalty
    >>> float(gramian_penalty(jnp.eye(2), jnp.array([[2.0, 5.0], [5.0, 3.0]])))
    5.0
  """
  gu = _checks.as_float_array("gramian_penalty", "gu", gu, ndim=2)
  gv = _checks.as_float_array("gramian_penalty", "gv", gv, ndim=2)
  if gu.shape != gv.shape:
    raise ValueError(f"gramian_penalty: `gu` {tuple(gu.shape)} and `gv` {tuple(gv.shape)} must have the same shape")
  return jnp.sum(gu * gv)


def penalty_surrogate(
  u: ArrayLike,
  v: ArrayLike,
  gu_hat: ArrayLike,
  gv_hat: ArrayLike,
  *,
  u_weights: ArrayLike | None = None,
  v_weights: ArrayLike | None = None,
  q: ArrayLike | None = None,
  r: ArrayLike | None = None,
  hu_hat: ArrayLike | None = None,
  hv_hat: ArrayLike | None = None,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""The batch surrogate whose :math:`\theta`-gradient estimates :math:`\nabla g` (eq. 7; eq. 22 with a prior).

  .. math::
    \hat g_B = \frac{1}{|B|}\sum_{i \in B} a_i \langle u_i, \hat G_v u_i \rangle + b_i \langle v_i, \hat G_u v_i
    \rangle \;\Big[ - 2 \langle u_i, \hat H_v q_i \rangle - 2 \langle v_i, \hat H_u r_i \rangle \Big].

  The estimates are held constant (``stop_gradient``): by Prop. 1 (Prop. 6 with a prior) the gradient is unbiased
  when they are unbiased and independent of the batch. Its *value* estimates :math:`2g` (resp. :math:`2(g^P - c)`),
  not :math:`g`; monitor :func:`gramian_penalty` of the estimates instead.

  Args:
    u: the batch's left embeddings, [B, k].
    v: the batch's right embeddings, [B, k].
    gu_hat: the left Gramian's estimate, [k, k] (the weighted Gramian with weights).
    gv_hat: the right Gramian's estimate, [k, k].
    u_weights: App. C weights :math:`a_i` of the left rows, [B].
    v_weights: App. C weights :math:`b_i` of the right rows, [B].
    q: the low-rank prior's left factors of the batch rows, [B, k_P] (App. B).
    r: the low-rank prior's right factors of the batch rows, [B, k_P].
    hu_hat: the left cross-Gramian's estimate, [k, k_P].
    hv_hat: the right cross-Gramian's estimate, [k, k_P].
    where: optional boolean row mask, [B].
    axis_name: mapped axis over which the batch is sharded.

  Returns:
    The surrogate, a scalar: its value is not the penalty, its gradient estimates the penalty's.

  Raises:
    ValueError: shapes that disagree, or a prior given in part.
  """
  fn = "penalty_surrogate"
  u, v = _rows(fn, "u", u, finite=False), _rows(fn, "v", v, finite=False)
  if u.shape != v.shape:
    raise ValueError(f"{fn}: `u` {tuple(u.shape)} and `v` {tuple(v.shape)} must have the same shape [B, k]")
  n, k = u.shape
  where, count, (u, v) = _valid_rows(fn, where, {"u": u, "v": v})
  for name, g in (("gu_hat", gu_hat), ("gv_hat", gv_hat)):
    g = _checks.as_float_array(fn, name, g, ndim=2)
    if g.shape != (k, k):
      raise ValueError(f"{fn}: `{name}` has shape {tuple(g.shape)} but the embeddings have k={k}")
  gu_hat, gv_hat = jax.lax.stop_gradient(jnp.asarray(gu_hat)), jax.lax.stop_gradient(jnp.asarray(gv_hat))
  a = zero_padded(_row_weights(fn, "u_weights", u_weights, n, u.dtype, where=where), where)
  b = zero_padded(_row_weights(fn, "v_weights", v_weights, n, u.dtype, where=where), where)
  per_row = a * jnp.einsum("bi,ij,bj->b", u, gv_hat, u) + b * jnp.einsum("bi,ij,bj->b", v, gu_hat, v)
  prior = [x is not None for x in (q, r, hu_hat, hv_hat)]
  if any(prior):
    if not all(prior):
      raise ValueError(f"{fn}: a low-rank prior needs all of `q`, `r`, `hu_hat` and `hv_hat`")
    q, r = _rows(fn, "q", q, finite=False), _rows(fn, "r", r, finite=False)
    hu_hat = jax.lax.stop_gradient(_checks.as_float_array(fn, "hu_hat", hu_hat, ndim=2))
    hv_hat = jax.lax.stop_gradient(_checks.as_float_array(fn, "hv_hat", hv_hat, ndim=2))
    if q.shape[0] != n or r.shape != q.shape or hu_hat.shape != (k, q.shape[1]) or hv_hat.shape != hu_hat.shape:
      raise ValueError(
        f"{fn}: prior shapes disagree: `q` {tuple(q.shape)}, `r` {tuple(r.shape)}, `hu_hat` "
        f"{tuple(hu_hat.shape)}, `hv_hat` {tuple(hv_hat.shape)} for embeddings [B, k] = {(n, k)}"
      )
    _, _, (q, r) = _valid_rows(fn, where, {"q": q, "r": r})
    per_row = per_row - 2.0 * jnp.einsum("bi,ij,bj->b", u, hv_hat, q) - 2.0 * jnp.einsum("bi,ij,bj->b", v, hu_hat, r)
  total = jnp.sum(zero_padded(per_row, where))
  if axis_name is not None:
    total, count = _reduce.psum_each((total, count), axis_name)
  return total / jnp.maximum(count, 1)


def prior_penalty(gu: ArrayLike, gv: ArrayLike, hu: ArrayLike, hv: ArrayLike, c: ArrayLike = 0.0) -> jax.Array:
  r"""Penalty with a low-rank prior :math:`P = QR^\top` (App. B).

  :math:`g^P = \langle G_u, G_v\rangle - 2\langle H_u, H_v\rangle + c`, with :math:`c = \langle G_q, G_r \rangle` (a
  constant in :math:`\theta`).

  Args:
    gu: :math:`G_u`, [k, k].
    gv: :math:`G_v`, [k, k].
    hu: :math:`H_u`, the left cross-Gramian with the prior, [k, k_P].
    hv: :math:`H_v`, [k, k_P].
    c: the constant :math:`\langle G_q, G_r \rangle`.

  Returns:
    :math:`g^P`, a scalar.

  Raises:
    ValueError: shapes that disagree.
  """
  hu = _checks.as_float_array("prior_penalty", "hu", hu, ndim=2)
  hv = _checks.as_float_array("prior_penalty", "hv", hv, ndim=2)
  if hu.shape != hv.shape:
    raise ValueError(f"prior_penalty: `hu` {tuple(hu.shape)} and `hv` {tuple(hv.shape)} must have the same shape")
  return gramian_penalty(gu, gv) - 2.0 * jnp.sum(hu * hv) + c


def low_rank_prior_penalty(u: ArrayLike, v: ArrayLike, q: ArrayLike, r: ArrayLike) -> jax.Array:
  r"""Exact penalty with a low-rank prior in Gramian form, :math:`O(n(k + k_P)^2)`.

  Exact :math:`g^P = \frac{1}{n^2}\sum_{i,j}(\langle u_i, v_j\rangle - \langle q_i, r_j\rangle)^2` in Gramian form,
  :math:`O(n(k + k_P)^2)`.

  Args:
    u: left embeddings, [n, k].
    v: right embeddings, [n, k].
    q: the prior's left factors, [n, k_P].
    r: the prior's right factors, [n, k_P].

  Returns:
    :math:`g^P`, a scalar.
  """
  return prior_penalty(
    gramian(u), gramian(v), cross_gramian(u, q), cross_gramian(v, r), gramian_penalty(gramian(q), gramian(r))
  )


def double_sum_penalty(
  u: ArrayLike, v: ArrayLike, mu: ArrayLike | None = None, nu: ArrayLike | None = None
) -> jax.Array:
  r"""Candidate-sampling penalty in double-sum form (eq. 13), :math:`O(k|B||B'|)`.

  The penalty is

  .. math::
    \tilde g = \frac{1}{|B||B'|} \sum_{i\in B}\sum_{j\in B'} \mu_i \nu_j \langle u_i, v_j \rangle^2.

  Args:
    u: the left embeddings, [B, k].
    v: the right embeddings, [B', k].
    mu: importance weights of the left rows, [B] (ones when None).
    nu: importance weights of the right rows, [B'] (ones when None).

  Returns:
    :math:`\tilde g`, a scalar.

  Raises:
    ValueError: widths that differ, or weights of another length.
  """
  fn = "double_sum_penalty"
  u, v = _rows(fn, "u", u), _rows(fn, "v", v)
  if u.shape[1] != v.shape[1]:
    raise ValueError(f"{fn}: `u` {tuple(u.shape)} and `v` {tuple(v.shape)} must share the embedding dimension k")
  mu = _row_weights(fn, "mu", mu, u.shape[0], u.dtype)
  nu = _row_weights(fn, "nu", nu, v.shape[0], u.dtype)
  scores = u @ v.T
  return jnp.sum(mu[:, None] * nu[None, :] * scores * scores) / (u.shape[0] * v.shape[0])


def gramian_form_penalty(
  u: ArrayLike, v: ArrayLike, mu: ArrayLike | None = None, nu: ArrayLike | None = None
) -> jax.Array:
  r"""The candidate-sampling penalty in Gramian form (eq. 14).

  The same candidate-sampling penalty in Gramian form (eq. 14), :math:`O(k^2 \max(|B|, |B'|))`: :math:`\langle
  \frac{1}{|B|}\sum \mu_i u_i \otimes u_i, \frac{1}{|B'|}\sum \nu_j v_j \otimes v_j\rangle`.

  Args:
    u: the left batch, [B, k].
    v: the right batch, [B', k].
    mu: importance weights of the left rows, [B] (ones when None).
    nu: importance weights of the right rows, [B'] (ones when None).

  Returns:
    The penalty, a scalar (equal to :func:`double_sum_penalty`).
  """
  return gramian_penalty(gramian(u, mu), gramian(v, nu))


def global_orthogonal_penalty(gu: ArrayLike, gv: ArrayLike) -> jax.Array:
  r"""Global Orthogonal Regularization in Gramian form (App. D, after Zhang et al. 2017).

  :math:`\max(\langle G_u, G_u\rangle, 1/k) + \max(\langle G_v, G_v\rangle, 1/k)`.

  Args:
    gu: the left Gramian, [k, k].
    gv: the right Gramian, [k, k].

  Returns:
    The penalty, a scalar.

  Raises:
    ValueError: Gramians of different shapes, or not matrices.
  """
  gu = _checks.as_float_array("global_orthogonal_penalty", "gu", gu, ndim=2)
  gv = _checks.as_float_array("global_orthogonal_penalty", "gv", gv, ndim=2)
  k = gu.shape[0]
  return jnp.maximum(jnp.sum(gu * gu), 1.0 / k) + jnp.maximum(jnp.sum(gv * gv), 1.0 / k)
