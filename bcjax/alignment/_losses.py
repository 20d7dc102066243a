r"""Alignment losses of BC-Aligner (section 3.2.2) and the embedding alignment error (section 4, metric 3).

Two scalings are offered through ``per_dim``:

* ``per_dim=False`` (the paper): every term is a squared L2 norm :math:`\lVert v \rVert^2`, averaged over rows.
* ``per_dim=True`` (the reference code, snap-stanford/bc-emb): every squared norm is divided by the dimension of
  the space it lives in, i.e. PyTorch's ``MSELoss`` averaged over rows *and* coordinates. The reference's
  :math:`\lambda = 16` was tuned for this scaling, and it sums the loss over three row groups (batch users, positive
  items, negative items), which a caller does by summing three calls.

References:
  Hu, Bansal, Cao, Rao, Subbian, Leskovec, "Learning Backward Compatible Embeddings", KDD 2022.
  https://arxiv.org/abs/2206.03040
"""

import functools
from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks, _reduce
from bcjax._reduce import row_mean, zero_padded
from bcjax.alignment._transforms import BackwardTransform, check_params


def _check_pair(fn: str, z_new, z_prev, w, where, transform=None) -> tuple[jax.Array, jax.Array, Any, jax.Array | None]:
  """Validates a pair of embedding batches and a map's parameters; padded rows become zeros.

  Validates (z_new [n, d_k], z_prev [n, d_{k-1}], W_k [d_{k-1}, d_k] or ``transform``'s parameters, where [n]); padded
  rows become zeros.
  """
  z_new = _checks.as_float_array(fn, "z_new", z_new, ndim=2, finite=False)
  z_prev = _checks.as_float_array(fn, "z_prev", z_prev, ndim=2, finite=False)
  if z_new.shape[0] != z_prev.shape[0]:
    raise ValueError(
      f"{fn}: `z_new` has shape {tuple(z_new.shape)} and `z_prev` has shape {tuple(z_prev.shape)}; "
      f"both must hold the same {z_new.shape[0]} rows (data points)"
    )
  if transform is not None:
    check_params(fn, transform, w, z_prev.shape[1], z_new.shape[1])
  else:
    w = _checks.as_float_array(fn, "w", w, ndim=2)
  if transform is None and w.shape != (z_prev.shape[1], z_new.shape[1]):
    raise ValueError(
      f"{fn}: `w` has shape {tuple(w.shape)} but must be [d_(k-1), d_k] = "
      f"{(z_prev.shape[1], z_new.shape[1])} for `z_new` {tuple(z_new.shape)} and `z_prev` "
      f"{tuple(z_prev.shape)}"
    )
  where = _checks.check_row_mask(fn, where, z_new.shape[0])
  _checks.check_finite(fn, "z_new", z_new, where)
  _checks.check_finite(fn, "z_prev", z_prev, where)
  return zero_padded(z_new, where), zero_padded(z_prev, where), w, where


def _squared_norm(v: jax.Array, per_dim: bool) -> jax.Array:
  """Per-row ||v||^2, optionally divided by the dimension of v (the reference's MSE scaling)."""
  sq = jnp.sum(v * v, axis=-1)
  return sq / v.shape[-1] if per_dim else sq


