"""What bcjax needs of a vector store (:class:`VectorStore`), and the records a bridged search returns or raises."""

from typing import NamedTuple, Protocol

import numpy as np


class VectorStore(Protocol):
  """What bcjax needs of a vector store.

  Its width, its size, vectors by id, candidates for queries, adding rows, and a uniform sample of its vectors. A
  store may also record which rows the map wrote, with ``add(ids, vectors, bridged=True)`` and ``bridged_rows(ids)
  -> bools``, as bcjax's stores do: :func:`bridged_search` then scores those rows on the old rows' scale.
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
    """Up to n stored vectors [m, D] drawn uniformly at random without replacement (``seed`` fixes which)."""
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


class SpaceCheck(NamedTuple):
  """What :func:`check_store_space` found.

  Of ``sampled`` stored rows, ``old`` look like the old model's space (its vectors, or the map's images of new-model
  vectors) and ``new`` like the new model's.
  """

  old: int
  new: int
  sampled: int
