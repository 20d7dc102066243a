r"""Brute-force top-k search for judging a bridged query against an old index.

Exact, streamed over the index in row chunks (an index larger than memory is read once) and blocked over queries.

Scores: ``cosine`` (dot product of L2-normalised rows), ``dot``, or ``l2`` (:math:`-\lVert q - x \rVert^2`, ranked
as :math:`2 q\cdot x - \lVert x \rVert^2`). Ties are broken towards the lower item id, as ``jax.lax.top_k`` does.
"""

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bcjax._buckets import bucket_size
from bcjax._device import device_array
from bcjax.upgrade import _files
from bcjax.upgrade._files import DEFAULT_CHUNK_ROWS

METRICS = ("cosine", "dot", "l2")
# Query rows per chunk: a chunk's scores stay near 2^26 entries (256 MiB of float32) whatever the index size.
_CHUNK_ENTRIES = 1 << 26


def _prepare(x: np.ndarray, metric: str) -> np.ndarray:
  x = np.asarray(x, np.float32)
  if metric == "cosine":
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norm > 0, norm, 1.0)
  return x


@functools.partial(jax.jit, static_argnames=("k", "l2"))
def _merge_top_k(queries, items, item_sq, item_bias, valid, offset, best_scores, best_ids, *, k, l2):
  """The k best of (the running best, this chunk of items).

  The running best comes first and holds only lower ids, so ties still go to the lower id.
  """
  scores = queries @ items.T
  if l2:
    scores = 2.0 * scores - item_sq[None, :]
  scores = scores - item_bias[None, :]
  scores = jnp.where(jnp.arange(items.shape[0])[None, :] < valid, scores, -jnp.inf)
  ids = offset + jnp.arange(items.shape[0], dtype=best_ids.dtype)
  all_scores = jnp.concatenate([best_scores, scores], axis=1)
  all_ids = jnp.concatenate([best_ids, jnp.broadcast_to(ids, scores.shape)], axis=1)
  top, where = jax.lax.top_k(all_scores, k)
  return top, jnp.take_along_axis(all_ids, where, axis=1)


def top_k(
  queries: np.ndarray,
  items: np.ndarray,
  k: int,
  *,
  metric: str = "cosine",
  chunk_rows: int = DEFAULT_CHUNK_ROWS,
  item_bias: np.ndarray | None = None,
) -> np.ndarray:
  """Ids [Q, k] of each query's k best-scoring items (best first), exact, in float32.

  ``item_bias`` [N], when given, is subtracted from every score of its item (a hubness correction,
  :mod:`bcjax.upgrade._hubness`).

  ``items`` may be a memory map larger than memory: it is read ``chunk_rows`` rows at a time, once, and each chunk's
  scores are merged into every query's running top k, so memory stays bounded by the chunk and the queries (a
  block of queries at a time keeps each score matrix near 2^26 entries).

  Args:
    queries: query rows, [Q, D].
    items: item rows, [N, D] (an array or a memory map).
    k: results per query.
    metric: ``cosine``, ``dot`` or ``l2``.
    chunk_rows: item rows read at a time.
    item_bias: subtracted from every score of its item, [N].

  Returns:
    The ids, [Q, k].

  Raises:
    ValueError: shapes that disagree, k outside [1, N], or an unknown metric.
  """
  return top_k_many([queries], items, k, metric=metric, chunk_rows=chunk_rows, item_bias=item_bias)[0]


