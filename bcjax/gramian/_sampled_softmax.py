r"""The sampled-softmax baseline with logQ correction (Yi et al., RecSys 2019; TFRS / Merlin's in-batch softmax)."""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bcjax import _checks


def sampled_softmax_loss(query: ArrayLike, candidates: ArrayLike, labels: ArrayLike, *,
                         log_q: ArrayLike | None = None, where: ArrayLike | None = None,
                         axis_name: str | None = None) -> jax.Array:
  r"""Softmax cross-entropy over sampled candidates with the logQ correction.

  .. math::
    \ell_i = -s_{i, y_i} + \log \sum_j \exp(s_{ij}), \qquad s_{ij} = \langle x_i, c_j \rangle - \log Q_j,

  where :math:`Q_j` is the probability that candidate j was sampled. Subtracting :math:`\log Q_j` removes the
  popularity bias of the sample: a frequently sampled item would otherwise be over-represented as a negative.
  With in-batch negatives, ``candidates`` are the batch's items and ``labels = arange(B)``.

  Args:
    query: [B, k]; candidates: [C, k]; labels: index of each row's positive among the candidates, [B].
    log_q: :math:`\log Q_j`, [C]; no correction when None.
    where: optional boolean row mask, [B].
    axis_name: mapped axis over which the rows (not the candidates) are sharded, for the mean.

  Returns:
    The mean loss over valid rows.
  """
  fn = "sampled_softmax_loss"
  query = _checks.as_float_array(fn, "query", query, ndim=2)
  candidates = _checks.as_float_array(fn, "candidates", candidates, ndim=2)
  if query.shape[1] != candidates.shape[1]:
    raise ValueError(f"{fn}: `query` {tuple(query.shape)} and `candidates` {tuple(candidates.shape)} must share k")
  labels = jnp.asarray(labels)
  if labels.shape != (query.shape[0],):
    raise ValueError(f"{fn}: `labels` has shape {tuple(labels.shape)}; expected ({query.shape[0]},)")
  logits = query @ candidates.T
  if log_q is not None:
    log_q = _checks.as_float_array(fn, "log_q", log_q, ndim=1)
    if log_q.shape[0] != candidates.shape[0]:
      raise ValueError(f"{fn}: `log_q` has shape {tuple(log_q.shape)}; expected ({candidates.shape[0]},)")
    logits = logits - log_q[None, :]
  # log-sum-exp with the max shifted out under stop_gradient for stability.
  shift = jax.lax.stop_gradient(jnp.max(logits, axis=1, keepdims=True))
  lse = jnp.log(jnp.sum(jnp.exp(logits - shift), axis=1)) + shift[:, 0]
  per_row = lse - jnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
  mask = jnp.ones_like(per_row) if where is None else _checks.check_row_mask(fn, where, per_row.shape[0]).astype(
      per_row.dtype)
  total, count = jnp.sum(per_row * mask), jnp.sum(mask)
  if axis_name is not None:
    total, count = jax.lax.psum((total, count), axis_name)
  return total / jnp.maximum(count, 1)
