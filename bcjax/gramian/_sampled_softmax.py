r"""The sampled-softmax baseline with logQ correction (Yi et al., RecSys 2019; TFRS / Merlin's in-batch softmax)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax._reduce import row_mean, zero_padded


def sampled_softmax_loss(
  query: ArrayLike,
  candidates: ArrayLike,
  labels: ArrayLike,
  *,
  log_q: ArrayLike | None = None,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""Softmax cross-entropy over sampled candidates with the logQ correction.

  .. math::
    \ell_i = -s_{i, y_i} + \log \sum_j \exp(s_{ij}), \qquad s_{ij} = \langle x_i, c_j \rangle - \log Q_j,

  where :math:`Q_j` is the probability that candidate j was sampled. Subtracting :math:`\log Q_j` removes the
  popularity bias of the sample: a frequently sampled item would otherwise be over-represented as a negative.
  With in-batch negatives, ``candidates`` are the batch's items and ``labels = arange(B)``.

  Args:
    query: the query embeddings, [B, k].
    candidates: the candidate embeddings, [C, k].
    labels: index of each row's positive among the candidates, [B], in [0, C) (checked on concrete inputs; a
      traced out-of-range label cannot be caught inside ``jit``).
    log_q: :math:`\log Q_j`, [C]; no correction when None.
    where: optional boolean row mask, [B].
    axis_name: mapped axis over which the rows (not the candidates) are sharded, for the mean.

  Returns:
    The mean loss over valid rows.

  Raises:
    TypeError: labels that are not integers, or inputs that are not floating.
    ValueError: naming the argument, for shapes that disagree, out-of-range labels (concrete) or NaN/inf in the real
      rows.
  """
  fn = "sampled_softmax_loss"
  query = _checks.as_float_array(fn, "query", query, ndim=2, finite=False)
  candidates = _checks.as_float_array(fn, "candidates", candidates, ndim=2)
  if query.shape[1] != candidates.shape[1]:
    raise ValueError(f"{fn}: `query` {tuple(query.shape)} and `candidates` {tuple(candidates.shape)} must share k")
  b, c = query.shape[0], candidates.shape[0]
  where = _checks.check_row_mask(fn, where, b)
  _checks.check_finite(fn, "query", query, where)
  if not jnp.issubdtype(jnp.result_type(labels), jnp.integer):
    raise TypeError(f"{fn}: `labels` must be integer candidate indices, got dtype {jnp.result_type(labels)}")
  labels = jnp.asarray(labels)
  if labels.shape != (b,):
    raise ValueError(f"{fn}: `labels` has shape {tuple(labels.shape)}; expected ({b},)")
  if _checks.is_concrete(labels) and (where is None or _checks.is_concrete(where)):
    valid = np.asarray(labels) if where is None else np.asarray(labels)[np.asarray(where)]
    if valid.size and (valid.min() < 0 or valid.max() >= c):
      raise ValueError(
        f"{fn}: `labels` must index the {c} candidates, in [0, {c}); got range [{int(valid.min())}, {int(valid.max())}]"
      )
  # Padded rows may carry any label (e.g. -1): point them at candidate 0 so the gather stays in range.
  labels = labels if where is None else jnp.where(where, labels, 0)
  logits = zero_padded(query, where) @ candidates.T
  if log_q is not None:
    log_q = _checks.as_float_array(fn, "log_q", log_q, ndim=1)
    if log_q.shape[0] != c:
      raise ValueError(f"{fn}: `log_q` has shape {tuple(log_q.shape)}; expected ({c},)")
    logits = logits - log_q[None, :]
  # log-sum-exp with the max shifted out under stop_gradient for stability.
  shift = jax.lax.stop_gradient(jnp.max(logits, axis=1, keepdims=True))
  lse = jnp.log(jnp.sum(jnp.exp(logits - shift), axis=1)) + shift[:, 0]
  per_row = lse - jnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
  return row_mean(per_row, where, axis_name)