def top_k_many(
  query_sets: Sequence[np.ndarray],
  items: np.ndarray,
  k: int,
  *,
  metric: str = "cosine",
  chunk_rows: int = DEFAULT_CHUNK_ROWS,
  item_bias: np.ndarray | Callable[[np.ndarray], np.ndarray] | None = None,
  biased: Sequence[bool] | None = None,
) -> list[np.ndarray]:
  """:func:`top_k` of several query sets in one read of ``items``: each chunk is scored against every set.

  Args:
    query_sets: query rows, one [Q_i, D] array per set.
    items: item rows, [N, D] (an array or a memory map), read ``chunk_rows`` rows at a time, once.
    k: results per query.
    metric: ``cosine``, ``dot`` or ``l2``.
    chunk_rows: item rows read at a time.
    item_bias: subtracted from every score of its item: [N] values, or a function of a chunk's rows as read (e.g.
      a hubness correction's bias, computed in the same read).
    biased: which sets have ``item_bias`` subtracted (default: every set).

  Returns:
    Each set's ids, [Q_i, k].

  Raises:
    ValueError: shapes that disagree, k outside [1, N], or an unknown metric.
  """
  if metric not in METRICS:
    raise ValueError(f"top_k: `metric` must be one of {list(METRICS)}, got {metric!r}")
  if not 1 <= k <= items.shape[0]:
    raise ValueError(f"top_k: `k` must lie in [1, {items.shape[0]}] (the items), got {k}")
  if chunk_rows < 1:
    raise ValueError(f"top_k: `chunk_rows` must be >= 1, got {chunk_rows}")
  n_items = items.shape[0]
  bias_of = _chunk_bias(item_bias if callable(item_bias) else _check_bias("top_k", item_bias, n_items))
  biased = [True] * len(query_sets) if biased is None else list(biased)
  chunk_rows = min(chunk_rows, n_items)
  size = bucket_size(chunk_rows)  # every chunk padded to one shape: one compile per octave of chunk sizes
  rows = max(1, min(_CHUNK_ENTRIES // size, 4096))
  sets = [_QueryBlocks(_prepare(q, metric), rows, k) for q in query_sets]
  with _files.chunk_reader(items) as read:
    for chunk in _files.chunks(n_items, chunk_rows):
      raw = read(chunk)
      x = _prepare(raw, metric)
      valid = x.shape[0]
      x_dev = device_array(np.pad(x, ((0, size - valid), (0, 0))))
      item_sq = jnp.sum(x_dev * x_dev, axis=1)
      chunk_bias = device_array(np.pad(np.asarray(bias_of(raw, chunk), np.float32), (0, size - valid)))
      no_bias = device_array(np.zeros(size, np.float32))
      for blocks, use_bias in zip(sets, biased):
        b = chunk_bias if use_bias else no_bias
        blocks.best = [
          _merge_top_k(p, x_dev, item_sq, b, valid, chunk.start, *best, k=k, l2=metric == "l2")
          for p, best in zip(blocks.padded, blocks.best)
        ]
      # Dispatch is asynchronous: without waiting, reading runs ahead of the matrix products and every chunk read
      # stays alive in the queue (a 15 GB index grew the process to 16 GB). One chunk in flight bounds memory.
      jax.block_until_ready([blocks.best for blocks in sets])
  return [blocks.ids() for blocks in sets]


class _QueryBlocks:
  """One query set in blocks padded to powers of two, with each block's running top k (scores, ids)."""

  def __init__(self, q: np.ndarray, rows: int, k: int):
    self.blocks = [slice(s, min(s + rows, q.shape[0])) for s in range(0, q.shape[0], rows)]
    self.padded = [
      device_array(np.pad(q[b], ((0, bucket_size(b.stop - b.start) - (b.stop - b.start)), (0, 0)))) for b in self.blocks
    ]
    # ids in int32: an index of 2^31 rows would be terabytes; the placeholders (score -inf) are always displaced.
    self.best = [
      (device_array(np.full((p.shape[0], k), -np.inf, np.float32)), device_array(np.zeros((p.shape[0], k), np.int32)))
      for p in self.padded
    ]
    self.rows, self.k = q.shape[0], k

  def ids(self) -> np.ndarray:
    out = np.empty((self.rows, self.k), np.int64)
    for b, (_, ids) in zip(self.blocks, self.best):
      out[b] = np.asarray(ids)[: b.stop - b.start]
    return out


def _chunk_bias(bias) -> Callable[[np.ndarray, slice], np.ndarray]:
  """A chunk's bias from the chunk's rows as read (``bias`` a function of them) or from [N] values (``bias[chunk]``)."""
  if callable(bias):
    return lambda raw, chunk: bias(raw)
  return lambda raw, chunk: bias[chunk]


def _check_bias(fn: str, item_bias, n_items: int) -> np.ndarray:
  if item_bias is None:
    return np.zeros(n_items, np.float32)
  bias = np.asarray(item_bias, np.float32)
  if bias.shape != (n_items,) or not np.isfinite(bias).all():
    raise ValueError(f"{fn}: `item_bias` must be finite with one value per item, shape ({n_items},); got {bias.shape}")
  return bias


def own_vector_hits(
  mapped: np.ndarray,
  targets: np.ndarray,
  distractors: np.ndarray | None = None,
  *,
  k: int,
  metric: str = "cosine",
  item_bias: np.ndarray | None = None,
) -> np.ndarray:
  """For each row i, whether ``targets[i]`` is among the k items scoring best for ``mapped[i]``.

  For each row i, whether ``targets[i]`` is among the k items scoring best for ``mapped[i]`` when the items are all the
  targets plus the ``distractors`` (e.g. an old index): [n] bools. A label-free measure of a bridge: the mapped new
  embedding of an item should find that item's old embedding. ``item_bias``: one value per item (the targets', then the
  distractors'), subtracted from its scores.
  """
  items = targets if distractors is None or len(distractors) == 0 else np.concatenate([targets, distractors])
  k = min(k, items.shape[0])
  found = top_k(mapped, items, k, metric=metric, item_bias=item_bias)
  return (found == np.arange(mapped.shape[0])[:, None]).any(axis=1)


def neighbour_agreement(
  mapped: np.ndarray,
  old_queries: np.ndarray,
  index: np.ndarray,
  *,
  k: int,
  metric: str = "cosine",
  chunk_rows: int = DEFAULT_CHUNK_ROWS,
  item_bias: np.ndarray | None = None,
) -> np.ndarray:
  """Per query, the share of the old model's top k that the mapped query also ranks in its top k.

  For each query, the share of the old model's top k in ``index`` (``old_queries[i]``'s) that the mapped query also
  ranks in its top k (with ``item_bias`` subtracted from the mapped queries' scores): [Q] floats in [0, 1].
  """
  k = min(k, index.shape[0])
  mine, theirs = top_k_many(
    [mapped, old_queries], index, k, metric=metric, chunk_rows=chunk_rows, item_bias=item_bias, biased=[True, False]
  )  # one read of the index for both
  return overlap(mine, theirs)


def overlap(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
  """Per row, the share of ``theirs`` [Q, k] ids that ``mine`` [Q, k] holds too: [Q] floats in [0, 1]."""
  return np.array([len(np.intersect1d(a, b)) for a, b in zip(mine, theirs)], np.float64) / theirs.shape[1]


def recall_per_query(
  queries: np.ndarray,
  index: np.ndarray,
  relevant: list[np.ndarray],
  *,
  k: int,
  metric: str = "cosine",
  chunk_rows: int = DEFAULT_CHUNK_ROWS,
  item_bias: np.ndarray | None = None,
) -> np.ndarray:
  """Recall@k of each query [Q].

  The share of its ``relevant`` index ids found in its top k (``item_bias`` subtracted from the scores).
  """
  found = top_k(queries, index, min(k, index.shape[0]), metric=metric, chunk_rows=chunk_rows, item_bias=item_bias)
  return recall_of(found, relevant)


def recall_of(found: np.ndarray, relevant: list[np.ndarray]) -> np.ndarray:
  """Recall of each row of ``found`` [Q, k] ids: the share of its ``relevant`` ids among them, [Q]."""
  return np.array([np.isin(rel, f).mean() for f, rel in zip(found, relevant)], np.float64)


def own_vector_ranks(
  mapped: np.ndarray,
  targets: np.ndarray,
  distractors: np.ndarray | None = None,
  *,
  metric: str = "cosine",
  item_bias: np.ndarray | None = None,
) -> np.ndarray:
  """For each row i, the share of the other items that ``mapped[i]`` scores below ``targets[i]``.

  For each row i, the share of the other items (the other targets and the ``distractors``) that ``mapped[i]`` scores
  below ``targets[i]`` (ties count half): [n] in [0, 1], 1 when row i ranks its own target first, about 0.5 for a map
  that ranks at random. A continuous, label-free retrieval measure for choosing between maps. ``item_bias``: one value
  per item (targets, then distractors) subtracted from its scores.

  Args:
    mapped: mapped new-model rows, [n, D].
    targets: each row's own old vector, [n, D].
    distractors: more old vectors scored against, [m, D] (e.g. a sample of the index).
    metric: ``cosine``, ``dot`` or ``l2``.
    item_bias: subtracted from every score of its item, [n + m] (targets first).

  Returns:
    The shares, [n] in [0, 1].

  Raises:
    ValueError: shapes that disagree or an unknown metric.
  """
  if metric not in METRICS:
    raise ValueError(f"own_vector_ranks: `metric` must be one of {list(METRICS)}, got {metric!r}")
  items = targets if distractors is None or len(distractors) == 0 else np.concatenate([targets, distractors])
  bias = _check_bias("own_vector_ranks", item_bias, items.shape[0]).astype(np.float64)
  n, others = mapped.shape[0], items.shape[0] - 1
  if others < 1:
    return np.full(n, 0.5)
  q, x = _prepare(mapped, metric).astype(np.float64), _prepare(items, metric).astype(np.float64)
  item_sq = np.sum(x * x, axis=1)
  out = np.empty(n)
  for start in range(0, n, 512):
    rows = np.arange(start, min(start + 512, n))
    scores = q[rows] @ x.T
    if metric == "l2":
      scores = 2.0 * scores - item_sq[None, :]
    scores = scores - bias[None, :]
    own = scores[np.arange(len(rows)), rows][:, None]
    out[rows] = (np.sum(scores < own, axis=1) + 0.5 * (np.sum(scores == own, axis=1) - 1)) / others
  return out


def own_vector_rank_score(mapped: np.ndarray, targets: np.ndarray, *, metric: str = "cosine") -> float:
  """The mean of :func:`own_vector_ranks` with the targets as the only items."""
  return float(np.mean(own_vector_ranks(mapped, targets, metric=metric)))
