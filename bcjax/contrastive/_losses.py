r"""Contrastive losses of incremental contrastive learning (ICL).

InfoNCE (NCE-I), the change ratio and the unbiased Incremental InfoNCE (NCE-II), and InfoNCE over the grown data with
mixed old/new negatives.

With :math:`f(a, b) = \exp(\cos(z_a, z_b)/\tau)`, :math:`f^+_i = f(x_i, x_i^+)` and K negatives,

.. math::
  L^{I,S}_i = -\log \frac{f^+_i}{f^+_i + K\,\mathbb E_S f^-_i} \quad (1), \qquad
  r_i = \frac{f^+_i + K\,\mathbb E_{\Delta X} f^-_i}{f^+_i + K\,\mathbb E_X f^-_i} \quad (6), \qquad
  L^{II}_i = \log\big((1-\alpha) + \alpha\, r_i\big) \quad (8),

with :math:`\alpha = \Delta N / (N + \Delta N)`. Theorem 1 of the paper: for old :math:`x_i`,
:math:`L^{I,X'}_i = L^{I,X}_i + L^{II}_i`, so the ICL objective (eq. 9) trains old data with NCE-II and new data with
NCE-I over :math:`X' = X \cup \Delta X`. Expectations are estimated by sums over K sampled negatives, as in the
reference code. Everything is computed on log-similarities with log-sum-exp.

Shapes: anchors and positives [B, D]; extra negatives [M, D]; ``where`` [B] marks real anchors (padded rows add
nothing and are not used as negatives); ``negatives_where`` [M] marks real negatives. With ``axis_name`` the batch is
sharded over that mapped axis: in-batch and extra negatives are gathered from every device, so the denominators
sum over the global batch, and the mean runs over all real anchors.

Reference: Ji et al., "Unbiased and Efficient Self-Supervised Incremental Contrastive Learning", WSDM 2023
(arXiv 2301.12104); reference code RingBDStack/ICL-Incremental-InfoNCE.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax._reduce import row_mean, zero_padded

NEG_INF = -jnp.inf


def _normalise(z: jax.Array) -> jax.Array:
  # rsqrt of max(|z|², tiny): a zero row (e.g. a zeroed padded row) maps to 0 with a zero, not NaN, gradient.
  sq = jnp.sum(z * z, axis=-1, keepdims=True)
  return z * jax.lax.rsqrt(jnp.maximum(sq, jnp.asarray(1e-24, z.dtype)))


def _check_temperature(fn: str, temperature):
  """τ > 0 and finite; a traced τ (inside jit) is passed through."""
  if not _checks.is_concrete(temperature):
    return temperature
  tau = _checks.as_float_in(fn, "temperature", temperature, 0.0, math.inf, low_open=True, high_open=True)
  return tau


def log_similarity(a: ArrayLike, b: ArrayLike, *, temperature: float = 0.1) -> jax.Array:
  r""":math:`\log f(a_i, b_j) = \cos(a_i, b_j) / \tau`, [Ba, Bb], for rows a [Ba, D] and b [Bb, D]; τ > 0.

  Args:
    a: rows [Ba, D].
    b: rows [Bb, D].
    temperature: τ > 0.

  Returns:
    :math:`\log f(a_i, b_j)`, [Ba, Bb].

  Raises:
    ValueError: widths that differ, or τ <= 0.
  """
  fn = "log_similarity"
  temperature = _check_temperature(fn, temperature)
  a = _checks.as_float_array(fn, "a", a, ndim=2)
  b = _checks.as_float_array(fn, "b", b, ndim=2)
  if a.shape[1] != b.shape[1]:
    raise ValueError(f"{fn}: `a` {tuple(a.shape)} and `b` {tuple(b.shape)} must have the same dimension D")
  return _cosine_logits(a, b, temperature)


def _cosine_logits(a: jax.Array, b: jax.Array, temperature) -> jax.Array:
  return _normalise(a) @ _normalise(b).T / temperature


def _mask_rows(fn: str, name: str, x, mask_name: str, mask):
  """Validates a boolean row mask for x [n, D], checks x's valid rows for NaN/inf and zeroes its padded rows."""
  if mask is not None:
    mask = jnp.asarray(mask)
    if mask.shape != (x.shape[0],) or mask.dtype != jnp.bool_:
      raise ValueError(
        f"{fn}: `{mask_name}` must be a boolean vector of shape ({x.shape[0]},), got {tuple(mask.shape)} {mask.dtype}"
      )
  _checks.check_finite(fn, name, x, mask)
  return zero_padded(x, mask), mask


