"""A measure's interval over rows, and a row sample, as every report measure takes them."""

import math

import jax
import numpy as np

from bcjax.metrics import bootstrap_means
from bcjax.upgrade.report._records import _REPLICATES, Measure


def interval(values: np.ndarray, reference: np.ndarray | None = None, *, seed: int, means: str, **extra) -> Measure:
  """The mean of ``values`` with a 95 % percentile bootstrap interval over rows.

  The mean of ``values`` (or the ratio of its mean to ``reference``'s, paired by row) with a 95 % percentile bootstrap
  interval over rows (:func:`bcjax.metrics.bootstrap_means`, the resampler every bcjax interval uses), as a
  :class:`Measure` meaning ``means`` (``extra``: its other fields).
  """
  values = np.asarray(values, np.float64)
  columns = values[:, None] if reference is None else np.stack([values, np.asarray(reference, np.float64)], axis=1)
  draws = bootstrap_means([columns], jax.random.key(seed), num_samples=_REPLICATES)
  if reference is None:
    estimate, draws = float(values.mean()), draws[:, 0]
  else:
    denominator = columns[:, 1].mean()
    estimate = float(values.mean() / denominator) if denominator > 0 else math.nan
    ratio = draws[:, 0] / np.where(draws[:, 1] > 0, draws[:, 1], 1.0)
    draws = ratio[draws[:, 1] > 0]
  low, high = np.percentile(draws, [2.5, 97.5]) if draws.size else (math.nan, math.nan)
  return Measure(estimate, float(low), float(high), len(values), means, **extra)


def sample_rows(rows: np.ndarray, limit: int, seed: int) -> np.ndarray:
  if len(rows) <= limit:
    return np.asarray(rows)
  return np.sort(np.random.default_rng(seed).choice(rows, size=limit, replace=False))
