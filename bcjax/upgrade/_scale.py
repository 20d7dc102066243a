r"""One score scale for every row a bridged search compares: native old rows, bridged rows and re-embedded rows.

A bridged search scores a stored old-model row :math:`x` for a new-model query :math:`q` by
:math:`s = \cos(B(q), x) - \beta(x)` (:mod:`bcjax.upgrade._hubness`). Two other kinds of row share the store:

* **bridged rows**, :math:`b = B(y)`, written by :func:`~bcjax.upgrade.bridge_items` for items embedded by the new
  model only. A mapped query meets a mapped row differently from an old row: the map's errors for similar inputs are
  alike, so a query's image sits closer to its near neighbours' images than to their old rows, and the correction,
  fitted on old rows, lowers a mapped row by its own neighbourhood among mapped rows. Bridged rows then outscore old
  ones for queries that are not theirs: 600 bridged documents took first place for 8.7 % of other queries where their
  old copies took 1.8 % (paraphrase-MiniLM-L3 -> all-MiniLM-L6, ``tests/test_upgrade_real_models.py``). A bridged
  row's score is shifted by :math:`c_b`, fitted on paired items the map never saw (each half of the training pairs
  mapped by the map fitted on the other half, whose own images are the correction's reference; a map's images of its
  own training pairs sit too close to their old rows to show the effect). Each held-out item's mapped row queries the
  others, and :math:`c_b` is the more negative of two shifts, each making other items' bridged rows come as close
  to a query's own old row as their old rows do. (1) Pairs: where other items' old rows outscore some query's own
  old row, the shift at which their mapped rows do so for as many (query, item) pairs. (2) The tail: each query's
  margin is its own old row's score less the best other item's, once over the others' old rows (:math:`m_x`) and
  once over their mapped rows (:math:`m_b`); sorted, the margins of equal rank are compared among the 5 % of queries
  closest to a miss (the lowest 1 % left out as too noisy), and the shift is the mean of
  :math:`m_{b,(i)} - m_{x,(i)}` there. The pairs see a paired item's own noise where a document is as noisy a query
  as a served one (synthetic models with fresh noise per call: ``tests/test_stores.py``); the tail sees near misses
  where documents are far easier queries than served ones (a paraphrase, on the real models above: no paired
  document's own old row is beaten, and the tail's shift lands within 0.005 of the one that equates the two
  first-place rates on served queries, about -0.02, from 200 to 1,500 pairs). Shifted, bridged rows win first
  places about as often as old rows; the price is that a bridged row's own queries find it less often than its old
  copy (0.79 against 0.91 of them on the real models), since the map's image of it is noisier;
* **re-embedded rows** (the two-stage re-ranking), whose new-model vector :math:`y` is known: a query's
  re-embedded candidates keep the bridged scores they hold between them, reassigned in the new model's order
  (:func:`~bcjax.upgrade.stores._two_stage.two_stage_scores`). Nothing needs fitting: every other candidate keeps
  its score and rank, and the re-embedded ones are ordered by the new model among themselves.

The bridged-row offset is fitted by :func:`fit_score_scale` on out-of-sample images of paired rows (no scored query
or row meets itself or its twin in the correction's reference, as a served query and an index row do not) and
stored with the map (:class:`ScoreScale`).
"""

import math
from typing import NamedTuple

import numpy as np

from bcjax._unit import unit_rows
from bcjax.upgrade import _hubness

MIN_ROWS = 40
"""Paired rows :func:`fit_score_scale` needs."""
MAX_ROWS = 2000  # held-out rows scored per group: a 2,000 x 2,000 score matrix
TAIL = (0.01, 0.05)
"""The ranks of the sorted margins :func:`fit_score_scale` compares, as shares of the scored queries (the lowest)."""


class ScoreScale(NamedTuple):
  r"""How a bridged search puts rows written through the map on the old rows' scale (:mod:`bcjax.upgrade._scale`).

  ``bridged_offset``: added to the score of a row written through the map, :math:`c_b`.
  """

  bridged_offset: float


IDENTITY = ScoreScale(0.0)
"""No calibration: a bridged row scored like an old one."""


