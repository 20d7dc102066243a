r"""Serving a bridge from a real vector store.

Read the old vectors by id (to pair them with re-embedded items), search the old store with mapped new-model queries,
write mapped vectors of new items, re-rank with new-model vectors where some items have them, and refuse a store that
holds two models' vectors.

A store is any object with the small :class:`VectorStore` interface; :class:`FaissStore` (a faiss ``IndexIDMap2``
file), :class:`LanceDBStore` (an embedded LanceDB table) and :class:`QdrantStore` (Qdrant in local mode) wrap the
real libraries (the ``stores`` extra), and also record which rows the map wrote. The store finds candidates with its
own index; bcjax then scores each candidate exactly, by cosine, in float64, on one scale
(:mod:`bcjax.upgrade._scale`):

* **bridged**: :math:`\cos(B(q), x) - \beta(x)`, :math:`\beta` the map's hubness correction (zero without one,
  :mod:`bcjax.upgrade._hubness`) computed from the candidates' own vectors, so the store needs no extra column; a row
  written through the map (:func:`bridge_items`) has the map's bridged-row offset added;
* **two-stage** (``new_vectors``): a candidate whose new-model vector :math:`y` is known is scored
  :math:`a_y\cos(q, y) + c_q` instead, :math:`c_q` set so that the best such candidate by bridged score keeps its
  bridged score (:func:`~bcjax.upgrade.stores._two_stage.two_stage_scores`): both kinds of candidate share one scale
  and the re-embedded ones are ordered by the new model itself.

With a hubness correction, bridged rows or a re-ranking the store is asked for ``overfetch`` times k candidates, so
an item the plain score ranks just below the k-th can still rise into the top k; with a correction or bridged rows,
then for more, until no row the store did not return could score above the k-th (its plain score is at most the
last returned one's, its bias at least the lowest of a uniform sample of the store).

A serving process pays each fixed cost once: the map is compiled once per map object (and batch-size octave), the
store's space checked once per store and map (again when its row count changes), and each candidate's bias computed
once per store, map and row.
"""

import weakref

import jax.numpy as jnp
import numpy as np

from bcjax._buckets import bucket_size
from bcjax._device import device_array
from bcjax._unit import unit_rows
from bcjax.upgrade import _hubness
from bcjax.upgrade._map import UpgradeMap, check_direction, compiled_map
from bcjax.upgrade._scale import ScoreScale
from bcjax.upgrade.stores._protocol import NewVectors, SearchResult, VectorStore
from bcjax.upgrade.stores._space import _attribute, _check_width
from bcjax.upgrade.stores._two_stage import _known, _rerank


class _Served:
  """What a serving process keeps per store and map, so that each search pays only for its own query.

  ``checked``: the store's row count when its space was last found single (None: never); ``floor_rows`` and
  ``floor``: the row count when the lowest hubness bias of the store was last estimated, and that estimate;
  ``bias``: each candidate's bias by id, with a hash of the vector it was computed from (a row rewritten under the
  same id is computed again).
  """

  def __init__(self):
    self.checked: int | None = None
    self.floor_rows: int | None = None
    self.floor = 0.0
    self.bias: dict[int, tuple[int, float]] = {}


# Per store (weakly: a closed store goes) and per map object: bridged_search checks a store's space once per map and
# again only when rows were added (a writer may have put new-model vectors in it), and keeps each candidate's bias.
_SERVED: "weakref.WeakKeyDictionary[object, dict[int, tuple[UpgradeMap, _Served]]]" = weakref.WeakKeyDictionary()
_BIAS_CACHE_LIMIT = 1_000_000  # ids whose bias a store's entry keeps (about 100 MiB); past it the cache starts anew


def _served(store: VectorStore, upgrade_map: UpgradeMap) -> _Served:
  try:
    per_map = _SERVED.setdefault(store, {})
  except TypeError:  # a store that takes no weak reference gets a fresh record, so is checked on every call
    return _Served()
  hit = per_map.get(id(upgrade_map))
  if hit is not None and hit[0] is upgrade_map:
    return hit[1]
  state = _Served()
  per_map[id(upgrade_map)] = (upgrade_map, state)
  return state


FLOOR_SAMPLE_ROWS = 2000
"""Stored rows (uniform) whose lowest hubness bias bounds what a row the store did not return could score."""


def _prepare(store: VectorStore, upgrade_map: UpgradeMap, state: _Served, check_space: bool) -> int:
  """The store's space check and bias floor, each redone only when the store's row count has changed; its rows."""
  rows = store.count()
  need_check = check_space and state.checked != rows
  need_floor = upgrade_map.hubness is not None and state.floor_rows != rows
  if not (need_check or need_floor):
    return rows
  sample = store.sample(FLOOR_SAMPLE_ROWS, 0)
  if need_check:
    _attribute(sample, upgrade_map)
    state.checked = rows
  if need_floor:
    hubness = upgrade_map.hubness
    assert hubness is not None  # need_floor says so
    state.floor = float(np.min(_hubness.hubness_bias(sample, hubness))) if len(sample) else 0.0
    state.floor_rows = rows
    _bias_rows(np.zeros((1, upgrade_map.dims[0]), np.float32), hubness)  # a query's program, compiled here
  return rows


