r"""Serving a bridge from a real vector store.

Read the old vectors by id (to pair them with re-embedded items), search the old store with mapped new-model queries,
write mapped vectors of new items, re-rank with new-model vectors where some items have them, and refuse a store that
holds two models' vectors.

A store is any object with the small :class:`VectorStore` interface; :class:`FaissStore` (a faiss ``IndexIDMap2``
file), :class:`LanceDBStore` (an embedded LanceDB table) and :class:`QdrantStore` (Qdrant in local mode) wrap the
real libraries (the ``stores`` extra). The store finds candidates with its own index; bcjax then scores each
candidate exactly, by cosine, in float64:

* **bridged**: :math:`\cos(B(q), x) - \beta(x)`, :math:`\beta` the map's hubness correction (zero without one,
  :mod:`bcjax.upgrade._hubness`) computed from the candidates' own vectors, so the store needs no extra column;
* **two-stage** (``new_vectors``): a candidate whose new-model vector :math:`y` is known is scored
  :math:`\cos(q, y) + c_q` instead, :math:`c_q` the median over such candidates of (bridged score - new score), so
  both kinds of candidate share one scale and the re-embedded ones are ordered by the new model itself.

With a hubness correction or a re-ranking the store is asked for ``overfetch`` times k candidates, so an item the
plain score ranks just below the k-th can still rise into the top k.
"""

import math
import weakref
from typing import NamedTuple, Protocol

import numpy as np

from bcjax.upgrade import _hubness, _spaces
from bcjax.upgrade._map import UpgradeMap, check_direction, query_function


