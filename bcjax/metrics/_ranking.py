r"""Top-K ranking metrics on dense score matrices (jittable).

For a query with relevant set R and the K highest-scoring eligible items :math:`i_1, \dots, i_K`:

.. math::
  \mathrm{Recall@K} = \frac{|\{i_1..i_K\} \cap R|}{|R|}, \qquad
  \mathrm{AP@K} = \frac{1}{\min(|R|, K)} \sum_{j=1}^{K} \mathbb 1[i_j \in R]\,
  \frac{|\{i_1..i_j\} \cap R|}{j}.

Items that are not eligible (``where=False``: e.g. the query's training items) are never ranked. Ties are broken
towards the lower item index, and two scores count as tied when they differ by no more than the rounding of the
scores themselves: :data:`TIE_ULPS` (16) units of the scores' precision relative to the query's largest absolute
eligible score, :math:`\tau_q = \mathrm{TIE\_ULPS} \cdot \epsilon \cdot \max_j |s_{qj}|`. Item a ranks above item b when
:math:`s_a > s_b + \tau_q`, or :math:`|s_a - s_b| \le \tau_q` and a < b. Why: two items with equal embeddings (the
same attributes and no edges of their own, a duplicated document) have equal scores in exact arithmetic, but a
summation order that changes with the batch split, the device count or the CPU's vector width makes them differ by a
unit in the last place, and a plain sort would let that rounding decide which of them enters the top K (a Recall@50
of 0.2139 on one device against 0.2117 on four). Queries without a relevant item get 0; average over the queries that
have one with :func:`mean_over_queries`.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bcjax import _checks

# Scores this many units of their precision apart (relative to the query's largest |score|) are ties: float32 scores
# of equal embeddings computed in another summation order differ by a few units, distinct items by far more.
TIE_ULPS = 16


def tie_tolerance(scores: jax.Array, where: jax.Array, axis: int | None = None) -> jax.Array:
  """The tie tolerance of ``scores`` under the module's rule.

  :data:`TIE_ULPS` units of their precision times the largest |score| where ``where`` holds (along ``axis``, kept as a
  broadcastable axis; all entries when None).
  """
  largest = jnp.max(jnp.where(where, jnp.abs(scores), 0), axis=axis, keepdims=axis is not None)
  return TIE_ULPS * jnp.finfo(scores.dtype).eps * largest


def _ranked_hits(fn: str, scores, relevant, k: int, where) -> tuple[jax.Array, jax.Array]:
  scores = _checks.as_float_array(fn, "scores", scores, ndim=2, finite=False)
  relevant = jnp.asarray(relevant)
  if relevant.shape != scores.shape or relevant.dtype != jnp.bool_:
    raise ValueError(
      f"{fn}: `relevant` must be a boolean mask of the scores' shape {tuple(scores.shape)}, got "
      f"{tuple(relevant.shape)} {relevant.dtype}"
    )
  try:
    k = _checks.as_int(fn, "k", k, low=1, high=scores.shape[1])
  except (TypeError, ValueError):
    raise ValueError(
      f"{fn}: `k` must be an integer in [1, {scores.shape[1]}] (the number of items), got {k!r}"
    ) from None
  if where is not None:
    where = jnp.asarray(where)
    if where.shape != scores.shape or where.dtype != jnp.bool_:
      raise ValueError(
        f"{fn}: `where` must be a boolean mask of shape {tuple(scores.shape)}, got {tuple(where.shape)} {where.dtype}"
      )
  # Ineligible entries are never ranked, so whatever they hold (inf, NaN) only matters where `where` is True.
  _checks.check_finite(fn, "scores", scores, where)
  if where is not None:
    relevant = relevant & where
    scores = jnp.where(where, scores, -jnp.inf)
  else:
    where = jnp.ones(scores.shape, bool)
  return _tie_robust_hits(scores, relevant, where, k)


def _tie_robust_hits(scores: jax.Array, relevant: jax.Array, where: jax.Array, k: int):
  """(hits [Q, k] in rank order, relevant count [Q]) under the module's tie rule.

  The top k is chosen in two parts: the items above the tie band of the k-th score (``s > s_k + tau``) and, of the
  band (``|s - s_k| <= tau``), the lowest item indices that fill the remaining places. The chosen items are then
  ordered pairwise by the same rule, and by (that position, index) so that the positions are a permutation even where
  near-ties do not chain transitively.
  """
  dtype = scores.dtype
  masked = jnp.where(where, scores, -jnp.inf)
  top_values, _ = jax.lax.top_k(masked, k)
  # the tie tolerance of each query: the rounding of its largest eligible score
  tau = tie_tolerance(scores, where, axis=1)
  cut = top_values[:, k - 1 :]
  has_k = jnp.isfinite(cut)  # fewer than k eligible items: every eligible item is in the top k
  above = where & (masked > cut + tau)
  band = where & (jnp.abs(masked - cut) <= tau)
  slots = k - jnp.sum(above, axis=1, keepdims=True)
  band_rank = jnp.cumsum(band, axis=1) - 1  # the lower item index first
  chosen = jnp.where(has_k, above | (band & (band_rank < slots)), where)
  # The chosen items (at most k) with their scores, then their positions under the tie rule.
  chosen_scores, top = jax.lax.top_k(jnp.where(chosen, scores, -jnp.inf), k)
  present = jnp.take_along_axis(chosen, top, axis=1)
  s_a, s_b, t = chosen_scores[:, :, None], chosen_scores[:, None, :], tau[:, :, None]
  i_a, i_b = top[:, :, None], top[:, None, :]
  before = present[:, None, :] & ((s_b > s_a + t) | ((jnp.abs(s_b - s_a) <= t) & (i_b < i_a)))
  position = jnp.sum(before, axis=2)
  p_a, p_b = position[:, :, None], position[:, None, :]
  position = jnp.sum(present[:, None, :] & ((p_b < p_a) | ((p_b == p_a) & (i_b < i_a))), axis=2)
  position = jnp.where(present, position, k)  # absent slots (fewer than k eligible) go past the end
  is_hit = jnp.take_along_axis(relevant, top, axis=1) & present
  # hits in rank order: slot j holds whether the item at position j is relevant
  hits = (
    jnp.zeros(scores.shape[:1] + (k + 1,), dtype)
    .at[jnp.arange(scores.shape[0])[:, None], position]
    .add(is_hit.astype(dtype))[:, :k]
  )
  return hits, jnp.sum(relevant, axis=1).astype(dtype)


def _recall(hits, n_rel, k: int):
  return jnp.sum(hits[:, :k], axis=1) / jnp.maximum(n_rel, 1)


def _average_precision(hits, n_rel, k: int):
  hits = hits[:, :k]
  precision = jnp.cumsum(hits, axis=1) / jnp.arange(1, k + 1, dtype=hits.dtype)
  return jnp.sum(precision * hits, axis=1) / jnp.maximum(jnp.minimum(n_rel, k), 1)


def recall_at_k(scores: ArrayLike, relevant: ArrayLike, k: int, *, where: ArrayLike | None = None) -> jax.Array:
  """Recall@K per query, [Q]: the share of the eligible relevant items ranked in the top K.

  Args:
    scores: [Q, N] query-item scores.
    relevant: [Q, N] boolean, the query's relevant (e.g. held-out) items.
    k: the cut-off K.
    where: [Q, N] boolean eligibility (e.g. False on the query's training items).

  Returns:
    Recall@K, [Q].
  """
  return _recall(*_ranked_hits("recall_at_k", scores, relevant, k, where), k)


def average_precision_at_k(
  scores: ArrayLike, relevant: ArrayLike, k: int, *, where: ArrayLike | None = None
) -> jax.Array:
  """AP@K per query, [Q] (MAP@K is its mean over queries); arguments as in :func:`recall_at_k`.

  Args:
    scores: per-query item scores, [Q, N].
    relevant: which items are relevant to each query, [Q, N] bool.
    k: K, the cut-off.
    where: which items each query may rank, [Q, N] (default all).

  Returns:
    AP@K, [Q].
  """
  return _average_precision(*_ranked_hits("average_precision_at_k", scores, relevant, k, where), k)


def ranking_metrics(
  scores: ArrayLike, relevant: ArrayLike, ks, *, where: ArrayLike | None = None
) -> dict[str, jax.Array]:
  """``{"recall@K": [Q], "map@K": [Q]}`` for every K of ``ks`` from a single top-K pass.

  ``{"recall@K": [Q], "map@K": [Q]}`` for every K of ``ks`` from a single top-K pass at the largest K (the top K of a
  tie-stable ranking is the head of its top K' for K <= K'), so scoring a large corpus at several cut-offs costs one
  ranking; arguments as in :func:`recall_at_k`.
  """
  ks = tuple(ks)
  hits, n_rel = _ranked_hits("ranking_metrics", scores, relevant, max(ks), where)
  out = {}
  for k in ks:
    out[f"recall@{k}"] = _recall(hits, n_rel, k)
    out[f"map@{k}"] = _average_precision(hits, n_rel, k)
  return out


def mean_over_queries(values: ArrayLike, relevant: ArrayLike) -> jax.Array:
  """The mean of per-query ``values`` [Q] over the queries with at least one relevant item ([Q, N] mask).

  Args:
    values: per-query values, [Q].
    relevant: the relevance mask, [Q, N].

  Returns:
    The mean, a scalar.

  Raises:
    ValueError: no query has a relevant item (the mean is undefined; no NaN is returned).
  """
  has = jnp.any(jnp.asarray(relevant), axis=1)
  if _checks.is_concrete(has) and not bool(jnp.any(has)):
    raise ValueError("mean_over_queries: no query has a relevant item")
  return jnp.sum(jnp.where(has, values, 0.0)) / jnp.maximum(jnp.sum(has), 1)
