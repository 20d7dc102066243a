r"""ROC-AUC by the rank-sum (Mann-Whitney U) identity, with tied scores sharing their average rank:

.. math::
  \mathrm{AUC} = \frac{\sum_{i:\,y_i=1} r_i - n_+(n_+ + 1)/2}{n_+ n_-},

the probability that a random positive outscores a random negative (ties count one half). Jittable, O(n log n).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax._buckets import pad_to_bucket


def roc_auc(scores: ArrayLike, labels: ArrayLike, *, where: ArrayLike | None = None) -> jax.Array:
  """ROC-AUC of ``scores`` [n] for binary ``labels`` [n] (bool or 0/1); ``where`` [n] drops padded entries.

  Raises:
    ValueError: (on concrete inputs) when only one class is present, where AUC is undefined.
  """
  fn = "roc_auc"
  scores = _checks.as_float_array(fn, "scores", scores, ndim=1, finite=False)
  labels = jnp.asarray(labels)
  if labels.shape != scores.shape:
    raise ValueError(f"{fn}: `labels` has shape {tuple(labels.shape)}, expected {tuple(scores.shape)}")
  where = _checks.check_row_mask(fn, where, scores.shape[0])
  _checks.check_finite(fn, "scores", scores, where)
  valid = jnp.ones(scores.shape, bool) if where is None else where
  if _checks.is_concrete(labels) and _checks.is_concrete(valid):
    binary = np.asarray((labels == 0) | (labels == 1))[np.asarray(valid)]
    if not binary.all():
      raise ValueError(f"{fn}: `labels` must be binary (0/1 or bool) on the valid entries")
  positive = (labels == 1) & valid
  if _checks.is_concrete(positive) and _checks.is_concrete(valid):
    n_pos = int(np.sum(np.asarray(positive)))
    n_neg = int(np.sum(np.asarray(valid))) - n_pos
    if n_pos == 0 or n_neg == 0:
      raise ValueError(f"{fn}: needs both classes, got {n_pos} positive and {n_neg} negative entries")
    if _checks.is_concrete(scores):
      # Eager calls come with every evaluation set's own length; padding to a power of two bounds the compiles.
      scores, positive, valid = pad_to_bucket((scores, positive, valid), (0.0, False, False))
  return _rank_sum_auc(scores, positive, valid)


@jax.jit
def _rank_sum_auc(scores: jax.Array, positive: jax.Array, valid: jax.Array) -> jax.Array:
  n_pos, n_neg = jnp.sum(positive), jnp.sum(~positive & valid)
  # Invalid entries go to +inf, above every valid score, so they do not shift valid ranks.
  s = jnp.where(valid, scores, jnp.inf)
  ordered = jnp.sort(s)
  below = jnp.searchsorted(ordered, s, side="left")
  upto = jnp.searchsorted(ordered, s, side="right")
  rank = (below + upto + 1) / 2.0  # 1-based average rank among ties
  dtype = scores.dtype
  n_pos, n_neg = n_pos.astype(dtype), n_neg.astype(dtype)
  rank_sum = jnp.sum(jnp.where(positive, rank, 0.0))
  return (rank_sum - n_pos * (n_pos + 1) / 2) / jnp.maximum(n_pos * n_neg, 1.0)