def _check(
  fn, anchor, positive, where, negatives=None, negatives_where=None, temperature=0.1
) -> tuple[jax.Array, jax.Array, jax.Array | None, Any, Any]:
  anchor = _checks.as_float_array(fn, "anchor", anchor, ndim=2, finite=False)
  positive = _checks.as_float_array(fn, "positive", positive, ndim=2, finite=False)
  if positive.shape != anchor.shape:
    raise ValueError(
      f"{fn}: `positive` has shape {tuple(positive.shape)} but `anchor` has {tuple(anchor.shape)}; "
      f"row i of both must be two views of sample i"
    )
  _check_temperature(fn, temperature)
  anchor, where = _mask_rows(fn, "anchor", anchor, "where", where)
  positive, _ = _mask_rows(fn, "positive", positive, "where", where)
  if negatives is not None:
    negatives = _checks.as_float_array(fn, "negatives", negatives, ndim=2, finite=False)
    if negatives.shape[1] != anchor.shape[1]:
      raise ValueError(
        f"{fn}: `negatives` has shape {tuple(negatives.shape)}; its rows must have the anchors' "
        f"dimension {anchor.shape[1]}"
      )
    negatives, negatives_where = _mask_rows(fn, "negatives", negatives, "negatives_where", negatives_where)
  return anchor, positive, where, negatives, negatives_where


def _check_alpha(fn: str, alpha) -> None:
  if _checks.is_concrete(alpha) and not 0.0 <= float(alpha) <= 1.0:
    raise ValueError(f"{fn}: `alpha` (the growth ratio ΔN/(N+ΔN)) must lie in [0, 1], got {float(alpha)}")


def _gather(x: jax.Array, axis_name: str | None) -> jax.Array:
  return x if axis_name is None else jax.lax.all_gather(x, axis_name, tiled=True)


def _row_offset(n: int, axis_name: str | None):
  return 0 if axis_name is None else jax.lax.axis_index(axis_name) * n


def _masked_logsumexp(logits: jax.Array, mask: jax.Array) -> jax.Array:
  """Row-wise log Σ_j exp(logits_ij) over mask_ij; −inf for a row without entries, with a zero (not NaN) gradient."""
  nonempty = jnp.any(mask, axis=-1)
  safe = jnp.where(nonempty[:, None], jnp.where(mask, logits, NEG_INF), 0.0)
  return jnp.where(nonempty, jax.scipy.special.logsumexp(safe, axis=-1), NEG_INF)


def _in_batch_terms(anchor, positive, where, temperature, axis_name):
  """(log f⁺ [B], in-batch log-similarities [B, B_global], mask of other real samples [B, B_global])."""
  all_pos = _gather(positive, axis_name)
  all_where = _gather(jnp.ones(anchor.shape[0], bool) if where is None else where, axis_name)
  logits = _cosine_logits(anchor, all_pos, temperature)
  own = _row_offset(anchor.shape[0], axis_name) + jnp.arange(anchor.shape[0])
  is_self = jnp.arange(all_pos.shape[0])[None, :] == own[:, None]
  log_pos = jnp.take_along_axis(logits, own[:, None], axis=1)[:, 0]
  return log_pos, logits, all_where[None, :] & ~is_self


def _extra_terms(anchor, negatives, negatives_where, temperature, axis_name):
  """Log Σ_k f(a_i, n_k) over the real extra negatives of every device, [B]."""
  negs = _gather(negatives, axis_name)
  mask = _gather(jnp.ones(negatives.shape[0], bool) if negatives_where is None else negatives_where, axis_name)
  return _masked_logsumexp(
    _cosine_logits(anchor, negs, temperature), jnp.broadcast_to(mask, (anchor.shape[0], negs.shape[0]))
  )