def single_step_loss(
  z_new: ArrayLike,
  z_prev: ArrayLike,
  w: ArrayLike | dict,
  *,
  transform: BackwardTransform | None = None,
  per_dim: bool = False,
  where: ArrayLike | None = None,
  weights: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""Single-step alignment loss (eq. 7).

  .. math::
    L_{\rm align} = \frac{1}{|\mathcal X|} \sum_{x \in \mathcal X} \lVert \delta_k(x) \rVert^2, \qquad
    \delta_k = B_k(z_k) - z_{k-1}, \quad B_k(z) = W_k z \text{ (linear)}.

  With ``per_dim=True`` each squared norm is divided by :math:`D_{k-1}` (the reference code's ``MSELoss``).

  Args:
    z_new: :math:`z_k`, [n, d_k].
    z_prev: :math:`z_{k-1}` on the same rows, [n, d_{k-1}].
    w: :math:`W_k`, [d_{k-1}, d_k]; or, with ``transform``, that kind's parameters.
    transform: the kind of :math:`B_k` (:mod:`bcjax.alignment` ``linear``, ``orthogonal``, ``affine``, ``mlp``);
      ``None`` is the linear map given as the array ``w``.
    per_dim: divide by the output dimension, as the reference code does.
    where: optional boolean mask of valid rows, [n].
    weights: optional per-row weights c_i >= 0, [n] (e.g. how often a row was drawn): the mean becomes
      :math:`\sum_i c_i \ell_i / \sum_i c_i` over the valid rows (0 when every weight is 0).
    axis_name: mapped axis over which the rows are sharded; the mean is then global.

  Returns:
    A scalar loss.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import single_step_loss
    >>> z_new, z_prev = jnp.ones((4, 3)), jnp.zeros((4, 2))
    >>> float(single_step_loss(z_new, z_prev, jnp.ones((2, 3))))  # every row: ||(3, 3)||^2
    18.0
    >>> float(single_step_loss(z_new, z_prev, jnp.ones((2, 3)), per_dim=True))
    9.0
  """
  z_new, z_prev, w, where = _check_pair("single_step_loss", z_new, z_prev, w, where, transform)
  weights = _check_weights("single_step_loss", weights, z_new.shape[0], where)
  delta = _backward(transform, w, z_new) - z_prev
  return _mean(_squared_norm(delta, per_dim), where, weights, axis_name)


def multi_step_loss(
  z_new: ArrayLike,
  z_prev: ArrayLike,
  w: ArrayLike | dict,
  history: Sequence[ArrayLike | dict],
  *,
  transform: BackwardTransform | None = None,
  history_transforms: BackwardTransform | Sequence[BackwardTransform | None] | None = None,
  per_dim: bool = False,
  where: ArrayLike | None = None,
  weights: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""Multi-step alignment loss of BC-Aligner (eq. 10).

  .. math::
    L_{\rm multi} = \frac{1}{k} \sum_{j=0}^{k-1} \frac{1}{|\mathcal X|} \sum_{x \in \mathcal X}
      \lVert W^j_{k-1} \delta_k(x) \rVert^2, \qquad \delta_k = W_k z_k - z_{k-1}, \quad W^{k-1}_{k-1} = I,

  with :math:`W^j_{k-1} = W_{j+1} \cdots W_{k-1}` composed from the frozen history. The term for j penalises the
  single-step error after it has been carried back to version j, which is how it enters the multi-step error
  (eq. 9); the loss therefore suppresses error amplification. Only :math:`z_{k-1}` and the frozen weights are used,
  never the historical embeddings :math:`z_j`. For k = 1 (empty history) it equals :func:`single_step_loss`.
  With ``per_dim=True`` the term for j is divided by :math:`D_j`.

  The residual is mapped down the chain one weight at a time (as the reference code does), so no composition is
  formed; gradients flow into ``history`` too, so wrap it in ``jax.lax.stop_gradient`` when it is frozen inside a
  differentiated function that also closes over it as a variable.

  **Any transform kind.** For maps that are not linear, :math:`W^j_{k-1}\delta_k` is not defined; the term for j
  is the distance, at version j, between the two things the chain carries there:

  .. math::
    \lVert B^j_{k-1}(B_k(z_k)) - B^j_{k-1}(z_{k-1}) \rVert^2, \qquad B^j_{k-1} = B_{j+1} \circ \cdots \circ
    B_{k-1},

  which equals the linear term when every :math:`B_i` is linear. Chains made of ``None``/``linear`` maps only take
  the linear path above (the same numbers as the array API).

  Args:
    z_new: :math:`z_k`, [n, d_k].
    z_prev: :math:`z_{k-1}` on the same rows, [n, d_{k-1}].
    w: :math:`W_k`, [d_{k-1}, d_k]; or, with ``transform``, that kind's parameters.
    history: ``[B_1, ..., B_{k-1}]``: weights [d_{i-1}, d_i] or the parameters of ``history_transforms``; empty at
      k = 1.
    transform: the kind of :math:`B_k`; ``None`` is the linear map given as the array ``w``.
    history_transforms: the kinds of the history: one for all, one per entry (``None`` for a weight array), or
      ``None`` when the history is weight arrays.
    per_dim: divide each term by its output dimension, as the reference code does.
    where: optional boolean mask of valid rows, [n].
    weights: optional per-row weights c_i >= 0, [n]; every term's mean is then weighted (see
      :func:`single_step_loss`).
    axis_name: mapped axis over which the rows are sharded; the means are then global.

  Returns:
    A scalar loss.

  Raises:
    ValueError: naming the argument, for shapes that disagree or a history whose widths do not chain.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import multi_step_loss
    >>> z_new, z_prev = jnp.ones((4, 2)), jnp.zeros((4, 2))
    >>> w2, w1 = jnp.eye(2), 2.0 * jnp.eye(2)  # delta = (1, 1); W_1 doubles it
    >>> float(multi_step_loss(z_new, z_prev, w2, [w1]))  # (||2 delta||^2 + ||delta||^2) / 2
    5.0
  """
  fn = "multi_step_loss"
  kinds = _history_kinds(fn, history, history_transforms)
  if all(t is None or t.kind == "linear" for t in (transform, *kinds)):  # the linear path (identical numbers)
    w = cast(dict, w)["w"] if transform is not None else w
    history = [cast(dict, h)["w"] if t is not None else h for t, h in zip(kinds, history)]
  else:
    return _chain_loss(fn, z_new, z_prev, w, transform, list(history), kinds, per_dim, where, weights, axis_name)
  z_new, z_prev, w_k, where = _check_pair(fn, z_new, z_prev, w, where)
  weights = _check_weights(fn, weights, z_new.shape[0], where)
  chain = _checks.as_weight_chain("multi_step_loss", "history", history)
  if chain and chain[-1].shape[1] != z_prev.shape[1]:
    raise ValueError(
      f"multi_step_loss: the last history weight `history[{len(chain) - 1}]` has shape "
      f"{tuple(chain[-1].shape)} but `z_prev` has shape {tuple(z_prev.shape)}; W_(k-1) must be "
      f"[d_(k-2), d_(k-1)] with d_(k-1)={z_prev.shape[1]}"
    )
  delta = z_new @ w_k.T - z_prev  # j = k-1 term: W^{k-1}_{k-1} = I
  total = _mean(_squared_norm(delta, per_dim), where, weights, axis_name)
  for w_j in reversed(chain):  # W_{k-1}, ..., W_1 carry delta to versions k-2, ..., 0
    delta = delta @ w_j.T
    total = total + _mean(_squared_norm(delta, per_dim), where, weights, axis_name)
  return total / (len(chain) + 1)


def multi_step_pull(history: Sequence[ArrayLike], *, dim: int | None = None, per_dim: bool = False) -> jax.Array:
  r"""How the multi-step loss weighs a residual, relative to the single-step loss (eq. 10 against eq. 7).

  Both losses are quadratic in the residual :math:`\delta_k = W_k z_k - z_{k-1}`: the single-step loss is the
  mean of :math:`\delta_k^\top \delta_k / c_{k-1}` and the multi-step loss the mean of
  :math:`\delta_k^\top R\, \delta_k / c_{k-1}`, with

  .. math::
    R = \frac{1}{k} \sum_{j=0}^{k-1} \frac{c_{k-1}}{c_j} (W^j_{k-1})^\top W^j_{k-1}, \qquad
    W^j_{k-1} = W_{j+1} \cdots W_{k-1}, \quad W^{k-1}_{k-1} = I,

  where :math:`c_j = D_j` with ``per_dim`` (the reference code's MSE) and 1 without (the paper). An eigenvalue of
  R is the multi-step loss's pull along its eigenvector as a multiple of the single-step loss's; their mean,
  :math:`\kappa = \operatorname{tr} R / D_{k-1}`, is the ratio of the two losses' expectations for an isotropic
  residual. With R = I the two losses coincide (k = 1, or a chain of orthogonal square maps), so BC-Aligner and
  Joint-Lin-SLoss train the same way; the further R is from I, the more the multi-step loss reshapes the training.

  Args:
    history: the frozen ``[W_1, ..., W_{k-1}]``, each [d_{i-1}, d_i]; empty at k = 1.
    dim: :math:`D_{k-1}`, needed only for an empty history; when given with a history it must equal its last
      weight's column count.
    per_dim: the reference code's scaling (see :func:`multi_step_loss`).

  Returns:
    R, symmetric positive semi-definite, [d_{k-1}, d_{k-1}].

  Raises:
    ValueError: naming the argument, for an empty history without ``dim``, or widths that do not chain.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import multi_step_pull
    >>> multi_step_pull([2.0 * jnp.eye(2)]).tolist()  # (4 I + I) / 2: twice as strict along every direction
    [[2.5, 0.0], [0.0, 2.5]]
  """
  fn = "multi_step_pull"
  chain = _checks.as_weight_chain(fn, "history", history)
  if chain:
    d = chain[-1].shape[1]
    if dim is not None and _checks.check_positive_int(fn, "dim", dim) != d:
      raise ValueError(
        f"{fn}: `dim`={dim} but the last history weight `history[{len(chain) - 1}]` has shape "
        f"{tuple(chain[-1].shape)}, i.e. D_(k-1)={d}"
      )
  elif dim is None:
    raise ValueError(f"{fn}: `history` is empty (k = 1); pass `dim` (D_(k-1)) to get R = I")
  else:
    d = _checks.check_positive_int(fn, "dim", dim)
  if not chain:
    return jnp.eye(d, dtype=jnp.float32)
  return _pull(tuple(chain), per_dim)


@functools.partial(jax.jit, static_argnums=(1,))
def _pull(chain: tuple[jax.Array, ...], per_dim: bool) -> jax.Array:
  """:func:`multi_step_pull`'s R for a non-empty, validated chain, in one compiled program."""
  d = chain[-1].shape[1]
  total = jnp.eye(d, dtype=chain[-1].dtype)  # the j = k-1 term: W^{k-1}_{k-1} = I
  carried = total
  for w_j in reversed(chain):  # W^j_{k-1} = W_{j+1} W^{j+1}_{k-1}, for j = k-2, ..., 0
    carried = w_j @ carried
    scale = d / carried.shape[0] if per_dim else 1.0
    total = total + scale * (carried.T @ carried)
  return total / (len(chain) + 1)


def _check_weights(fn: str, weights, n: int, where) -> jax.Array | None:
  if weights is None:
    return None
  weights = _checks.as_float_array(fn, "weights", weights, ndim=1, finite=False)
  if weights.shape[0] != n:
    raise ValueError(f"{fn}: `weights` has shape {tuple(weights.shape)}, expected ({n},) (one per row)")
  _checks.check_finite(fn, "weights", weights, where)
  if _checks.is_concrete(weights) and (where is None or _checks.is_concrete(where)):
    valid = np.asarray(weights) if where is None else np.asarray(weights)[np.asarray(where)]
    if np.any(valid < 0):
      raise ValueError(f"{fn}: `weights` must be >= 0, got a minimum of {float(valid.min())}")
  return weights


def _mean(values: jax.Array, where, weights, axis_name) -> jax.Array:
  """:func:`row_mean`, or with ``weights`` the weighted mean sum(c v) / sum(c) over the valid rows."""
  if weights is None:
    return row_mean(values, where, axis_name)
  c = zero_padded(weights.astype(values.dtype), where)
  total, count = jnp.sum(c * zero_padded(values, where)), jnp.sum(c)
  if axis_name is not None:
    total, count = _reduce.psum_each((total, count), axis_name)
  return jnp.where(count > 0, total / jnp.where(count > 0, count, 1.0), 0.0)


def _backward(transform: BackwardTransform | None, params, z: jax.Array) -> jax.Array:
  return z @ params.T if transform is None else transform.apply(params, z)


def _history_kinds(fn: str, history, history_transforms) -> list[BackwardTransform | None]:
  if isinstance(history, (jax.Array, np.ndarray)):
    raise TypeError(
      f"{fn}: `history` must be a list of backward maps, got a single array of shape {tuple(history.shape)}"
    )
  n = len(history)
  if history_transforms is None or isinstance(history_transforms, BackwardTransform):
    return [history_transforms] * n
  kinds = list(history_transforms)
  if len(kinds) != n:
    raise ValueError(f"{fn}: `history_transforms` names {len(kinds)} kinds for {n} `history` entries")
  return kinds


def _chain_loss(fn, z_new, z_prev, params, transform, history, kinds, per_dim, where, weights, axis_name):
  """The multi-step loss of a chain with non-linear maps: both sides carried down the chain, one map at a time."""
  z_new, z_prev, params, where = _check_pair(fn, z_new, z_prev, params, where, transform)
  weights = _check_weights(fn, weights, z_new.shape[0], where)
  a, b = _backward(transform, params, z_new), z_prev  # B_k(z_k) and z_(k-1), at version k-1
  total = _mean(_squared_norm(a - b, per_dim), where, weights, axis_name)
  d = z_prev.shape[1]
  for i in reversed(range(len(history))):  # B_(k-1), ..., B_1 carry both to versions k-2, ..., 0
    t, p = kinds[i], history[i]
    if t is None:
      p = _checks.as_float_array(fn, f"history[{i}]", p, ndim=2)
      if p.shape[1] != d:
        raise ValueError(f"{fn}: `history[{i}]` has shape {tuple(p.shape)} but maps from dimension {d}")
      d = p.shape[0]
    else:
      d_prev, d_new = t.dims(p)
      if d_new != d:
        raise ValueError(f"{fn}: `history[{i}]` ({t.kind}) maps from dimension {d_new}, expected {d}")
      check_params(fn, t, p, d_prev, d_new)
      d = d_prev
    a, b = _backward(t, p, a), _backward(t, p, b)
    total = total + _mean(_squared_norm(a - b, per_dim), where, weights, axis_name)
  return total / (len(history) + 1)


def alignment_error(
  z_approx: ArrayLike,
  z_true: ArrayLike,
  *,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  r"""Embedding alignment error (section 4, metric 3): the mean L2 distance between rows.

  .. math::
    \frac{1}{|\mathcal X|} \sum_{x} \lVert \tilde z_j(x) - z_j(x) \rVert_2

  Args:
    z_approx: :math:`\tilde z_j`, for example ``apply_chain(z_k, [W_1, ..., W_k])``, [n, d_j].
    z_true: :math:`z_j`, [n, d_j].
    where: optional boolean mask of valid rows, [n].
    axis_name: mapped axis over which the rows are sharded; the mean is then global.

  Returns:
    A scalar. Its gradient is finite (zero) for rows where the two embeddings coincide.

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for shapes that disagree, a malformed row mask, or NaN/inf in the real rows.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import alignment_error
    >>> float(alignment_error(jnp.array([[3.0, 4.0], [0.0, 0.0]]), jnp.zeros((2, 2))))
    2.5
  """
  fn = "alignment_error"
  z_approx = _checks.as_float_array(fn, "z_approx", z_approx, ndim=2, finite=False)
  z_true = _checks.as_float_array(fn, "z_true", z_true, ndim=2, finite=False)
  if z_approx.shape != z_true.shape:
    raise ValueError(
      f"{fn}: `z_approx` has shape {tuple(z_approx.shape)} but `z_true` has shape "
      f"{tuple(z_true.shape)}; they must match"
    )
  where = _checks.check_row_mask(fn, where, z_true.shape[0])
  _checks.check_finite(fn, "z_approx", z_approx, where)
  _checks.check_finite(fn, "z_true", z_true, where)
  diff = zero_padded(z_approx, where) - zero_padded(z_true, where)
  sq = jnp.sum(diff * diff, axis=-1)
  # The derivative of sqrt is infinite at 0; take it on a safe value so exact matches give a zero gradient.
  nonzero = sq > 0
  dist = jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0)
  return row_mean(dist, where, axis_name)
