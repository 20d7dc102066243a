r"""One score scale for every row a bridged search compares: native old rows, bridged rows and re-embedded rows.

A bridged search scores a stored old-model row :math:`x` for a new-model query :math:`q` by
:math:`s = \cos(B(q), x) - \beta(x)` (:mod:`bcjax.upgrade._hubness`). Two other kinds of row share the store:

* **bridged rows**, :math:`b = B(y)`, written by :func:`~bcjax.upgrade.bridge_items` for items embedded by the new
  model only. A mapped query meets a mapped row differently from an old row: a regression's images crowd together
  (their cosines run high), an isometry's keep the new model's noise (their cosines spread wider), and the
  correction, fitted on old rows, lowers a mapped row by its own neighbourhood among mapped rows. Either way bridged
  rows outscore old ones for queries that are not theirs: 500 bridged documents took first place for 8.7 % of other
  queries where their old copies took 0.23 %. A bridged row's score is shifted by :math:`c_b`, fitted on paired
  items, whose old row and mapped row are both known: each paired item's mapped row queries the others, and
  :math:`c_b` is the shift at which other items' mapped rows outscore the query's own old row exactly as often as
  their old rows do. A bridged row then takes first place for other queries as often as its old copy would (its own
  queries find it about as often too, a little less where the map's image of it is noisy);
* **re-embedded rows** (the two-stage re-ranking), whose new-model vector :math:`y` is known: a query's
  re-embedded candidates keep the bridged scores they hold between them, reassigned in the new model's order
  (:func:`~bcjax.upgrade.stores._two_stage.two_stage_scores`). Nothing needs fitting: every other candidate keeps
  its score and rank, and the re-embedded ones are ordered by the new model among themselves.

The bridged-row offset is fitted by :func:`fit_score_scale` on paired rows, the correction's reference drawn from
other paired rows (no scored query or row meets itself or its twin in it, as a served query and an index row do
not), and stored with the map (:class:`ScoreScale`).
"""

from typing import NamedTuple

import numpy as np

from bcjax._unit import unit_rows
from bcjax.upgrade import _hubness

MIN_ROWS = 40
"""Paired rows :func:`fit_score_scale` needs."""
MAX_ROWS = 1000  # paired rows scored (as many more give the correction's reference): a 1,000 x 1,000 score matrix


class ScoreScale(NamedTuple):
  r"""How a bridged search puts rows written through the map on the old rows' scale (:mod:`bcjax.upgrade._scale`).

  ``bridged_offset``: added to the score of a row written through the map, :math:`c_b`.
  """

  bridged_offset: float


IDENTITY = ScoreScale(0.0)
"""No calibration: a bridged row scored like an old one."""


def fit_score_scale(mapped, old, *, hubness: _hubness.Hubness | None, seed: int = 0) -> ScoreScale:
  r"""The :class:`ScoreScale` of a map from paired rows (:mod:`bcjax.upgrade._scale`).

  Up to :data:`MAX_ROWS` of the rows are scored, each as a query (its mapped row) against the others' old rows and
  mapped rows; as many others give the hubness correction's reference, so that no scored query or row meets itself or
  its twin in it (a served query and an index row do not).

  Args:
    mapped: the map's images :math:`B(y_i)` of the paired new-model rows, [n, D_(k-1)].
    old: the paired old-model rows :math:`x_i`, [n, D_(k-1)].
    hubness: the map's correction (its k is used), or None for a map without one.
    seed: seeds which rows are scored.

  Returns:
    The fitted :class:`ScoreScale`; :data:`IDENTITY` with fewer than :data:`MIN_ROWS` rows.

  Raises:
    ValueError: for inputs with different row counts.
  """
  mapped, old = np.asarray(mapped), np.asarray(old)
  n = len(mapped)
  if len(old) != n:
    raise ValueError(f"fit_score_scale: `mapped` and `old` must have the same rows, got {n} and {len(old)}")
  if n < MIN_ROWS:
    return IDENTITY
  order = np.random.default_rng(seed).permutation(n)[: 2 * MAX_ROWS]
  half = len(order) // 2
  reference, scored = np.sort(order[:half]), np.sort(order[half:])
  b, x = (unit_rows(a[scored], np.float64) for a in (mapped, old))
  beta_x = beta_b = np.zeros(len(scored))
  if hubness is not None and half >= hubness.k:
    held_apart = _hubness.make_hubness(mapped[reference], k=hubness.k)
    beta_x = _hubness.hubness_bias(x.astype(np.float32), held_apart).astype(np.float64)
    beta_b = _hubness.hubness_bias(b.astype(np.float32), held_apart).astype(np.float64)
  native = b @ x.T - beta_x[None, :]  # [query j, item i]: the score of item i's old row for item j's query
  bridged = b @ b.T - beta_b[None, :]  # ... and of its mapped row
  return ScoreScale(_bridged_offset(native, bridged, ~np.eye(len(scored), dtype=bool)))


def _bridged_offset(native: np.ndarray, bridged: np.ndarray, others: np.ndarray) -> float:
  """The shift that lets other items' bridged rows outscore a query's own old row as often as their old rows do."""
  own = np.diag(native)[:, None]
  beaten = int(np.sum((native > own) & others))  # other items' old rows above a query's own
  margins = np.sort((own - bridged)[others])  # a bridged row shifted by c beats the own row where c > its margin
  if beaten == 0:  # no old row ever beats an own row: bridged rows should not either (and are never raised)
    return float(min(0.0, margins[0]))
  upper = margins[beaten] if beaten < len(margins) else margins[-1] + 1e-6
  return float(0.5 * (margins[beaten - 1] + upper))  # `beaten` margins below it
