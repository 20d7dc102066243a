"""Choosing a closed-form kind's settings by K-fold cross-validation, scored by out-of-fold retrieval."""

import math
from typing import Any, NamedTuple

import numpy as np

from bcjax.upgrade import _retrieval
from bcjax.upgrade.fit import _moments
from bcjax.upgrade.fit._closed_form import (
  SHRINKAGE_TARGETS,
  _prior,
  _procrustes,
  _reduce_rank,
  _shrunk_weight,
  _spectrum,
  moments_mse,
)
from bcjax.upgrade.fit._records import ALPHAS, RANK_FRACTIONS


def _minus(a: _moments.PairMoments, b: _moments.PairMoments) -> _moments.PairMoments:
  return _moments.PairMoments(*(x - y for x, y in zip(a, b, strict=True)))  # type: ignore[operator]  # fields: int and arrays


def _plus(a: _moments.PairMoments, b: _moments.PairMoments) -> _moments.PairMoments:
  return _moments.PairMoments(*(x + y for x, y in zip(a, b, strict=True)))  # type: ignore[operator]  # fields: int and arrays


class _Fold(NamedTuple):
  """One cross-validation fold.

  The moments it is scored on, the moments fitted on (the other folds), the fitted side's eigendecomposition and
  shrinkage targets (computed once for every choice tried), and which rows of the retrieval sample it holds out.
  """

  held_out: _moments.PairMoments
  fitted: _moments.PairMoments
  spectrum: tuple
  priors: dict
  sample: np.ndarray  # positions in the CV retrieval sample of this fold's held-out rows


class _RetrievalSample(NamedTuple):
  """Training rows held in memory to score choices by retrieval: their new and old embeddings and their folds."""

  new: np.ndarray
  old: np.ndarray
  fold: np.ndarray


# Training rows whose out-of-fold predictions score each choice by retrieval (their own old vector's rank among
# the sample's old vectors); enough to rank choices, small enough that every choice is scored in milliseconds.
CV_SAMPLE_ROWS = 2000


def _folds(fold_moments, total, kind, sample: _RetrievalSample) -> list[_Fold]:
  out = []
  for f, fold in enumerate(fold_moments):
    fitted = _minus(total, fold)
    spectrum = _spectrum(fitted.centred()[0], fitted.count)
    priors = {t: _prior(fitted, t) for t in _targets(total)} if kind == "affine" else {}
    out.append(_Fold(fold, fitted, spectrum, priors, np.flatnonzero(sample.fold == f)))
  return out


def _targets(total: _moments.PairMoments) -> tuple[str, ...]:
  return SHRINKAGE_TARGETS if total.cross.shape[0] == total.cross.shape[1] else ("isometry",)


def _cv_score(
  kind,
  folds: list[_Fold],
  sample: _RetrievalSample,
  metric: str,
  alpha: float = 0.0,
  rank: int | None = None,
  target: str = "isometry",
) -> tuple[float, float]:
  """(retrieval score, mean squared error) of a choice, cross-validated.

  Each fold's map, fitted on the other folds, predicts the fold's held-out rows. The error is over all held-out pairs
  (from the moments); the score is the mean, over the sample's rows, of the share of the sample's other old vectors that
  their out-of-fold prediction ranks below their own old vector (1 = always first). Ranking, not the squared error, is
  what an index sees: a ridge that shrinks every prediction towards the old mean lowers the error but ranks worse.
  """
  errors, predicted = [], np.zeros_like(sample.old)
  for f in folds:
    if kind == "orthogonal":
      w = _procrustes(*f.fitted.centred())
    else:
      w = _reduce_rank(_shrunk_weight(f.fitted, alpha, f.priors.get(target), f.spectrum), f.fitted, rank)
    b = f.fitted.mean_prev - w @ f.fitted.mean_new
    errors.append(moments_mse(w, b, f.held_out))
    predicted[f.sample] = sample.new[f.sample] @ w.T + b
  error = float(np.average(errors, weights=[f.held_out.count for f in folds]))
  return _retrieval.own_vector_rank_score(predicted, sample.old, metric=metric), error


def _choose_closed_form(
  kind: str, fold_moments, total, d_min: int, sample: _RetrievalSample, metric: str, *, score_orthogonal: bool = False
) -> tuple[dict, float, float]:
  """The choices of a closed-form kind with the best cross-validated retrieval score.

  The squared error breaks ties. Returns the choices with that score and error.
  """
  folds = _folds(fold_moments, total, kind, sample)
  if kind == "orthogonal":  # nothing to choose: scored only when auto must rank the kinds by cross-validation
    return ({}, *_cv_score("orthogonal", folds, sample, metric)) if score_orthogonal else ({}, math.nan, math.nan)
  targets = _targets(total) if kind == "affine" else ("isometry",)
  scores = {(t, alpha): _cv_score(kind, folds, sample, metric, alpha, target=t) for t in targets for alpha in ALPHAS}
  target, alpha = max(scores, key=lambda c: (scores[c][0], -scores[c][1]))
  choices: dict[str, Any] = {"alpha": alpha}
  best = scores[(target, alpha)]
  if kind == "affine":
    choices["target"] = target
  # A reduced rank is tried only where the folds can tell ranks apart (at least two pairs per dimension): with few
  # pairs the folds' fitted values span fewer directions than the final fit's.
  if kind == "affine" and total.count >= 2 * total.gram.shape[0]:
    for rank in sorted({max(1, int(d_min * f)) for f in RANK_FRACTIONS}, reverse=True):
      score = _cv_score(kind, folds, sample, metric, alpha, rank, target)
      if score[0] > best[0]:
        choices, best = {"alpha": alpha, "target": target, "rank": rank}, score
  return (choices, *best)