def fit_score_scale(groups, *, hubness: _hubness.Hubness | None, seed: int = 0) -> ScoreScale:
  r"""The :class:`ScoreScale` of a map from out-of-sample images of paired rows (:mod:`bcjax.upgrade._scale`).

  Each group is one map's images of paired rows it was not fitted on, those rows' old vectors, and the map's images
  of the rows it was fitted on (the correction's reference, as the served map's is its images of its training pairs).
  Up to :data:`MAX_ROWS` rows of a group are scored, each as a query (its mapped row) against the group's other old
  rows and mapped rows. The margins of every group are pooled before they are sorted.

  Args:
    groups: triples ``(mapped, old, reference)``: images :math:`B(y_i)` [n, D_(k-1)] of paired new-model rows the
      map never saw, the paired old-model rows :math:`x_i` [n, D_(k-1)], and the map's images of its own training
      rows [m, D_(k-1)].
    hubness: the map's correction (its k is used), or None for a map without one.
    seed: seeds which rows are scored where a group holds more than :data:`MAX_ROWS`.

  Returns:
    The fitted :class:`ScoreScale`; :data:`IDENTITY` with fewer than :data:`MIN_ROWS` rows in all.

  Raises:
    ValueError: for a group whose mapped and old rows differ in number.
  """
  parts = [_margins(np.asarray(b), np.asarray(x), np.asarray(r), hubness, seed) for b, x, r in groups]
  m_old, m_bridged = (np.sort(np.concatenate([p[i] for p in parts])) for i in (0, 1))
  n = len(m_old)
  if n < MIN_ROWS:
    return IDENTITY
  low = max(1, math.ceil(TAIL[0] * n))
  offset = float(np.mean((m_bridged - m_old)[low : max(low + 1, math.ceil(TAIL[1] * n))]))
  beaten = sum(p[2] for p in parts)  # (query, other item) pairs whose old row outscores the query's own
  if beaten:  # ... as often as their mapped rows do, shifted: c with `beaten` pair margins below it
    pairs = np.concatenate([p[3] for p in parts])
    below = np.partition(pairs, [beaten - 1, min(beaten, len(pairs) - 1)])
    upper = below[beaten] if beaten < len(pairs) else below[-1] + 1e-6
    offset = min(offset, float(0.5 * (below[beaten - 1] + upper)))
  return ScoreScale(offset)


def _margins(mapped, old, reference, hubness, seed: int) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
  """The margins of one group's scored queries (:func:`fit_score_scale`).

  Returns each query's own old row's score less the best other old row's, and less the best other mapped row's; how
  many (query, other item) old rows outscore the query's own; and every own score less each other mapped row's.
  """
  if len(old) != len(mapped):
    raise ValueError(f"fit_score_scale: `mapped` and `old` must have the same rows, got {len(mapped)} and {len(old)}")
  if len(mapped) < 2:  # no other item to be beaten by
    return np.empty(0), np.empty(0), 0, np.empty(0)
  scored = np.sort(np.random.default_rng(seed).permutation(len(mapped))[:MAX_ROWS])
  b, x = (unit_rows(a[scored], np.float64) for a in (mapped, old))
  beta_x = beta_b = np.zeros(len(scored))
  if hubness is not None and len(reference) >= hubness.k:
    fitted_on = _hubness.make_hubness(reference, k=hubness.k)
    beta_x = _hubness.hubness_bias(x.astype(np.float32), fitted_on).astype(np.float64)
    beta_b = _hubness.hubness_bias(b.astype(np.float32), fitted_on).astype(np.float64)
  native = b @ x.T - beta_x[None, :]  # [query j, item i]: the score of item i's old row for item j's query
  bridged = b @ b.T - beta_b[None, :]  # ... and of its mapped row
  own = np.diag(native).copy()  # a view otherwise: the diagonal is overwritten next
  np.fill_diagonal(native, -np.inf)
  np.fill_diagonal(bridged, -np.inf)
  others = ~np.eye(len(scored), dtype=bool)
  beaten = int(np.sum(native > own[:, None]))
  return own - native.max(axis=1), own - bridged.max(axis=1), beaten, (own[:, None] - bridged)[others]
