r"""Fitting a linear backward transformation :math:`W_k` on fixed embeddings (post-hoc alignment, section 3.2.3).

Post-hoc alignment keeps :math:`M_k` and :math:`M_{k-1}` fixed and only learns :math:`W_k`. Both alignment losses
are then quadratic in :math:`W_k`. The multi-step loss is :math:`\mathbb E[\delta^\top A \delta]` with
:math:`A = \frac1k\sum_j (W^j_{k-1})^\top W^j_{k-1} \succeq I/k`, which is invertible, so its minimisers are exactly
those of the single-step loss: **at convergence post-hoc MLoss and SLoss give the same** :math:`W_k`, namely the
least-squares solution. The two differ only through the optimisation path (finite steps, early stopping), which is
why the paper's multi-step loss pays off in *joint* training, where it also shapes :math:`z_k`.
"""

import functools
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from bcjax import _checks, _reduce
from bcjax.alignment._linear import init_backward
from bcjax.alignment._losses import multi_step_loss, single_step_loss
from bcjax.alignment._transforms import BackwardTransform


class PosthocFit(NamedTuple):
  """Result of :func:`fit_posthoc`; pass it back as ``init=`` to continue the fit."""

  w: jax.Array | dict  # [d_(k-1), d_k], the fitted W_k (with ``transform``: that kind's parameters)
  losses: jax.Array | None  # [steps], the training loss at every step (before that step's update)
  opt_state: optax.OptState | None = None  # the optimiser's state after the last step


# Kinds whose maps commute with scaling the input, so a count folds into the row as sqrt(c) (the `batches` path, as
# the reference computes it); the other kinds weight the rows' means by the counts.
_HOMOGENEOUS = ("linear", "orthogonal")


@functools.lru_cache(maxsize=32)
def _adam(learning_rate: float) -> optax.GradientTransformation:
  # One optax.adam per learning rate, so repeated fits reuse the compiled loop (the optimiser is a static argument).
  return optax.adam(learning_rate)


@functools.partial(
  jax.jit,
  static_argnames=(
    "loss",
    "batch_size",
    "per_dim",
    "optimizer",
    "weighted",
    "axis_name",
    "transform",
    "history_transforms",
  ),
)
def _fit(
  z_new,
  z_prev,
  history,
  w0,
  opt_state,
  xs,
  *,
  loss,
  batch_size,
  per_dim,
  optimizer,
  weighted,
  axis_name,
  transform,
  history_transforms,
):
  n = z_new.shape[0]
  kinds = (
    transform,
    *(
      (history_transforms,)
      if history_transforms is None or isinstance(history_transforms, BackwardTransform)
      else history_transforms
    ),
  )
  homogeneous = all(t is None or t.kind in _HOMOGENEOUS for t in kinds)

  def objective(w, rows, counts):
    zn, zp = z_new[rows], z_prev[rows]
    if weighted and not homogeneous:  # counts as per-row weights of the means
      kwargs = {"transform": transform, "per_dim": per_dim, "weights": counts, "axis_name": axis_name}
      if loss == "single":
        return single_step_loss(zn, zp, w, **kwargs)
      return multi_step_loss(zn, zp, w, history, history_transforms=history_transforms, **kwargs)
    if weighted:
      # Every per-row term is a quadratic form of (z_k, z_(k-1)): a row counted c times is one row scaled by √c.
      scale = jnp.sqrt(counts)[:, None].astype(zn.dtype)
      zn, zp = scale * zn, scale * zp
    if loss == "single":
      value = single_step_loss(zn, zp, w, transform=transform, per_dim=per_dim, axis_name=axis_name)
    else:
      value = multi_step_loss(
        zn,
        zp,
        w,
        history,
        transform=transform,
        history_transforms=history_transforms,
        per_dim=per_dim,
        axis_name=axis_name,
      )
    if weighted:  # the row mean of c·ℓ becomes the count-weighted mean Σ c ℓ / Σ c
      size, total = jnp.asarray(rows.shape[0], zn.dtype), jnp.sum(counts)
      if axis_name is not None:
        size, total = _reduce.psum_each((size, total), axis_name)
      value = value * size / jnp.maximum(total, 1.0)
    return value

  def step(carry, x):
    w, opt_state = carry
    if weighted:
      rows, counts = x
    else:
      rows = jnp.arange(n) if batch_size is None else jax.random.randint(x, (batch_size,), 0, n)
      counts = None
    value, grad = jax.value_and_grad(objective)(w, rows, counts)
    updates, opt_state = optimizer.update(grad, opt_state, w)
    return (optax.apply_updates(w, updates), opt_state), value

  (w, opt_state), losses = jax.lax.scan(step, (w0, opt_state), xs)
  return PosthocFit(w, losses, opt_state)