def _mapped(upgrade_map: UpgradeMap, z: np.ndarray) -> np.ndarray:
  """B(z) [n, D_(k-1)] in float64 through the map's one compiled program (:func:`compiled_map`, float32).

  Rows are padded to a power of two, so a serving process compiles once per octave of batch sizes and a one-query
  search reuses the first one's program.
  """
  rows = z.shape[0]
  size = bucket_size(rows, minimum=1)
  block = np.zeros((size, z.shape[1]), np.float32)
  block[:rows] = z
  return np.asarray(compiled_map(upgrade_map, jnp.float32)(device_array(block)), np.float64)[:rows]


def _records_bridged(store) -> bool:
  return callable(getattr(store, "bridged_rows", None))


def bridge_items(store: VectorStore, upgrade_map: UpgradeMap, ids, new_vectors) -> np.ndarray:
  """Maps new items' new-model vectors to the old space and adds them to the old store: [n, D_(k-1)] as written.

  A store that records which rows the map wrote (``add(..., bridged=True)`` and ``bridged_rows``, as bcjax's
  stores do) has them scored on the old rows' scale by :func:`bridged_search` (:mod:`bcjax.upgrade._scale`).

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
  mapped = _mapped(upgrade_map, new_vectors).astype(np.float32)
  if _records_bridged(store):
    store.add(ids, mapped, bridged=True)  # type: ignore[call-arg]  # the optional keyword _records_bridged found
  else:
    store.add(ids, mapped)
  return mapped


MAX_CANDIDATES = 4096
"""The most candidates :func:`bridged_search` asks a store for per query while it makes its top k exact."""


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
  r"""The top k of the old store for new-model ``queries`` [Q, D_k] (:mod:`._bridged` for the scores).

  The map is compiled once per map object and the store's space checked once per store and map (again when rows
  were added); each candidate's hubness bias is computed once per store, map and row. With a correction the store
  is first asked for ``overfetch`` times k candidates, then, for each query whose k-th corrected score does not clear
  what an unreturned row could score (the store's k-th plain score less the lowest bias of a uniform sample of the
  store), for four times as many, up to :data:`MAX_CANDIDATES`: the top k is the correction's over the whole store.

  Args:
    store: the old store (:class:`VectorStore`).
    upgrade_map: the fitted map, new -> old.
    queries: new-model query embeddings.
    k: results per query.
    new_vectors: new-model vectors of some stored items, for the two-stage re-ranking (among the candidates).
    overfetch: candidates first asked of the store per result when the scores are corrected or re-ranked.
    check_space: attribute a uniform sample of the store to the two models first (:func:`check_store_space`): once
      per store and map, and again whenever the store's row count has changed since.

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
  known = None if new_vectors is None else _known(new_vectors, upgrade_map)
  _check_width(store, upgrade_map)
  state = _served(store, upgrade_map)
  total = _prepare(store, upgrade_map, state, check_space)
  mapped = unit_rows(_mapped(upgrade_map, queries), np.float64)
  scale = _bridged_scale(store, upgrade_map)
  corrected = upgrade_map.hubness is not None or known is not None or scale is not None
  fetch = min(max(k * overfetch if corrected else k, k), max(total, 1))
  ids, scores, plain = _scored(store, upgrade_map, state, mapped, fetch, queries, known, scale)
  if upgrade_map.hubness is not None or scale is not None:
    todo = np.arange(len(queries))
    while fetch < min(total, MAX_CANDIDATES):
      todo = todo[_short(ids[todo, :fetch], scores[todo, :fetch], plain[todo, :fetch], k, fetch, state, scale)]
      if len(todo) == 0:
        break
      fetch = min(4 * fetch, total, MAX_CANDIDATES)
      more = _scored(store, upgrade_map, state, mapped[todo], fetch, queries[todo], known, scale)
      ids, scores, plain = (_widen(a, fetch, fill) for a, fill in zip((ids, scores, plain), (-1, -np.inf, -np.inf)))
      ids[todo], scores[todo], plain[todo] = more
  order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
  return SearchResult(np.take_along_axis(ids, order, axis=1), np.take_along_axis(scores, order, axis=1))


def row_scores(store, upgrade_map: UpgradeMap, queries, ids, vectors) -> np.ndarray:
  r"""The bridged scores [Q, n] of given rows of the store for new-model ``queries`` [Q, D_k], as a search scores them.

  :math:`\cos(B(q), x) - \beta(x)`, plus the bridged-row offset for a row the map wrote (:mod:`._bridged`).

  Args:
    store: the old store the rows are in.
    upgrade_map: the fitted map, new -> old.
    queries: new-model queries, [Q, D_k].
    ids: the rows' ids, [n].
    vectors: their stored vectors, [n, D_(k-1)].

  Returns:
    The scores, [Q, n] float64.
  """
  ids, vectors = np.asarray(ids, np.int64), np.asarray(vectors, np.float32)
  scores = unit_rows(_mapped(upgrade_map, np.asarray(queries)), np.float64) @ unit_rows(vectors, np.float64).T
  if upgrade_map.hubness is not None and len(ids):
    state = _served(store, upgrade_map)
    one = np.ones((1, len(ids)), bool)
    scores = scores - _candidate_bias(ids[None, :], one, vectors[None], upgrade_map.hubness, state)[0][None, :]
  scale = _bridged_scale(store, upgrade_map)
  if scale is not None and len(ids):
    scores = np.where(np.asarray(store.bridged_rows(ids), bool)[None, :], scores + scale.bridged_offset, scores)
  return scores


