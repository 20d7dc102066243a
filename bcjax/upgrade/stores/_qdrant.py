"""A Qdrant collection as a bridge's old store.

With Qdrant in local mode (an on-disk collection opened by the process itself, no server) or any client the user passes.
Point ids are unsigned integers. A point written through the map (``add(..., bridged=True)``) carries the payload
``{"bcjax_bridged": true}``, set in the same write as its vector.
"""

import os

import numpy as np

from bcjax._extras import require

_BATCH = 256  # queries per batched request
_SCROLL = 10_000  # points per page when every id is listed
BRIDGED_KEY = "bcjax_bridged"


class QdrantStore:
  """The collection ``collection`` as a :class:`VectorStore`.

  Args:
    path: the local-mode storage directory (``QdrantClient(path=...)``), unless ``client`` is given.
    collection: the collection's name (a single unnamed vector per point).
    client: an open ``QdrantClient`` (a server, or local mode) instead of ``path``.
  """

  def __init__(self, path: str | os.PathLike | None, collection: str, *, client=None):
    qdrant = require("qdrant_client", "stores", "QdrantStore")
    self._models = require("qdrant_client.models", "stores", "QdrantStore")
    self.client = client if client is not None else qdrant.QdrantClient(path=str(path))
    if not self.client.collection_exists(collection):
      raise ValueError(f"QdrantStore: no collection {collection!r} at {path}")
    params = self.client.get_collection(collection).config.params.vectors
    if not hasattr(params, "size"):
      raise ValueError(f"QdrantStore: collection {collection!r} has named vectors; bcjax reads a single vector")
    self.collection, self._dim = collection, int(params.size)
    self._bridged: tuple[int, np.ndarray] | None = None  # (the point count when listed, the bridged ids)

  @property
  def dim(self) -> int:
    return self._dim

  def count(self) -> int:
    return int(self.client.count(self.collection, exact=True).count)

  def read(self, ids) -> np.ndarray:
    ids = [int(i) for i in np.asarray(ids, np.int64)]
    points = {int(p.id): p.vector for p in self.client.retrieve(self.collection, ids=ids, with_vectors=True)}
    missing = [i for i in ids if i not in points]
    if missing:
      raise KeyError(f"QdrantStore: ids not in {self.collection!r}: {missing[:10]}")
    return np.asarray([points[i] for i in ids], np.float32).reshape(len(ids), self._dim)

  def candidates(self, queries, k: int):
    queries = np.asarray(queries, np.float32)
    ids = np.full((len(queries), k), -1, np.int64)
    vectors = np.zeros((len(queries), k, self._dim), np.float32)
    m = self._models
    for start in range(0, len(queries), _BATCH):
      block = queries[start : start + _BATCH]
      requests = [m.QueryRequest(query=q.tolist(), limit=k, with_vector=True) for q in block]
      for q, response in enumerate(self.client.query_batch_points(self.collection, requests=requests), start):
        for j, point in enumerate(response.points[:k]):
          ids[q, j], vectors[q, j] = int(point.id), point.vector
    return ids, vectors

  def add(self, ids, vectors, *, bridged: bool = False) -> None:
    """Adds points; ``bridged``: they were written through the map (:func:`~bcjax.upgrade.bridge_items`)."""
    ids = [int(i) for i in np.asarray(ids, np.int64)]
    taken = [int(p.id) for p in self.client.retrieve(self.collection, ids=ids)]
    if taken:
      raise ValueError(f"QdrantStore.add: ids already stored: {taken[:10]}")
    vectors = np.asarray(vectors, np.float32)
    payloads = [{BRIDGED_KEY: True}] * len(ids) if bridged else None
    batch = self._models.Batch(ids=ids, vectors=vectors.tolist(), payloads=payloads)
    self.client.upsert(self.collection, points=batch, wait=True)
    if bridged and self._bridged is not None:
      self._bridged = (self._bridged[0] + len(ids), np.union1d(self._bridged[1], ids))

  def _scroll(self, scroll_filter=None) -> np.ndarray:
    """Every point id (matching ``scroll_filter``), int64, sorted."""
    out, offset = [], None
    while True:
      points, offset = self.client.scroll(
        self.collection, scroll_filter=scroll_filter, limit=_SCROLL, offset=offset, with_payload=False
      )
      out += [int(p.id) for p in points]
      if offset is None:
        return np.sort(np.asarray(out, np.int64))

  def bridged_rows(self, ids) -> np.ndarray:
    """Whether each of ``ids`` was written through the map: bools of ``ids``' shape.

    The bridged ids are listed once, and again when the collection's point count changes (another writer).
    """
    ids = np.asarray(ids, np.int64)
    count = self.count()
    if self._bridged is None or self._bridged[0] != count:
      m = self._models
      bridged = m.Filter(must=[m.FieldCondition(key=BRIDGED_KEY, match=m.MatchValue(value=True))])
      self._bridged = (count, self._scroll(bridged))
    listed = self._bridged[1]
    if len(listed) == 0:
      return np.zeros(ids.shape, bool)
    pos = np.clip(np.searchsorted(listed, ids), 0, len(listed) - 1)
    return listed[pos] == ids

  def sample(self, n: int, seed: int = 0) -> np.ndarray:
    """Up to n stored points drawn uniformly at random without replacement (``seed`` fixes which)."""
    if n <= 0:
      return np.zeros((0, self._dim), np.float32)
    ids = self._scroll()
    pick = ids[np.sort(np.random.default_rng(seed).choice(len(ids), min(n, len(ids)), replace=False))]
    return self.read(pick) if len(pick) else np.zeros((0, self._dim), np.float32)
