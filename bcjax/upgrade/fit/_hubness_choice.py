"""Whether a map keeps its hubness correction, and its score scale: both from the training pairs served as an index.

Each half of the training pairs is mapped by the map fitted on the other half (out of sample, as a served index is).
"""

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from bcjax.upgrade import _hubness, _retrieval, _scale
from bcjax.upgrade._map import UpgradeMap
from bcjax.upgrade.fit._closed_form import closed_form
from bcjax.upgrade.fit._cross_validation import _plus


def _score_scale(final: UpgradeMap, halves: list["_HalfFit"]) -> _scale.ScoreScale:
  """The map's :class:`~bcjax.upgrade.ScoreScale`, fitted on each half's images of the pairs it never saw."""
  return _scale.fit_score_scale([(h.queries, h.targets, h.reference) for h in halves], hubness=final.hubness, seed=0)


class _HubnessChoice(NamedTuple):
  keep: bool
  reason: str
  record: dict


class _HalfFit(NamedTuple):
  """One half of the training pairs as a map serves it: the other half's mapped rows query their own old rows."""

  queries: np.ndarray  # mapped rows of the held-out half (the map never saw them)
  targets: np.ndarray  # their own old rows
  reference: np.ndarray  # the fitting half's own images: the correction's reference, as the final map's will be


def _half_fits(kind: str, choices: dict, fold_moments, sample) -> list[_HalfFit]:
  """``kind`` with ``choices`` fitted on each half of the folds (even, odd), serving the other half's sample rows."""
  out = []
  for parity in (0, 1):
    fitting = [f for f in range(len(fold_moments)) if f % 2 == parity]
    moments = functools.reduce(_plus, [fold_moments[f] for f in fitting])
    w, b = closed_form(kind, moments, **choices)
    inside = np.isin(sample.fold, fitting)
    out.append(_HalfFit(sample.new[~inside] @ w.T + b, sample.old[~inside], sample.new[inside] @ w.T + b))
  return out


def _choose_hubness(halves: list[_HalfFit] | None, mode, metric, k, reference_rows: int) -> _HubnessChoice:
  """Whether to keep the hubness correction (:mod:`bcjax.upgrade.fit`), with the reason and a candidate record.

  ``halves``: the training pairs served in two halves (:func:`_half_fits`); ``reference_rows``: the pairs the final
  correction's reference would be drawn from.
  """
  record: dict[str, Any] = {"kind": "hubness", "mode": mode, "k": k}
  if mode == "off":
    return _HubnessChoice(False, "no hubness correction (asked)", record)
  if metric != "cosine":
    return _HubnessChoice(False, f"no hubness correction: it corrects cosine scores, the metric is {metric}", record)
  if mode == "on":
    return _HubnessChoice(True, f"hubness correction (CSLS, k={k}) asked for", record)
  if reference_rows < k:
    return _HubnessChoice(
      False, f"no hubness correction: {reference_rows} paired rows are fewer than its k={k} neighbours", record
    )
  assert halves is not None  # auto: fit_upgrade served them
  n = sum(len(h.queries) for h in halves)
  if min(min(len(h.queries), len(h.reference)) for h in halves) < max(k, 2):
    return _HubnessChoice(
      True,
      f"hubness correction (CSLS, k={k}) kept: {n} training pairs are too few to judge it, and it is kept unless "
      f"shown to lower retrieval",
      record,
    )
  plain, corrected = [], []
  for h in halves:
    bias = _hubness.hubness_bias(h.targets, _hubness.make_hubness(h.reference, k=k))
    plain.append(_retrieval.own_vector_ranks(h.queries, h.targets, metric=metric))
    corrected.append(_retrieval.own_vector_ranks(h.queries, h.targets, metric=metric, item_bias=bias))
  plain_all, corrected_all = np.concatenate(plain), np.concatenate(corrected)
  diff = corrected_all - plain_all
  se = float(diff.std(ddof=1) / math.sqrt(len(diff)))
  record.update(
    criterion="half-fits",
    rows=n,
    rank_score_plain=float(plain_all.mean()),
    rank_score_corrected=float(corrected_all.mean()),
  )
  scores = (
    f"rank score of {n} training pairs, each half served by the map fitted on the other, {plain_all.mean():.4f} "
    f"without, {corrected_all.mean():.4f} with it (paired standard error {se:.2g})"
  )
  if not np.any(diff):  # the pairs cannot tell (every own row ranks alike either way): a regression's image has hubs
    return _HubnessChoice(
      True,
      f"hubness correction (CSLS, k={k}) kept: it changes no rank of these pairs, so they cannot tell whether it helps "
      f"an index ({scores}); kept unless it lowers the score by more than one standard error",
      record,
    )
  keep = bool(diff.mean() >= -se)
  reason = (
    f"hubness correction (CSLS, k={k}) {'kept' if keep else 'left out'}: {scores}; kept unless it lowers the score "
    f"by more than one standard error"
  )
  return _HubnessChoice(keep, reason, record)
