"""Chunked retrieval evaluation of embedding models: exact full-corpus Recall@K and MAP@K against a candidate set.

Scores are dot products of query embeddings [Q, k] with item embeddings [N, k]; relevance and exclusion are given
as sparse (query, item) pairs, turned into dense masks one chunk of queries at a time so memory stays
O(chunk x items).
"""

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bcjax import _checks
from bcjax._buckets import bucket_size, pad_to_bucket
from bcjax._device import device_array
from bcjax.metrics._ranking import ranking_metrics


def _indices(name: str, values) -> np.ndarray:
  """An integer index vector; floats are refused because casting would truncate 2.7 to 2 without a word."""
  arr = np.asarray(values)
  if arr.size == 0:
    return arr.astype(np.int64).reshape(-1) if arr.ndim <= 1 else arr.astype(np.int64)
  if not np.issubdtype(arr.dtype, np.integer):
    raise TypeError(f"evaluate_retrieval: `{name}` must hold integer indices, got dtype {arr.dtype}")
  return arr.astype(np.int64)


def _pairs(name: str, pairs, num_queries: int, num_items: int) -> tuple[np.ndarray, np.ndarray]:
  try:
    q, i = pairs
  except (TypeError, ValueError):
    raise ValueError(f"evaluate_retrieval: `{name}` must be a pair (query indices, item indices)") from None
  q, i = _indices(f"{name}[0]", q), _indices(f"{name}[1]", i)
  if q.shape != i.shape or q.ndim != 1:
    raise ValueError(f"evaluate_retrieval: `{name}` must be two equal-length index vectors, got {q.shape}, {i.shape}")
  if q.size and (q.min() < 0 or q.max() >= num_queries or i.min() < 0 or i.max() >= num_items):
    raise ValueError(
      f"evaluate_retrieval: `{name}` indexes outside [0, {num_queries}) x [0, {num_items}): queries "
      f"span [{q.min()}, {q.max()}], items [{i.min()}, {i.max()}]"
    )
  return q, i


# Scores of one chunk are [rows, items]; chunks of a large corpus hold fewer queries so that a chunk's score matrix and
# masks stay near 2^28 entries (1 GiB of float32 scores) whatever the corpus size.
_CHUNK_ENTRIES = 1 << 28


def _padded_pairs(rows: np.ndarray, cols: np.ndarray, fill_row: int) -> tuple[jax.Array, jax.Array]:
  """(row, column) index pairs padded to a power of two.

  (row, column) index pairs padded to a power of two with the out-of-range row ``fill_row`` (dropped by the scatter), so
  the compiles stay one per octave of pair counts.
  """
  size = bucket_size(len(rows))
  pad = size - len(rows)
  return (
    device_array(np.concatenate([rows, np.full(pad, fill_row)]), jnp.int32),
    device_array(np.concatenate([cols, np.zeros(pad, cols.dtype)]), jnp.int32),
  )


@jax.jit
def _take_rows(x, rows):
  return x[rows]


@functools.partial(jax.jit, static_argnames=("ks", "rank_excluded_relevant"))
def _chunk_values(
  all_queries, query_rows, items, num_valid, rel_pairs, exc_pairs, is_candidate, ks, rank_excluded_relevant
):
  """Per-query Recall@K and AP@K [rows] of one chunk of queries for every K, in one program.

  Per-query Recall@K and AP@K [rows] of one chunk of queries (``query_rows`` of ``all_queries``) for every K, in one
  program. The relevance and eligibility masks are scattered here from sparse (row, column) pairs rather than shipped
  dense from the host; rows from ``num_valid`` on are padding with no relevant and no eligible item (they hold 0).
  """
  queries = all_queries[query_rows]
  rows, num_items = queries.shape[0], items.shape[0]
  rel = jnp.zeros((rows, num_items), bool).at[rel_pairs].set(True, mode="drop")
  valid = jnp.arange(rows) < num_valid
  eligible = (valid[:, None] & is_candidate[None, :]).at[exc_pairs].set(False, mode="drop")
  if rank_excluded_relevant:
    eligible = eligible | rel
    undercount = jnp.ones(rows, queries.dtype)
  else:  # recall_at_k divides by the eligible relevant items; rescale to all relevant items
    undercount = (jnp.sum(rel & eligible, axis=1) / jnp.maximum(jnp.sum(rel, axis=1), 1)).astype(queries.dtype)
  per_query = ranking_metrics(queries @ items.T, rel, ks, where=eligible)
  return {name: value * undercount if name.startswith("recall") else value for name, value in per_query.items()}


