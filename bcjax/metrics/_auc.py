r"""ROC-AUC by the rank-sum (Mann-Whitney U) identity.

With tied scores sharing their average rank,

.. math::
  \mathrm{AUC} = \frac{\sum_{i:\,y_i=1} r_i - n_+(n_+ + 1)/2}{n_+ n_-},

the probability that a random positive outscores a random negative (ties count one half). Two scores are tied when
they differ by no more than their rounding (:data:`bcjax.metrics._ranking.TIE_ULPS` units of the scores' precision
times the largest |valid score|), so two examples with equal inputs score equal however the summation order rounded
them. Jittable, O(n log n).
"""

import statistics
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax._buckets import pad_to_bucket
from bcjax._device import device_array
from bcjax.metrics._ranking import tie_tolerance


def roc_auc(scores: ArrayLike, labels: ArrayLike, *, where: ArrayLike | None = None) -> jax.Array:
  """ROC-AUC of ``scores`` [n] for binary ``labels`` [n] (bool or 0/1); ``where`` [n] drops padded entries.

  Args:
    scores: scores, [n].
    labels: binary labels, [n] (bool or 0/1).
    where: mask of the entries to keep, [n].

  Returns:
    The AUC, a scalar.

  Raises:
    ValueError: (on concrete inputs) when only one class is present, where AUC is undefined.
  """
  fn = "roc_auc"
  scores = _checks.as_float_array(fn, "scores", scores, ndim=1, finite=False)
  if np.shape(labels) != scores.shape:
    raise ValueError(f"{fn}: `labels` has shape {tuple(np.shape(labels))}, expected {tuple(scores.shape)}")
  where = _checks.check_row_mask(fn, where, scores.shape[0])
  _checks.check_finite(fn, "scores", scores, where)
  if _checks.is_concrete(labels) and (where is None or _checks.is_concrete(where)):
    # Concrete inputs (every eager call) are checked and masked in NumPy: jnp comparisons here would compile a small
    # program per evaluation-set length.
    labels_np = np.asarray(labels)
    valid_np = np.ones(scores.shape, bool) if where is None else np.asarray(where)
    if not np.all(((labels_np == 0) | (labels_np == 1))[valid_np]):
      raise ValueError(f"{fn}: `labels` must be binary (0/1 or bool) on the valid entries")
    positive_np = (labels_np == 1) & valid_np
    n_pos = int(np.sum(positive_np))
    n_neg = int(np.sum(valid_np)) - n_pos
    if n_pos == 0 or n_neg == 0:
      raise ValueError(f"{fn}: needs both classes, got {n_pos} positive and {n_neg} negative entries")
    if _checks.is_concrete(scores):
      # Eager calls come with every evaluation set's own length; padding to a power of two bounds the compiles.
      return _rank_sum_auc(*pad_to_bucket((scores, positive_np, valid_np), (0.0, False, False)))
    return _rank_sum_auc(scores, device_array(positive_np), device_array(valid_np))
  valid = jnp.ones(scores.shape, bool) if where is None else where
  positive = (labels == 1) & valid
  return _rank_sum_auc(scores, positive, valid)


@jax.jit
def _rank_sum_auc(scores: jax.Array, positive: jax.Array, valid: jax.Array) -> jax.Array:
  n_pos, n_neg = jnp.sum(positive), jnp.sum(~positive & valid)
  # Invalid entries go to +inf, above every valid score, so they do not shift valid ranks.
  rank = _average_ranks(jnp.where(valid, scores, jnp.inf), tie_tolerance(scores, valid))
  dtype = scores.dtype
  n_pos, n_neg = n_pos.astype(dtype), n_neg.astype(dtype)
  rank_sum = jnp.sum(jnp.where(positive, rank, 0.0))
  return (rank_sum - n_pos * (n_pos + 1) / 2) / jnp.maximum(n_pos * n_neg, 1.0)


class AucInterval(NamedTuple):
  """:func:`roc_auc_interval`'s result: the AUC, DeLong's standard error and the normal interval's ends."""

  auc: jax.Array
  std_error: jax.Array
  low: jax.Array
  high: jax.Array