def _check_batches(fn: str, batches, n: int) -> tuple[jax.Array, jax.Array]:
  """``(rows [S, R] ids in [0, n), counts [S, R] >= 0)``."""
  try:
    rows, counts = batches
  except (TypeError, ValueError):
    raise ValueError(f"{fn}: `batches` must be a pair (rows [steps, R], counts [steps, R])") from None
  rows, counts = jnp.asarray(rows), _checks.as_float_array(fn, "batches counts", counts, ndim=2)
  if not jnp.issubdtype(rows.dtype, jnp.integer) or rows.ndim != 2:
    raise ValueError(
      f"{fn}: `batches` rows must be integer ids [steps, R], got dtype {rows.dtype} and shape {tuple(rows.shape)}"
    )
  if rows.shape != counts.shape or rows.shape[0] == 0:
    raise ValueError(
      f"{fn}: `batches` rows {tuple(rows.shape)} and counts {tuple(counts.shape)} must have the same "
      f"shape [steps >= 1, R]"
    )
  if _checks.is_concrete(rows) and rows.size and (int(jnp.min(rows)) < 0 or int(jnp.max(rows)) >= n):
    raise ValueError(
      f"{fn}: `batches` rows must lie in [0, {n}), got range [{int(jnp.min(rows))}, {int(jnp.max(rows))}]"
    )
  if _checks.is_concrete(counts) and bool(jnp.any(counts < 0)):
    raise ValueError(f"{fn}: `batches` counts must be >= 0")
  return rows, counts


