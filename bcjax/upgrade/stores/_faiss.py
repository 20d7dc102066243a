"""A faiss index as a bridge's old store.

An ``IndexIDMap2`` (ids of the user's choosing, vectors readable by id) saved in a file, read at open and written back
atomically by :meth:`FaissStore.save`. The ids of rows written through the map (``add(..., bridged=True)``) are kept
beside it, in ``<file>.bridged.npy``, written by :meth:`FaissStore.save` too.
"""

import io
import os
from pathlib import Path

import numpy as np

from bcjax import _atomic
from bcjax._extras import require


class FaissStore:
  """An ``IndexIDMap2`` file (or a fresh index of width ``dim`` with ``create``) as a :class:`VectorStore`.

  Args:
    path: the index file (``faiss.write_index``'s format).
    index: an open ``IndexIDMap2`` (instead of reading ``path``).
  """

  def __init__(self, path: str | os.PathLike, index=None):
    self._faiss = require("faiss", "stores", "FaissStore")
    self.path = Path(path)
    if index is None:
      if not self.path.is_file():
        raise ValueError(f"FaissStore: `path` {self.path} is not a faiss index file")
      index = self._faiss.read_index(str(self.path))
    if not isinstance(index, self._faiss.IndexIDMap2):
      raise ValueError(
        f"FaissStore: {self.path} holds a {type(index).__name__}; bcjax reads vectors by id, which needs an "
        f"IndexIDMap2 (faiss.IndexIDMap2(inner_index))"
      )
    self.index = index
    self._bridged = self._read_bridged()

  @property
  def bridged_path(self) -> Path:
    """The file beside the index that lists the ids of rows written through the map."""
    return self.path.with_name(self.path.name + ".bridged.npy")

  def _read_bridged(self) -> np.ndarray:
    if not self.bridged_path.is_file():
      return np.zeros(0, np.int64)
    try:
      ids = np.load(self.bridged_path, allow_pickle=False)
    except (OSError, ValueError) as e:
      raise ValueError(f"FaissStore: {self.bridged_path} is not a readable list of ids ({e})") from None
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
      raise ValueError(f"FaissStore: {self.bridged_path} holds {ids.dtype} {ids.shape}, not a list of integer ids")
    return np.unique(ids.astype(np.int64))

  @classmethod
  def create(cls, path: str | os.PathLike, dim: int, *, metric: str = "ip") -> "FaissStore":
    """A new, empty flat index (inner product, or ``l2``) wrapped in an ``IndexIDMap2``; not written until saved."""
    faiss = require("faiss", "stores", "FaissStore")
    if metric not in ("ip", "l2"):
      raise ValueError(f"FaissStore.create: `metric` must be 'ip' or 'l2', got {metric!r}")
    inner = faiss.IndexFlatIP(dim) if metric == "ip" else faiss.IndexFlatL2(dim)
    return cls(path, faiss.IndexIDMap2(inner))

  @property
  def dim(self) -> int:
    return int(self.index.d)

  def count(self) -> int:
    return int(self.index.ntotal)

  def ids(self) -> np.ndarray:
    """Every stored id, int64."""
    return self._faiss.vector_to_array(self.index.id_map).astype(np.int64)

  def read(self, ids) -> np.ndarray:
    out = np.empty((len(ids), self.dim), np.float32)
    for i, item in enumerate(np.asarray(ids, np.int64)):
      try:
        out[i] = self.index.reconstruct(int(item))
      except RuntimeError:
        raise KeyError(f"FaissStore: id {int(item)} is not in {self.path}") from None
    return out

  def candidates(self, queries, k: int):
    k = min(k, max(self.count(), 1))
    _, ids = self.index.search(np.ascontiguousarray(queries, np.float32), k)
    ids = ids.astype(np.int64)
    vectors = np.zeros(ids.shape + (self.dim,), np.float32)
    valid = ids >= 0
    if valid.any():
      vectors[valid] = self.index.reconstruct_batch(np.ascontiguousarray(ids[valid]))
    return ids, vectors

  def add(self, ids, vectors, *, bridged: bool = False) -> None:
    """Adds rows; ``bridged``: they were written through the map (:func:`~bcjax.upgrade.bridge_items`)."""
    ids = np.asarray(ids, np.int64)
    taken = np.intersect1d(ids, self.ids())
    if taken.size:
      raise ValueError(f"FaissStore.add: ids already stored: {taken[:10].tolist()}")
    self.index.add_with_ids(np.ascontiguousarray(vectors, np.float32), ids)
    if bridged:
      self._bridged = np.union1d(self._bridged, ids)

  def bridged_rows(self, ids) -> np.ndarray:
    """Whether each of ``ids`` was written through the map: bools of ``ids``' shape."""
    ids = np.asarray(ids, np.int64)
    if len(self._bridged) == 0:
      return np.zeros(ids.shape, bool)
    pos = np.clip(np.searchsorted(self._bridged, ids), 0, len(self._bridged) - 1)
    return self._bridged[pos] == ids

  def sample(self, n: int, seed: int = 0) -> np.ndarray:
    """Up to n stored rows drawn uniformly at random without replacement (``seed`` fixes which)."""
    ids = self.ids()
    pick = np.sort(np.random.default_rng(seed).choice(len(ids), max(0, min(n, len(ids))), replace=False))
    return self.read(ids[pick])

  def save(self, *, overwrite: bool = True) -> Path:
    """Writes the index to ``path`` atomically (a reader sees the old file or the new one, never a torn one).

    The list of rows written through the map goes first, beside it (:attr:`bridged_path`): a reader that finds an id
    listed there that the index lacks ignores it.
    """
    if not overwrite and self.path.exists():
      raise FileExistsError(f"FaissStore.save: {self.path} exists; refusing to overwrite it")
    if len(self._bridged) or self.bridged_path.exists():
      buffer = io.BytesIO()
      np.save(buffer, self._bridged)
      _atomic.write_atomic(self.bridged_path, buffer.getvalue(), overwrite=True)
    data = self._faiss.serialize_index(self.index).tobytes()
    return _atomic.write_atomic(self.path, data, overwrite=overwrite)