def roc_auc_interval(
  scores: ArrayLike, labels: ArrayLike, *, level: float = 0.95, where: ArrayLike | None = None
) -> AucInterval:
  r"""ROC-AUC of ``scores`` [n] for binary ``labels`` [n] with DeLong's interval over the examples.

  Each positive i gets the placement :math:`V_{10}(i)`, the share of negatives it outscores, and each negative j
  :math:`V_{01}(j)`, the share of positives that outscore it (ties count one half); the AUC is the mean of either.
  DeLong, DeLong and Clarke-Pearson (1988, *Biometrics* 44(3), eq. 2 for one AUC) estimate its variance as

  .. math::
    \widehat{\mathrm{Var}} = \frac{s^2(V_{10})}{n_+} + \frac{s^2(V_{01})}{n_-},

  with :math:`s^2` the sample variance (ddof 1), and the interval is
  :math:`\mathrm{AUC} \pm z_{(1+\text{level})/2} \sqrt{\widehat{\mathrm{Var}}}`, clipped to [0, 1]. The placements
  come from three rank passes (all valid entries, positives only, negatives only): O(n log n), jittable.

  Use it to ask whether a classifier is above chance on an evaluation set (``low > 0.5``) before its AUC is compared
  with another's. With one example of a class the variance of that class's placements is taken as 0.

  Args:
    scores: [n] classifier scores, higher for positive.
    labels: [n] binary labels (bool or 0/1).
    level: the interval's coverage, in (0, 1).
    where: [n] bool, False for padded entries.

  Returns:
    An :class:`AucInterval`: the AUC, its standard error and the interval's ends.

  Raises:
    ValueError: (on concrete inputs) when only one class is present, or ``level`` is outside (0, 1).
  """
  fn = "roc_auc_interval"
  level = float(level)
  if not 0.0 < level < 1.0:
    raise ValueError(f"{fn}: `level` must be in (0, 1), got {level!r}")
  auc = roc_auc(scores, labels, where=where)  # checks every argument
  values = _checks.as_float_array(fn, "scores", scores, ndim=1, finite=False)
  dtype = values.dtype
  if _checks.is_concrete(values) and _checks.is_concrete(labels) and (where is None or _checks.is_concrete(where)):
    # masks in NumPy and lengths padded to a power of two: one compiled program per octave of evaluation sizes
    valid_np = np.ones(values.shape, bool) if where is None else np.asarray(where, bool)
    positive_np = (np.asarray(labels) == 1) & valid_np
    values, positive, valid = pad_to_bucket((values, positive_np, valid_np), (0.0, False, False))
  else:
    valid = jnp.ones(values.shape, bool) if where is None else jnp.asarray(where, bool)
    positive = (jnp.asarray(labels) == 1) & valid
  z = jnp.asarray(statistics.NormalDist().inv_cdf(0.5 + level / 2), dtype)  # the normal quantile, in double
  se = _delong_std_error(values, positive, valid)
  return AucInterval(auc, se, jnp.clip(auc - z * se, 0.0, 1.0), jnp.clip(auc + z * se, 0.0, 1.0))


def _average_ranks(s: jax.Array, tau: jax.Array) -> jax.Array:
  """1-based ranks of ``s`` with ties sharing their average rank.

  1-based ranks of ``s`` with ties (entries within ``tau`` of each other) sharing their average rank: an entry's rank is
  the count below ``s - tau`` plus half the count within ``tau`` of it, itself included, plus one half (entries at +inf
  rank above every finite one). The within-``tau`` relation is symmetric, so the ranks of any subset still sum as the
  rank-sum identity needs.
  """
  ordered = jnp.sort(s)
  return (jnp.searchsorted(ordered, s - tau, side="left") + jnp.searchsorted(ordered, s + tau, side="right") + 1) / 2.0


@jax.jit
def _delong_std_error(scores: jax.Array, positive: jax.Array, valid: jax.Array) -> jax.Array:
  negative = ~positive & valid
  dtype = scores.dtype
  n_pos, n_neg = jnp.sum(positive).astype(dtype), jnp.sum(negative).astype(dtype)
  # Masked entries sit at +inf: they rank above every real score and move no real rank.
  s = jnp.where(valid, scores, jnp.inf)
  tau = tie_tolerance(scores, valid)
  rank_all = _average_ranks(s, tau)
  # Negatives outscored by a positive = its rank among all minus its rank among positives (ties: one half each).
  v10 = (rank_all - _average_ranks(jnp.where(positive, s, jnp.inf), tau)) / jnp.maximum(n_neg, 1.0)
  # Positives that outscore a negative = the positives minus those at or below it.
  v01 = (n_pos - (rank_all - _average_ranks(jnp.where(negative, s, jnp.inf), tau))) / jnp.maximum(n_pos, 1.0)

  def sample_variance(v, members, n):
    mean = jnp.sum(jnp.where(members, v, 0.0)) / jnp.maximum(n, 1.0)
    return jnp.sum(jnp.where(members, (v - mean) ** 2, 0.0)) / jnp.maximum(n - 1.0, 1.0)

  variance = sample_variance(v10, positive, n_pos) / n_pos + sample_variance(v01, negative, n_neg) / n_neg
  return jnp.sqrt(variance)