def fit_posthoc(
  z_new: ArrayLike,
  z_prev: ArrayLike,
  history: Sequence[ArrayLike] = (),
  *,
  key: jax.Array | None = None,
  loss: Literal["single", "multi"] = "multi",
  steps: int | None = None,
  learning_rate: float = 1e-2,
  batch_size: int | None = None,
  per_dim: bool = False,
  optimizer: optax.GradientTransformation | None = None,
  batches: tuple[ArrayLike, ArrayLike] | None = None,
  init: PosthocFit | None = None,
  axis_name: str | None = None,
  transform: BackwardTransform | None = None,
  history_transforms: BackwardTransform | tuple[BackwardTransform | None, ...] | None = None,
) -> PosthocFit:
  r"""Fits :math:`W_k` by gradient descent on the single- or multi-step loss with :math:`z_k, z_{k-1}` fixed.

  This is the reference code's post-hoc procedure (Post-Lin-SLoss / Post-Lin-MLoss): :math:`W_k` starts from
  :func:`init_backward` and is trained with Adam on mini-batches of rows (drawn uniformly with replacement), on
  the full batch, or on given batches with row counts. The whole loop is one jitted ``lax.scan``.

  Given ``batches = (rows, counts)``, step t's loss is the count-weighted mean
  :math:`\sum_r c_{t,r} \ell(r) / \sum_r c_{t,r}` over ``rows[t]``: a batch in which a row appears c times (the
  reference's BPR batches repeat users and items) folds into its distinct rows with counts, and padding rows get
  count 0. Since every per-row term is a quadratic form, a row of count c is evaluated once, scaled by
  :math:`\sqrt c`.

  Args:
    z_new: :math:`z_k`, [n, d_k], fixed.
    z_prev: :math:`z_{k-1}` on the same rows, [n, d_{k-1}], fixed.
    history: frozen ``[W_1, ..., W_{k-1}]`` (used by ``loss="multi"``).
    key: PRNG key for the initial :math:`W_k` and the mini-batches (not needed with both ``batches`` and ``init``).
    loss: ``"single"`` (eq. 7) or ``"multi"`` (eq. 10).
    steps: number of optimiser steps (default 2000); with ``batches``, their leading dimension.
    learning_rate: Adam's learning rate (ignored when ``optimizer`` is given).
    batch_size: rows per step, or ``None`` for the full batch (ignored with ``batches``).
    per_dim: the reference code's per-dimension scaling.
    optimizer: any optax transformation; defaults to ``optax.adam(learning_rate)``.
    batches: ``(rows [steps, R] int, counts [steps, R] >= 0)``, the rows of every step and their counts.
    init: a previous :class:`PosthocFit` to continue from (its ``w`` and ``opt_state``; same optimizer), e.g. one
      epoch of batches at a time with evaluations in between.
    transform: the kind of :math:`B_k` to fit (:mod:`bcjax.alignment` ``orthogonal``, ``affine``, ``mlp``, ...);
      ``None`` fits the linear weight as an array. The kinds with a closed form also have ``transform.fit``.
    history_transforms: the kinds of ``history`` (see :func:`multi_step_loss`).
    axis_name: with ``batches``, a mapped axis (``jax.shard_map``) over which each step's rows are split: the
      count-weighted means are then global, and every device takes the same optimiser step.

  Returns:
    :class:`PosthocFit` with ``w`` [d_{k-1}, d_k], ``losses`` [steps] and the optimiser's state.

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for no rows to fit on, an unknown ``loss``, ``steps`` below 1 or unlike the
      batches', a chain whose widths do not fit, or ``axis_name`` without ``batches``.
  """
  fn = "fit_posthoc"
  if axis_name is not None and batches is None:
    raise ValueError(f"{fn}: `axis_name` splits given `batches` over devices; pass `batches` with it")
  if loss not in ("single", "multi"):
    raise ValueError(f"{fn}: `loss` must be 'single' or 'multi', got {loss!r}")
  z_new = _checks.as_float_array(fn, "z_new", z_new, ndim=2)
  z_prev = _checks.as_float_array(fn, "z_prev", z_prev, ndim=2)
  if z_new.shape[0] == 0:
    raise ValueError(f"{fn}: `z_new` has no rows (shape {tuple(z_new.shape)}); nothing to fit on")
  if batches is not None:
    batches = _check_batches(fn, batches, z_new.shape[0])
    if steps is not None and steps != batches[0].shape[0]:
      raise ValueError(f"{fn}: `steps`={steps} but `batches` holds {batches[0].shape[0]} steps")
  else:
    steps = _checks.check_positive_int(fn, "steps", 2000 if steps is None else steps)
  if batch_size is not None:
    batch_size = _checks.check_positive_int(fn, "batch_size", batch_size)
  if history_transforms is None and transform is None:
    chain: tuple = tuple(_checks.as_weight_chain(fn, "history", history))
  else:
    chain = tuple(history)
    if history_transforms is not None and not isinstance(history_transforms, BackwardTransform):
      history_transforms = tuple(history_transforms)
  if optimizer is None:
    if not learning_rate > 0:
      raise ValueError(f"{fn}: `learning_rate` must be > 0, got {learning_rate!r}")
    optimizer = _adam(float(learning_rate))
  if key is None and (init is None or batches is None):
    raise ValueError(
      f"{fn}: pass `key` (for the initial W_k{'' if init else ' and'}"
      f"{'' if batches is not None else ' the mini-batches'})"
    )
  init_key: Any
  data_key: Any
  init_key, data_key = jax.random.split(key) if key is not None else (None, None)
  dtype = jnp.result_type(z_new, z_prev)
  if init is None:
    w0 = (
      init_backward(init_key, z_prev.shape[1], z_new.shape[1], dtype=dtype)
      if transform is None
      else transform.init(init_key, z_prev.shape[1], z_new.shape[1], dtype=dtype)
    )
    opt_state = optimizer.init(w0)
  else:
    w0 = _checks.as_float_array(fn, "init.w", init.w, ndim=2) if transform is None else init.w
    opt_state = optimizer.init(w0) if init.opt_state is None else init.opt_state
  # Shape checks of the pair and the history run eagerly here, with clear messages, before tracing.
  if loss == "single":
    single_step_loss(z_new[:1], z_prev[:1], w0, transform=transform, per_dim=per_dim)
  else:
    multi_step_loss(
      z_new[:1], z_prev[:1], w0, chain, transform=transform, history_transforms=history_transforms, per_dim=per_dim
    )
  xs = batches if batches is not None else jax.random.split(data_key, int(steps or 0))
  return _fit(
    z_new,
    z_prev,
    chain,
    w0,
    opt_state,
    xs,
    loss=loss,
    batch_size=batch_size,
    per_dim=per_dim,
    optimizer=optimizer,
    weighted=batches is not None,
    axis_name=axis_name,
    transform=transform,
    history_transforms=history_transforms,
  )
