"""Re-embedded items' new-model vectors in a bridged search.

Checked once per set of vectors, and scored on the bridged scale (the two-stage score of :mod:`bcjax.upgrade._scale`).
"""

from typing import NamedTuple

import numpy as np

from bcjax._unit import unit_rows
from bcjax.upgrade._map import UpgradeMap, check_direction
from bcjax.upgrade.stores._protocol import NewVectors


class _Known(NamedTuple):
  """:class:`NewVectors` ready for re-ranking: ids sorted, with their unit rows in that order."""

  ids: np.ndarray
  unit: np.ndarray


_KNOWN: dict[tuple, tuple[tuple, _Known]] = {}  # the last few NewVectors checked, by the identity of their arrays


def _known(new_vectors: NewVectors, upgrade_map: UpgradeMap) -> _Known:
  """``new_vectors`` checked (:func:`check_new_vectors`) and sorted once per (arrays, map), not once per search."""
  held = (new_vectors.ids, new_vectors.vectors, upgrade_map)
  key = tuple(id(a) for a in held)
  hit = _KNOWN.get(key)
  if hit is not None and all(a is b for a, b in zip(hit[0], held)):
    return hit[1]
  checked = check_new_vectors(new_vectors, upgrade_map)
  order = np.argsort(checked.ids)
  known = _Known(checked.ids[order], unit_rows(checked.vectors[order], np.float64))
  if len(_KNOWN) >= 4:
    _KNOWN.pop(next(iter(_KNOWN)))
  _KNOWN[key] = (held, known)
  return known


def _rerank(scores, ids, valid, queries_new, known: _Known, slope: float) -> np.ndarray:
  """Two-stage scores (:mod:`bcjax.upgrade._scale`).

  A candidate with a new-model vector scores ``slope`` times its new-model cosine plus the query's median offset.
  """
  if len(known.ids) == 0:
    return scores
  pos = np.clip(np.searchsorted(known.ids, ids), 0, len(known.ids) - 1)
  has = valid & (known.ids[pos] == ids)
  if not has.any():
    return scores
  q, _ = np.nonzero(has)
  new_scores = np.zeros(scores.shape)
  new_scores[has] = np.einsum("nd,nd->n", queries_new[q], known.unit[pos[has]])
  rows = has.any(axis=1)
  offset = np.zeros(len(scores))
  offset[rows] = np.nanmedian(np.where(has, scores - slope * new_scores, np.nan)[rows], axis=1)
  return np.where(has, slope * new_scores + offset[:, None], scores)


def check_new_vectors(new_vectors: NewVectors, upgrade_map: UpgradeMap) -> NewVectors:
  """``new_vectors`` as int64 ids and a float matrix of the new model's width.

  Args:
    new_vectors: new-model vectors of some stored items.
    upgrade_map: the fitted map, new -> old.

  Returns:
    The same :class:`NewVectors` with int64 ids and an array of vectors.

  Raises:
    ValueError: for mismatched lengths, repeated ids, the wrong width or vectors that are not the new model's.
  """
  ids, vectors = np.asarray(new_vectors.ids, np.int64), np.asarray(new_vectors.vectors)
  if ids.ndim != 1 or vectors.ndim != 2 or len(ids) != len(vectors) or len(np.unique(ids)) != len(ids):
    raise ValueError(
      f"new_vectors: `ids` must be distinct, one per row of `vectors`; got {ids.shape} and {vectors.shape}"
    )
  check_direction(upgrade_map, vectors, name="new_vectors.vectors")
  return NewVectors(ids, vectors)
