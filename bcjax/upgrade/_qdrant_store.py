"""A Qdrant collection as a bridge's old store.

With Qdrant in local mode (an on-disk collection opened by the process itself, no server) or any client the user passes.
Point ids are unsigned integers.
"""

import os

import numpy as np

from bcjax._extras import require

_BATCH = 256  # queries per batched request


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

  def add(self, ids, vectors) -> None:
    ids = [int(i) for i in np.asarray(ids, np.int64)]
    taken = [int(p.id) for p in self.client.retrieve(self.collection, ids=ids)]
    if taken:
      raise ValueError(f"QdrantStore.add: ids already stored: {taken[:10]}")
    vectors = np.asarray(vectors, np.float32)
    self.client.upsert(self.collection, points=self._models.Batch(ids=ids, vectors=vectors.tolist()), wait=True)

  def sample(self, n: int, seed: int = 0) -> np.ndarray:
    """Up to n points drawn at random by Qdrant itself (its random sample query; ``seed`` is not used)."""
    if n <= 0:
      return np.zeros((0, self._dim), np.float32)
    query = self._models.SampleQuery(sample=self._models.Sample.RANDOM)
    points = self.client.query_points(self.collection, query=query, limit=n, with_vectors=True).points
    return np.asarray([p.vector for p in points], np.float32).reshape(len(points), self._dim)
