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


def _rerank(scores, ids, valid, queries_new, known: _Known) -> np.ndarray:
  """Two-stage scores: the re-embedded candidates reordered by the new model (:func:`two_stage_scores`)."""
  if len(known.ids) == 0:
    return scores
  pos = np.clip(np.searchsorted(known.ids, ids), 0, len(known.ids) - 1)
  has = valid & (known.ids[pos] == ids)
  if not has.any():
    return scores
  q, _ = np.nonzero(has)
  new_scores = np.zeros(scores.shape)
  new_scores[has] = np.einsum("nd,nd->n", queries_new[q], known.unit[pos[has]])
  return two_stage_scores(scores, new_scores, has)


def two_stage_scores(bridged: np.ndarray, new_cos: np.ndarray, has: np.ndarray) -> np.ndarray:
  r"""Each query's candidates on the bridged scale, the re-embedded ones in the new model's order.

  The re-embedded candidates (``has``) keep the bridged scores they hold between them, reassigned in the new model's
  order: the one the new model ranks first among them takes the best of those scores, and so on. Every candidate
  without a new-model vector keeps its score and its rank, so re-ranking never lowers recall for the documents
  without new vectors, and a re-embedded document ranks as the new model orders it among the re-embedded. (An
  offset matched over all of a query's re-embedded candidates, their median, lowered relevant re-embedded
  documents below bridged ones on real models, all-MiniLM-L6-v2 mapped to paraphrase-MiniLM-L3-v2: 0.945 -> 0.915
  Recall@1; an offset anchored at the best of them lowered the documents without new vectors instead.)

  Args:
    bridged: the candidates' bridged scores, [Q, C] (-inf where there is no candidate).
    new_cos: their new-model cosines with the query, [Q, C] (read where ``has``).
    has: which candidates have a new-model vector, [Q, C] bools (only where ``bridged`` is finite).

  Returns:
    The scores, [Q, C].
  """
  slots = -np.sort(-np.where(has, bridged, -np.inf), axis=1)  # each row's re-embedded scores, best first
  by_new = np.argsort(-np.where(has, new_cos, -np.inf), axis=1, kind="stable")  # re-embedded columns, new model's order
  q, rank = np.nonzero(np.arange(has.shape[1])[None, :] < has.sum(axis=1)[:, None])
  out = np.array(bridged, np.float64, copy=True)
  out[q, by_new[q, rank]] = slots[q, rank]
  return out


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