class VectorStore(Protocol):
  """What bcjax needs of a vector store.

  Its width, its size, vectors by id, candidates for queries, adding rows, and a sample of its vectors.
  """

  @property
  def dim(self) -> int: ...

  def count(self) -> int: ...

  def read(self, ids: np.ndarray) -> np.ndarray:
    """The vectors [n, D] of ``ids`` (int64), in their order; a missing id raises KeyError naming it."""
    ...

  def candidates(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's k nearest stored rows by the store's own index.

    Returns (ids [Q, k] int64, -1 where fewer; vectors [Q, k, D] float32, zero where the id is -1).
    """
    ...

  def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
    """Adds rows; an id already stored raises ValueError naming it (nothing a user saved is overwritten)."""
    ...

  def sample(self, n: int, seed: int = 0) -> np.ndarray:
    """Up to n stored vectors drawn across the store [m, D]."""
    ...


class SearchResult(NamedTuple):
  """Each query's top k.

  ``ids`` [Q, k] int64 (-1 where the store had fewer) and ``scores`` [Q, k] float64 (-inf there), best first.
  """

  ids: np.ndarray
  scores: np.ndarray


class MixedSpaceError(ValueError):
  """A store holds vectors of two models' spaces: searching it as one would mix incomparable scores."""


class NewVectors(NamedTuple):
  """New-model vectors of some stored items.

  A partial re-embed, or the paired items: ``ids`` [m] and ``vectors`` [m, D_k].
  """

  ids: np.ndarray
  vectors: np.ndarray


def _unit(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x, np.float64)
  norm = np.linalg.norm(x, axis=-1, keepdims=True)
  return x / np.where(norm > 0, norm, 1.0)


class SpaceCheck(NamedTuple):
  """What :func:`check_store_space` found.

  Of ``sampled`` stored rows, ``old`` look like the old model's space (its vectors, or the map's images of new-model
  vectors) and ``new`` like the new model's.
  """

  old: int
  new: int
  sampled: int


def check_store_space(
  store: VectorStore, upgrade_map: UpgradeMap, *, sample_rows: int = 2000, seed: int = 0
) -> SpaceCheck:
  """Attributes a sample of the store's vectors to the map's old and new models (their fingerprints).

  Args:
    store: the old store (:class:`VectorStore`).
    upgrade_map: the fitted map, new -> old, with the fingerprints :func:`~bcjax.upgrade.fit_upgrade` stamps.
    sample_rows: stored rows drawn for the attribution, at most.
    seed: seeds the store's sample.

  Returns:
    A :class:`SpaceCheck`: ``new`` counts the rows likelier under the new model's fingerprint than under the old
    model's and the bridged rows' (the map's images) by a clear margin (:data:`~bcjax.upgrade._spaces.MARGIN_NATS`).

  Raises:
    MixedSpaceError: when both models hold at least 1 % of the sample (and three rows): the store mixes spaces.
    ValueError: when the store's width is not the map's old width.
  """
  d_prev = upgrade_map.dims[0]
  if store.dim != d_prev:
    raise ValueError(f"the store holds {store.dim}-d vectors; the map maps to the old model's D_(k-1)={d_prev}")
  sample = store.sample(sample_rows, seed)
  spaces = upgrade_map.spaces
  if spaces is None or spaces["new"].dim != d_prev or len(sample) == 0:
    return SpaceCheck(len(sample), 0, len(sample))  # different widths cannot mix; no fingerprints cannot tell
  # The old space holds the old model's vectors and the map's images of new-model vectors (bridge_items writes them).
  own = [spaces[side] for side in ("old", "bridged") if side in spaces]
  new_rows = int(np.sum(_spaces.foreign_rows(sample, own, spaces["new"])))
  found = SpaceCheck(len(sample) - new_rows, new_rows, len(sample))
  if new_rows >= max(3, math.ceil(0.01 * len(sample))):
    new, old = spaces["new"].model or "the new model", spaces["old"].model or "the old model"
    raise MixedSpaceError(
      f"the store mixes two models' vectors: of {found.sampled} sampled rows, {found.new} look like {new}'s "
      f"(likelier under its fingerprint by more than {_spaces.MARGIN_NATS:g} nats) and {found.old} like "
      f"{old}'s space; bridged queries would compare incomparable scores. Re-embed the store, or write the new "
      f"model's vectors through the map (bridge_items) instead"
    )
  return found


# Stores already found single-space for a map, with their row count then: bridged_search checks a store once per map
# and again only when rows were added (a writer may have put new-model vectors in it). Weak keys: a closed store goes.
_CHECKED_SPACES: "weakref.WeakKeyDictionary[object, list[tuple[UpgradeMap, int]]]" = weakref.WeakKeyDictionary()


def _check_space_once(store: VectorStore, upgrade_map: UpgradeMap) -> None:
  try:
    seen = _CHECKED_SPACES.setdefault(store, [])
  except TypeError:  # a store that takes no weak reference is checked on every call
    check_store_space(store, upgrade_map)
    return
  rows = store.count()
  if any(m is upgrade_map and n == rows for m, n in seen):
    return
  check_store_space(store, upgrade_map)
  seen[:] = [(m, n) for m, n in seen if m is not upgrade_map] + [(upgrade_map, rows)]


def bridge_items(store: VectorStore, upgrade_map: UpgradeMap, ids, new_vectors) -> np.ndarray:
  """Maps new items' new-model vectors to the old space and adds them to the old store: [n, D_(k-1)] as written.

  Args:
    store: the old store (:class:`VectorStore`).
    upgrade_map: the fitted map, new -> old.
    ids: the new items' ids, [n], none of them stored yet.
    new_vectors: their new-model vectors, [n, D_k].

  Returns:
    The vectors written, [n, D_(k-1)].

  Raises:
    ValueError: for vectors that are not the new model's (:func:`~bcjax.upgrade.check_direction`), ids that do not
      match the rows, or ids already stored.
  """
  ids = np.asarray(ids, np.int64)
  new_vectors = np.asarray(new_vectors)
  if ids.ndim != 1 or len(ids) != len(new_vectors) or len(np.unique(ids)) != len(ids):
    raise ValueError(f"bridge_items: `ids` must be {len(new_vectors)} distinct integers, one per row; got {ids.shape}")
  check_direction(upgrade_map, new_vectors, name="new_vectors")
  mapped = np.asarray(query_function(upgrade_map)(new_vectors), np.float32)
  store.add(ids, mapped)
  return mapped


def bridged_search(
  store: VectorStore,
  upgrade_map: UpgradeMap,
  queries,
  k: int,
  *,
  new_vectors: NewVectors | None = None,
  overfetch: int = 4,
  check_space: bool = True,
) -> SearchResult:
  """The top k of the old store for new-model ``queries`` [Q, D_k] (:mod:`bcjax.upgrade._stores` for the scores).

  Args:
    store: the old store (:class:`VectorStore`).
    upgrade_map: the fitted map, new -> old.
    queries: new-model query embeddings.
    k: results per query.
    new_vectors: new-model vectors of some stored items, for the two-stage re-ranking.
    overfetch: candidates asked of the store per result when the scores are corrected or re-ranked.
    check_space: attribute a sample of the store to the two models first (:func:`check_store_space`): once per
      store and map, and again whenever the store's row count has changed since.

  Returns:
    A :class:`SearchResult`: each query's ids and scores, best first.

  Raises:
    ValueError: for queries that are not the new model's, k < 1, overfetch < 1, or a store of another width.
    MixedSpaceError: when the store mixes the two models' vectors.
  """
  queries = np.asarray(queries)
  if k < 1 or overfetch < 1:
    raise ValueError(f"bridged_search: `k` and `overfetch` must be >= 1, got {k} and {overfetch}")
  check_direction(upgrade_map, queries, name="queries")
  if new_vectors is not None:
    new_vectors = check_new_vectors(new_vectors, upgrade_map)
  if check_space:
    _check_space_once(store, upgrade_map)
  elif store.dim != upgrade_map.dims[0]:
    raise ValueError(f"bridged_search: the store holds {store.dim}-d vectors; the map gives {upgrade_map.dims[0]}")
  mapped = _unit(np.asarray(query_function(upgrade_map)(queries), np.float64))
  corrected = upgrade_map.hubness is not None or new_vectors is not None
  ids, vectors = store.candidates(mapped.astype(np.float32), k * overfetch if corrected else k)
  valid = ids >= 0
  scores = np.einsum("qd,qkd->qk", mapped, _unit(vectors))
  if upgrade_map.hubness is not None:
    scores = scores - _candidate_bias(ids, valid, vectors, upgrade_map.hubness)
  if new_vectors is not None:
    scores = _rerank(scores, ids, valid, _unit(queries), new_vectors)
  scores = np.where(valid, scores, -np.inf)
  order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
  top_ids = np.take_along_axis(np.where(valid, ids, -1), order, axis=1)
  top_scores = np.take_along_axis(scores, order, axis=1)
  return SearchResult(top_ids, top_scores)


def _candidate_bias(ids, valid, vectors, hubness: _hubness.Hubness) -> np.ndarray:
  """The hubness bias [Q, K] of each candidate, computed once per distinct id (queries share most candidates)."""
  _, first, inverse = np.unique(np.where(valid, ids, -1), return_index=True, return_inverse=True)
  flat = vectors.reshape(-1, vectors.shape[-1])
  bias = _hubness.hubness_bias(flat[first], hubness).astype(np.float64)
  return np.where(valid, bias[inverse.reshape(ids.shape)], 0.0)


def _rerank(scores, ids, valid, queries_new, new_vectors: NewVectors) -> np.ndarray:
  known_ids = np.asarray(new_vectors.ids, np.int64)
  order = np.argsort(known_ids)
  sorted_ids = known_ids[order]
  pos = np.clip(np.searchsorted(sorted_ids, ids), 0, max(len(sorted_ids) - 1, 0))
  has = valid & (len(sorted_ids) > 0) & (sorted_ids[pos] == ids) if len(sorted_ids) else np.zeros_like(valid)
  if not has.any():
    return scores
  rows = _unit(np.asarray(new_vectors.vectors)[order[pos]])  # [Q, K, D_k] (rows without a vector unused)
  new_scores = np.einsum("qd,qkd->qk", queries_new, rows)
  out = scores.copy()
  for q in range(scores.shape[0]):
    h = has[q]
    if h.any():
      offset = float(np.median(scores[q, h] - new_scores[q, h]))
      out[q, h] = new_scores[q, h] + offset
  return out


def check_new_vectors(new_vectors: NewVectors, upgrade_map: UpgradeMap) -> NewVectors:
  """``new_vectors`` as int64 ids and a float matrix of the new model's width.

  Raises:
    ValueError: for mismatched lengths, repeated ids or the wrong width.
  """
  ids, vectors = np.asarray(new_vectors.ids, np.int64), np.asarray(new_vectors.vectors)
  if ids.ndim != 1 or vectors.ndim != 2 or len(ids) != len(vectors) or len(np.unique(ids)) != len(ids):
    raise ValueError(
      f"new_vectors: `ids` must be distinct, one per row of `vectors`; got {ids.shape} and {vectors.shape}"
    )
  check_direction(upgrade_map, vectors, name="new_vectors.vectors")
  return NewVectors(ids, vectors)