def info_nce(
  anchor: ArrayLike,
  positive: ArrayLike,
  *,
  negatives: ArrayLike | None = None,
  negatives_where: ArrayLike | None = None,
  temperature: float = 0.1,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""NCE-I (eq. 1), one direction as in the reference.

  :math:`-\log(f^+_i / (f^+_i + \sum_k f^-_{ik}))`, averaged over the real anchors.

  Without ``negatives`` the K = B − 1 negatives of anchor i are the other samples' positive views (the reference's
  in-batch form); with ``negatives`` [M, D] they are those rows instead (e.g. a noise set S).

  Args:
    anchor: the samples' embeddings, [B, D].
    positive: their augmented views :math:`x_i^+`, [B, D].
    negatives: negative rows [M, D] instead of the in-batch ones.
    negatives_where: mask of the real rows of ``negatives``, [M].
    temperature: τ > 0.
    where: mask of the real anchors, [B].
    axis_name: mapped axis the batch rows are split over; every sum runs over it.

  Returns:
    A scalar.
  """
  anchor, positive, where, negatives, negatives_where = _check(
    "info_nce", anchor, positive, where, negatives, negatives_where, temperature
  )
  log_pos, logits, others = _in_batch_terms(anchor, positive, where, temperature, axis_name)
  if negatives is None:
    log_neg = _masked_logsumexp(logits, others)
  else:
    log_neg = _extra_terms(anchor, negatives, negatives_where, temperature, axis_name)
  return row_mean(jnp.logaddexp(log_pos, log_neg) - log_pos, where, axis_name)


def log_change_ratio(
  anchor: ArrayLike,
  positive: ArrayLike,
  new_negatives: ArrayLike,
  *,
  new_negatives_where: ArrayLike | None = None,
  old_negatives: ArrayLike | None = None,
  old_negatives_where: ArrayLike | None = None,
  temperature: float = 0.1,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r""":math:`\log r_i` (eq. 6) per old anchor, [B].

  :math:`\log(f^+_i + \sum_k f(x_i, \Delta x_k)) - \log(f^+_i + \sum_k f(x_i, x_k))`.

  The new-data sum runs over ``new_negatives`` [M, D]; the old-data sum over ``old_negatives`` when given, else over
  the other old samples' positive views in the batch (the reference).

  Args:
    anchor: the old samples' embeddings :math:`x_i`, [B, D].
    positive: their augmented views :math:`x_i^+`, [B, D].
    new_negatives: embeddings of new samples :math:`\Delta x_k`, [M, D].
    new_negatives_where: mask of the real rows of ``new_negatives``, [M].
    old_negatives: embeddings of old samples :math:`x_k`, [M', D] (default: the other anchors' positive views).
    old_negatives_where: mask of the real rows of ``old_negatives``, [M'].
    temperature: τ > 0.
    where: mask of the real anchors, [B].
    axis_name: mapped axis the batch rows are split over; every sum runs over it.

  Returns:
    :math:`\log r_i`, [B].

  Raises:
    ValueError: shapes that disagree, or τ <= 0.
  """
  fn = "log_change_ratio"
  anchor, positive, where, new_negatives, new_negatives_where = _check(
    fn, anchor, positive, where, new_negatives, new_negatives_where, temperature
  )
  log_pos, logits, others = _in_batch_terms(anchor, positive, where, temperature, axis_name)
  log_new = _extra_terms(anchor, new_negatives, new_negatives_where, temperature, axis_name)
  if old_negatives is None:
    log_old = _masked_logsumexp(logits, others)
  else:
    _, _, _, old_negatives, old_negatives_where = _check(
      fn, anchor, positive, where, old_negatives, old_negatives_where, temperature
    )
    log_old = _extra_terms(anchor, old_negatives, old_negatives_where, temperature, axis_name)
  return jnp.logaddexp(log_pos, log_new) - jnp.logaddexp(log_pos, log_old)


def change_ratio(*args, **kwargs) -> jax.Array:
  """:math:`r_i` (eq. 6) per old anchor, [B]; arguments as :func:`log_change_ratio`.

  Args:
    *args: as :func:`log_change_ratio`.
    **kwargs: as :func:`log_change_ratio`.

  Returns:
    :math:`r_i`, [B].
  """
  return jnp.exp(log_change_ratio(*args, **kwargs))


def nce_ii_from_log_ratio(log_r: ArrayLike, alpha) -> jax.Array:
  r""":math:`\log((1-\alpha) + \alpha e^{\log r})` elementwise, stably (logaddexp).

  Exactly 0 when α = 0 or r = 1, with finite gradients at α ∈ {0, 1}.

  Args:
    log_r: :math:`\log r`, any shape.
    alpha: α ∈ [0, 1], a scalar or broadcastable to ``log_r``.

  Returns:
    The same shape as ``log_r``.
  """
  log_r = jnp.asarray(log_r)
  alpha = jnp.asarray(alpha, log_r.dtype)
  safe = jnp.clip(alpha, 1e-30, 1.0 - 1e-7)  # log(0) would make the gradient NaN through the unused branch
  mixed = jnp.logaddexp(jnp.log1p(-safe), jnp.log(safe) + log_r)
  return jnp.where(alpha <= 0.0, jnp.zeros_like(log_r), jnp.where(alpha >= 1.0, log_r, mixed))


def nce_ii(
  anchor: ArrayLike,
  positive: ArrayLike,
  new_negatives: ArrayLike,
  alpha,
  *,
  new_negatives_where: ArrayLike | None = None,
  old_negatives: ArrayLike | None = None,
  old_negatives_where: ArrayLike | None = None,
  temperature: float = 0.1,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""NCE-II (eq. 8) averaged over the real old anchors: :math:`\log((1-\alpha) + \alpha r_i)`.

  Minimised as written (no leading minus); its values sit near 0 and may be negative. Arguments as
  :func:`log_change_ratio`; ``alpha`` = ΔN/(N+ΔN) ∈ [0, 1].

  Args:
    anchor: the old samples' embeddings :math:`x_i`, [B, D].
    positive: their augmented views :math:`x_i^+`, [B, D].
    new_negatives: embeddings of new samples :math:`\Delta x_k`, [M, D].
    alpha: α = ΔN/(N+ΔN) ∈ [0, 1].
    new_negatives_where: mask of the real rows of ``new_negatives``, [M].
    old_negatives: embeddings of old samples :math:`x_k`, [M', D] (default: the other anchors' positive views).
    old_negatives_where: mask of the real rows of ``old_negatives``, [M'].
    temperature: τ > 0.
    where: mask of the real anchors, [B].
    axis_name: mapped axis the batch rows are split over; every sum runs over it.

  Returns:
    The mean over the real old anchors, a scalar.

  Raises:
    ValueError: α outside [0, 1], shapes that disagree, or τ <= 0.
  """
  _check_alpha("nce_ii", alpha)
  log_r = log_change_ratio(
    anchor,
    positive,
    new_negatives,
    new_negatives_where=new_negatives_where,
    old_negatives=old_negatives,
    old_negatives_where=old_negatives_where,
    temperature=temperature,
    where=where,
    axis_name=axis_name,
  )
  # `where` was validated by log_change_ratio.
  return row_mean(nce_ii_from_log_ratio(log_r, alpha), None if where is None else jnp.asarray(where), axis_name)


def old_negative_count(alpha: float, batch_size: int) -> int:
  r"""The number of old negatives per new anchor, :math:`\lfloor (1 - \alpha)(B - 1) \rfloor`.

  old_num = ⌊(1 − α)(B − 1)⌋: old negatives per new anchor, so the B − 1 negatives split as (1 − α) : α (a Monte-Carlo
  estimate of :math:`\mathbb E_{X'} = (1-\alpha)\mathbb E_X + \alpha \mathbb E_{\Delta X}`, Lemma 1). Computed in
  float64 like the reference (α = 0.7, B = 32 gives 9).

  Args:
    alpha: α ∈ [0, 1].
    batch_size: B.

  Returns:
    old_num, an int.

  Raises:
    ValueError: α outside [0, 1] or a batch size below 1.
  """
  _check_alpha("old_negative_count", alpha)
  batch_size = _checks.check_positive_int("old_negative_count", "batch_size", batch_size)
  return int(math.floor((1.0 - float(alpha)) * (batch_size - 1)))


def new_negative_mask(batch_size: int, new_num: int) -> jax.Array:
  r"""[B, B] mask of the in-batch new negatives of :func:`mixed_info_nce`.

  :math:`M_{ij} = (j \ne i) \wedge (j < n_{\rm new} + 1[i < n_{\rm new}])`, so every anchor gets exactly ``new_num`` of
  them (the reference).

  Args:
    batch_size: B.
    new_num: new negatives per anchor.

  Returns:
    The boolean mask M, [B, B].
  """
  return _new_negatives(jnp.arange(batch_size), jnp.arange(batch_size), new_num)


def _new_negatives(rows: jax.Array, columns: jax.Array, new_num: int) -> jax.Array:
  """:func:`new_negative_mask`'s rule on the samples' positions p in the batch.

  M_ij = (p_j != p_i) and (p_j < new_num + 1[p_i < new_num]).
  """
  i, j = rows[:, None], columns[None, :]
  return (j != i) & (j < new_num + (i < new_num))


def mixed_info_nce(
  anchor: ArrayLike,
  positive: ArrayLike,
  old_negatives: ArrayLike,
  new_num: int,
  *,
  old_negatives_where: ArrayLike | None = None,
  temperature: float = 0.1,
  where: ArrayLike | None = None,
  positions: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""NCE-I over :math:`X'` for new anchors (eq. 9's second term) with mixed negatives.

  ``new_num`` in-batch new negatives (:func:`new_negative_mask`) plus the ``old_negatives`` [old_num, D] drawn from the
  old data, where old_num = :func:`old_negative_count` and new_num = B − 1 − old_num. Averaged over the real anchors.

  The reference picks the new negatives by the samples' positions in the batch. ``positions`` [B] gives each row's
  position (default: its row index, offset by the rows of the devices before it under ``axis_name``); a batch split
  over devices whose blocks hold padding rows passes the real positions so that every anchor gets the negatives
  it would get on one device (padding rows are masked by ``where`` and never count).

  Args:
    anchor: the new samples' embeddings, [B, D].
    positive: their augmented views :math:`x_i^+`, [B, D].
    old_negatives: old samples' embeddings drawn from the old data, [old_num, D].
    new_num: in-batch new negatives per anchor, B − 1 − old_num.
    old_negatives_where: mask of the real rows of ``old_negatives``, [M'].
    temperature: τ > 0.
    where: mask of the real anchors, [B].
    positions: each row's position in the whole batch, [B] (default: its row index, offset by the rows of the devices
      before it).
    axis_name: mapped axis the batch rows are split over; every sum runs over it.

  Returns:
    The mean over the real anchors, a scalar.

  Raises:
    ValueError: shapes that disagree, τ <= 0, or ``new_num`` outside [0, B − 1].
  """
  fn = "mixed_info_nce"
  anchor, positive, where, old_negatives, old_negatives_where = _check(
    fn, anchor, positive, where, old_negatives, old_negatives_where, temperature
  )
  b = anchor.shape[0]
  if axis_name is None:
    try:
      new_num = _checks.as_int(fn, "new_num", new_num, low=0, high=b - 1)
    except (TypeError, ValueError):
      raise ValueError(f"{fn}: `new_num` must be an integer in [0, B-1] = [0, {b - 1}], got {new_num!r}") from None
  else:
    new_num = _checks.as_int(fn, "new_num", new_num, low=0)
  if positions is None:
    position = _row_offset(b, axis_name) + jnp.arange(b)
  else:
    position = jnp.asarray(positions)
    if position.shape != (b,) or not jnp.issubdtype(position.dtype, jnp.integer):
      raise ValueError(f"{fn}: `positions` must be [B] = [{b}] integers, got {position.shape} {position.dtype}")
  log_pos, logits, others = _in_batch_terms(anchor, positive, where, temperature, axis_name)
  log_new = _masked_logsumexp(logits, others & _new_negatives(position, _gather(position, axis_name), new_num))
  log_old = _extra_terms(anchor, old_negatives, old_negatives_where, temperature, axis_name)
  log_den = jnp.logaddexp(log_pos, jnp.logaddexp(log_new, log_old))
  return row_mean(log_den - log_pos, where, axis_name)


def icl_objective(nce_ii_mean: ArrayLike, nce_i_new_mean: ArrayLike, alpha) -> jax.Array:
  r"""The ICL objective (eq. 9) per sample, from the two batch means.

  The ICL objective (eq. 9) per sample: :math:`\frac{1}{N+\Delta N}\big(\sum_X L^{II} + \sum_{\Delta X} L^{I,X'}\big) =
  (1-\alpha)\,\bar L^{II} + \alpha\,\bar L^{I,X'}` from the two batch means.

  Args:
    nce_ii_mean: :math:`\bar L^{II}`, the batch mean of NCE-II over old anchors.
    nce_i_new_mean: :math:`\bar L^{I,X'}`, the batch mean of NCE-I over new anchors.
    alpha: α = ΔN/(N+ΔN) ∈ [0, 1].

  Returns:
    The objective, a scalar.

  Raises:
    ValueError: α outside [0, 1] (checked on concrete values).
  """
  _check_alpha("icl_objective", alpha)
  return (1.0 - alpha) * jnp.asarray(nce_ii_mean) + alpha * jnp.asarray(nce_i_new_mean)
