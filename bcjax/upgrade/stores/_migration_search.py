"""Serving a migration: candidates from the old store (bridged) and the new store (native), on one scale.

The scores are :mod:`bcjax.upgrade.stores._migration`'s.
"""

import numpy as np

from bcjax._unit import unit_rows
from bcjax.upgrade._map import UpgradeMap
from bcjax.upgrade.stores._bridged import bridged_search, row_scores
from bcjax.upgrade.stores._protocol import SearchResult
from bcjax.upgrade.stores._two_stage import two_stage_scores


def native(store, queries: np.ndarray, k: int) -> SearchResult:
  """The store's own top k by cosine, rescored in float64."""
  q = unit_rows(queries, np.float64)
  ids, vectors = store.candidates(q.astype(np.float32), k)
  scores = np.where(ids >= 0, np.einsum("qd,qkd->qk", q, unit_rows(vectors, np.float64)), -np.inf)
  order = np.argsort(-scores, axis=1, kind="stable")
  return SearchResult(np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1))


def served_search(old, new, m: UpgradeMap, queries: np.ndarray, k: int, overfetch: int) -> SearchResult:
  """Both stores' candidates, each scored bridged and, where re-embedded, two-stage (:mod:`._migration`)."""
  fetch = k * overfetch
  bridged = bridged_search(old, m, queries, fetch)
  q_new = unit_rows(queries, np.float64)
  new_ids, new_vectors = new.candidates(q_new.astype(np.float32), fetch)
  new_cos = np.where(new_ids >= 0, np.einsum("qd,qkd->qk", q_new, unit_rows(new_vectors, np.float64)), -np.inf)
  # Every candidate of either store, per query: its bridged score and, where it was re-embedded, its new cosine.
  # A document both stores returned is kept once, as the old store's candidate (its scores are the same either way).
  twice = (new_ids[:, :, None] == bridged.ids[:, None, :]).any(axis=2)
  ids = np.concatenate([bridged.ids, np.where(twice, -1, new_ids)], axis=1)
  valid = ids >= 0
  cos_new = _new_cosines(new, q_new, ids, valid, bridged.ids, new_ids, new_cos)
  score_b = _bridged_scores(old, m, queries, ids, valid, bridged)
  has = valid & np.isfinite(cos_new)
  scores = np.where(valid, two_stage_scores(score_b, cos_new, has), -np.inf)
  order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
  top_ids = np.take_along_axis(ids, order, axis=1)
  top = np.take_along_axis(scores, order, axis=1)
  return SearchResult(np.where(np.isfinite(top), top_ids, -1), top)


def _new_cosines(new, q_new, ids, valid, old_ids, new_ids, new_cos) -> np.ndarray:
  """cos(q, y) [Q, 2F] of each candidate with a new-model vector, NaN for the others.

  The new store's candidates bring theirs; the old store's re-embedded candidates' vectors are read from it by id.
  """
  f = old_ids.shape[1]
  out = np.full(ids.shape, np.nan)
  out[:, f:] = np.where(new_ids >= 0, new_cos, np.nan)
  wanted = np.unique(old_ids[old_ids >= 0])
  if len(wanted) == 0:
    return out
  present = wanted[np.asarray(new.contains(wanted), bool)]
  if len(present) == 0:
    return out
  vectors = unit_rows(new.read(present), np.float64)
  pos = np.clip(np.searchsorted(present, old_ids), 0, len(present) - 1)
  known = (old_ids >= 0) & (present[pos] == old_ids)
  q, j = np.nonzero(known)
  out[q, j] = np.einsum("nd,nd->n", q_new[q], vectors[pos[q, j]])
  return np.where(valid, out, np.nan)


def _bridged_scores(old, m: UpgradeMap, queries, ids, valid, bridged: SearchResult) -> np.ndarray:
  """The bridged score [Q, 2F] of each candidate.

  As the bridged search gave it, or, for a candidate the new store found, from its old vector read by id
  (:func:`~bcjax.upgrade.stores._bridged.row_scores`, the search's own scoring).
  """
  f = bridged.ids.shape[1]
  out = np.full(ids.shape, -np.inf)
  out[:, :f] = bridged.scores
  extra = np.where(valid[:, f:], ids[:, f:], -1)
  need = np.unique(extra[extra >= 0])
  if len(need):
    per_query = row_scores(old, m, queries, need, old.read(need))  # [Q, len(need)]
    pos = np.searchsorted(need, np.where(extra >= 0, extra, need[0]))
    out[:, f:] = np.where(extra >= 0, np.take_along_axis(per_query, pos, axis=1), -np.inf)
  return np.where(valid, out, -np.inf)