def evaluate_retrieval(
  query_embeddings,
  item_embeddings,
  relevant,
  *,
  exclude=None,
  ks: Sequence[int] = (10,),
  candidates=None,
  chunk_size: int = 1024,
  rank_excluded_relevant: bool = True,
  per_query: bool = False,
) -> dict:
  r"""Recall@K and MAP@K averaged over the queries that have a relevant item.

  Args:
    query_embeddings: [Q, k].
    item_embeddings: [N, k].
    relevant: (query index [R], item index [R]) of the held-out pairs.
    exclude: (query index, item index) pairs never ranked (the training pairs); a pair that is also relevant
      stays eligible unless ``rank_excluded_relevant`` is False.
    ks: cut-offs.
    candidates: item indices to rank against (the paper's MAP@10 uses 50K random candidates); each query's
      relevant items are always added. None ranks the full corpus (exact metrics).
    chunk_size: queries scored at a time.
    rank_excluded_relevant: False follows BC-Aligner's reference evaluation: a relevant item that is also excluded
      (a re-interaction with a training item) is not ranked but still counts in the Recall@K denominator, so
      Recall@K = :math:`|\mathrm{top}\,K \cap R| / |R|` over all distinct relevant items R.
    per_query: also return each evaluated query's values, for paired tests between two models on the same queries
      (e.g. :func:`paired_bootstrap` over the queries).

  Returns:
    ``{"recall@K": ..., "map@K": ..., "queries": number evaluated}``, the means in float64; with ``per_query``,
    also ``"query_ids"`` (the evaluated queries, ascending, [Q']) and ``"per_query"`` (``{"recall@K": [Q'], ...}``
    in the order of ``query_ids``).

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for embeddings that are not [Q, k] and [N, k], no relevant pair, candidates out of
      range, or no cut-off.
  """
  fn = "evaluate_retrieval"
  queries = _checks.as_float_array(fn, "query_embeddings", query_embeddings, ndim=2)
  items = _checks.as_float_array(fn, "item_embeddings", item_embeddings, ndim=2)
  if queries.shape[1] != items.shape[1]:
    raise ValueError(f"{fn}: embeddings must be [Q, k] and [N, k], got {queries.shape}, {items.shape}")
  chunk_size = _checks.check_positive_int(fn, "chunk_size", chunk_size)
  num_q, num_items = queries.shape[0], items.shape[0]
  rel_q, rel_i = _pairs("relevant", relevant, num_q, num_items)
  if rel_q.size == 0:
    raise ValueError("evaluate_retrieval: no relevant pairs")
  exc_q, exc_i = _pairs("exclude", exclude if exclude is not None else ([], []), num_q, num_items)
  if candidates is not None:
    candidates = np.unique(_indices("candidates", candidates))
    if candidates.size and (candidates.min() < 0 or candidates.max() >= num_items):
      raise ValueError(f"evaluate_retrieval: `candidates` must index items in [0, {num_items})")
    universe = np.union1d(candidates, rel_i)  # only these items are ever scored
  else:
    universe = np.arange(num_items)
  column = np.full(num_items, -1, np.int64)
  column[universe] = np.arange(len(universe))
  try:
    ks = tuple(_checks.as_int(fn, "ks", k, low=1, high=len(universe)) for k in ks)
  except (TypeError, ValueError):
    raise ValueError(
      f"{fn}: every K in `ks` must be an integer in [1, {len(universe)}] (the ranked items), got {tuple(ks)!r}"
    ) from None
  if not ks:
    raise ValueError(f"{fn}: `ks` is empty; give at least one cut-off K")
  items_u = items if candidates is None else _take_rows(items, device_array(universe))
  is_candidate = np.zeros(len(universe), bool)
  is_candidate[column[candidates] if candidates is not None else slice(None)] = True
  if isinstance(item_embeddings, np.ndarray) and candidates is None:
    # Host embeddings (one evaluation per model version, each with its own item count) are padded to a power of two
    # with items that are never candidates, and the queries likewise: one compiled chunk per octave of sizes.
    items_u, candidate_mask = pad_to_bucket((item_embeddings, is_candidate), (0.0, False))
  else:
    candidate_mask = device_array(is_candidate)
  if isinstance(query_embeddings, np.ndarray):
    (queries,) = pad_to_bucket((query_embeddings,), (0.0,))
  chunk_size = min(chunk_size, max(1, _CHUNK_ENTRIES // len(universe)))
  eval_queries = np.unique(rel_q)
  chunks: dict[str, list[np.ndarray]] = {f"{m}@{k}": [] for k in ks for m in ("recall", "map")}
  for start in range(0, len(eval_queries), chunk_size):
    chunk = eval_queries[start : start + chunk_size]
    # The last (or only) chunk is padded to a power of two with rows that have no relevant and no eligible item:
    # they hold 0 and are dropped, and the chunk shapes, hence the compiles, stay few.
    rows = min(bucket_size(len(chunk)), chunk_size) if len(eval_queries) > chunk_size else bucket_size(len(chunk))
    rows = max(rows, len(chunk))
    row = np.full(num_q, -1, np.int64)
    row[chunk] = np.arange(len(chunk))
    sel = row[rel_q] >= 0
    rel_pairs = _padded_pairs(row[rel_q[sel]], column[rel_i[sel]], rows)
    sel = (row[exc_q] >= 0) & (column[exc_i] >= 0)
    exc_pairs = _padded_pairs(row[exc_q[sel]], column[exc_i[sel]], rows)
    query_rows = np.concatenate([chunk, np.full(rows - len(chunk), chunk[0])])
    chunk_values = _chunk_values(
      queries,
      device_array(query_rows),
      items_u,
      len(chunk),
      rel_pairs,
      exc_pairs,
      candidate_mask,
      ks,
      rank_excluded_relevant,
    )
    for name, value in jax.device_get(chunk_values).items():
      chunks[name].append(np.asarray(value[: len(chunk)], np.float64))
  values = {name: np.concatenate(v) for name, v in chunks.items()}
  out: dict[str, Any] = {name: float(np.mean(v)) for name, v in values.items()}
  out["queries"] = int(len(eval_queries))
  if per_query:
    out["query_ids"], out["per_query"] = eval_queries, values
  return out