def _bridged_scale(store, upgrade_map: UpgradeMap) -> ScoreScale | None:
  """The map's bridged-row calibration, where it applies: a store that records which of its rows are bridged."""
  scale = upgrade_map.scale
  return None if scale is None or not _records_bridged(store) else scale


def _widen(a: np.ndarray, width: int, fill) -> np.ndarray:
  if a.shape[1] >= width:
    return a
  return np.concatenate([a, np.full((a.shape[0], width - a.shape[1]), fill, a.dtype)], axis=1)


def _short(ids, scores, plain, k: int, fetch: int, state: _Served, scale: ScoreScale | None) -> np.ndarray:
  """Which queries' k-th score an unreturned row could beat: [Q] bools (the store returned ``fetch`` rows for them)."""
  full = np.sum(ids >= 0, axis=1) == fetch
  last = np.min(np.where(ids >= 0, plain, np.inf), axis=1)  # the store's lowest returned plain score
  bound = last - state.floor
  if scale is not None:  # a bridged row's score carries the offset too
    bound = np.maximum(bound, bound + scale.bridged_offset)
  kth = -np.sort(-scores, axis=1)[:, min(k, scores.shape[1]) - 1]
  return full & (kth < bound)


def _scored(store, upgrade_map: UpgradeMap, state: _Served, mapped, fetch: int, queries, known, scale):
  """The store's ``fetch`` candidates per query, their final scores and their plain cosines (:mod:`._bridged`)."""
  ids, vectors = store.candidates(mapped.astype(np.float32), fetch)
  valid = ids >= 0
  plain = np.einsum("qd,qkd->qk", mapped, unit_rows(vectors, np.float64))
  scores = plain
  if upgrade_map.hubness is not None:
    bias = _candidate_bias(ids, valid, vectors, upgrade_map.hubness, state)
    state.floor = min(state.floor, float(np.min(bias, initial=np.inf, where=valid)))
    scores = scores - bias
  if scale is not None and valid.any():
    bridged = np.zeros_like(valid)
    bridged[valid] = np.asarray(store.bridged_rows(ids[valid]), bool)
    scores = np.where(bridged, scores + scale.bridged_offset, scores)
  if known is not None:
    scores = _rerank(scores, ids, valid, unit_rows(queries, np.float64), known)
  return np.where(valid, ids, -1), np.where(valid, scores, -np.inf), np.where(valid, plain, -np.inf)


def _candidate_bias(ids, valid, vectors, hubness: _hubness.Hubness, state: _Served | None = None) -> np.ndarray:
  """The hubness bias [Q, K] of each candidate: once per distinct id, and once per store and map (``state``)."""
  _, first, inverse = np.unique(np.where(valid, ids, -1), return_index=True, return_inverse=True)
  flat = vectors.reshape(-1, vectors.shape[-1])
  flat_ids = np.where(valid, ids, -1).reshape(-1)[first]
  bias = np.zeros(len(first))
  keys = [hash(flat[i].tobytes()) for i in first]
  cache = state.bias if state is not None else {}
  missing = []
  for j, (item, key) in enumerate(zip(flat_ids.tolist(), keys)):
    hit = cache.get(item) if item >= 0 else None
    if hit is not None and hit[0] == key:
      bias[j] = hit[1]
    elif item >= 0:
      missing.append(j)
  if missing:
    computed = _bias_rows(flat[first[missing]], hubness)
    bias[missing] = computed
    if len(cache) + len(missing) > _BIAS_CACHE_LIMIT:
      cache.clear()
    cache.update((int(flat_ids[j]), (keys[j], float(b))) for j, b in zip(missing, computed))
  return np.where(valid, bias[inverse.reshape(ids.shape)], 0.0)


_BIAS_BUCKET = 64  # rows per bias call at least: a query's new candidates share one compiled program


def _bias_rows(rows: np.ndarray, hubness: _hubness.Hubness) -> np.ndarray:
  """:func:`~bcjax.upgrade.hubness_bias` of ``rows``, padded to a power of two of at least 64 rows (few compiles)."""
  size = bucket_size(len(rows), minimum=_BIAS_BUCKET)
  padded = np.zeros((size, rows.shape[1]), np.float32)
  padded[: len(rows)] = rows
  return _hubness.hubness_bias(padded, hubness, chunk_rows=size)[: len(rows)].astype(np.float64)
