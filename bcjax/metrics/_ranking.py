r"""Top-K ranking metrics on dense score matrices (jittable).

For a query with relevant set R and the K highest-scoring eligible items :math:`i_1, \dots, i_K`:

.. math::
  \mathrm{Recall@K} = \frac{|\{i_1..i_K\} \cap R|}{|R|}, \qquad
  \mathrm{AP@K} = \frac{1}{\min(|R|, K)} \sum_{j=1}^{K} \mathbb 1[i_j \in R]\,
  \frac{|\{i_1..i_j\} \cap R|}{j}.

Items that are not eligible (``where=False``: e.g. the query's training items) are never ranked. Ties are broken
towards the lower item index (``jax.lax.top_k``). Queries without a relevant item get 0; average over the queries
that have one with :func:`mean_over_queries`.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bcjax import _checks


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
  _, top = jax.lax.top_k(scores, k)
  hits = jnp.take_along_axis(relevant, top, axis=1)
  if where is not None:  # fewer than k eligible items: -inf entries are not ranked
    hits = hits & jnp.take_along_axis(where, top, axis=1)
  return hits.astype(scores.dtype), jnp.sum(relevant, axis=1).astype(scores.dtype)


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
  """
  return _recall(*_ranked_hits("recall_at_k", scores, relevant, k, where), k)


def average_precision_at_k(
  scores: ArrayLike, relevant: ArrayLike, k: int, *, where: ArrayLike | None = None
) -> jax.Array:
  """AP@K per query, [Q] (MAP@K is its mean over queries); arguments as in :func:`recall_at_k`."""
  return _average_precision(*_ranked_hits("average_precision_at_k", scores, relevant, k, where), k)


def ranking_metrics(
  scores: ArrayLike, relevant: ArrayLike, ks, *, where: ArrayLike | None = None
) -> dict[str, jax.Array]:
  """``{"recall@K": [Q], "map@K": [Q]}`` for every K of ``ks`` from a single top-K pass at the largest K (the top K
  of a tie-stable ranking is the head of its top K' for K <= K'), so scoring a large corpus at several cut-offs costs
  one ranking; arguments as in :func:`recall_at_k`."""
  ks = tuple(ks)
  hits, n_rel = _ranked_hits("ranking_metrics", scores, relevant, max(ks), where)
  out = {}
  for k in ks:
    out[f"recall@{k}"] = _recall(hits, n_rel, k)
    out[f"map@{k}"] = _average_precision(hits, n_rel, k)
  return out


def mean_over_queries(values: ArrayLike, relevant: ArrayLike) -> jax.Array:
  """The mean of per-query ``values`` [Q] over the queries with at least one relevant item ([Q, N] mask).

  Raises:
    ValueError: no query has a relevant item (the mean is undefined; no NaN is returned).
  """
  has = jnp.any(jnp.asarray(relevant), axis=1)
  if _checks.is_concrete(has) and not bool(jnp.any(has)):
    raise ValueError("mean_over_queries: no query has a relevant item")
  return jnp.sum(jnp.where(has, values, 0.0)) / jnp.maximum(jnp.sum(has), 1)
