r"""Gramian estimators as optax-style ``(init, update)`` pairs.

SOGram (eq. 10), SAGram (eq. 8, Alg. 1) and the candidate-sampling baselines in Gramian form (eq. 14), each with the
low-rank-prior (Alg. 3-4) and weighted (App. C) variants.

The estimate must include the current batch before the gradient is taken (Alg. 1 line 8, Alg. 2 line 6). So
``update`` is called *inside* the loss, on the embeddings under ``stop_gradient``, and returns
``(estimate, new_state)``; the state travels out of the loss as auxiliary output::

  def loss_fn(params, est_state, batch):
    u, v = model(params, batch)
    est_u, state_u = estimator.update(est_state.u, jax.lax.stop_gradient(u), indices=batch["i"])
    est_v, state_v = estimator.update(est_state.v, jax.lax.stop_gradient(v), indices=batch["i"])
    loss = fit(u, v, batch) + lam * penalty_surrogate(u, v, est_u.gramian, est_v.gramian)
    return loss, (state_u, state_v)

  (loss, (state_u, state_v)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, est_state, batch)

Every estimator has the same signature (the :class:`GramianInitFn` and :class:`GramianUpdateFn` protocols), so one
can replace another without touching the loss: ``init(embeddings, *, weights=None, prior=None)`` with the entity
table [n, k] (SAGram's initial cache, its weights and prior; the others read only k and the dtype) and
``update(state, embeddings [B, k], *, indices=None [B], weights=None [B], prior=None [B, k_P], where=None [B])``.
``indices`` are the batch's entity ids (SAGram's cache rows; the inverse-probability weights of non-uniform
sampling), ``where`` masks padded rows, which never reach a state or an estimate. One estimator instance tracks
one side (left or right embeddings); use two states for :math:`\hat G_u, \hat G_v`.
SAGram refreshes its cache with the embeddings passed to ``update`` (those of the current parameters, before the
step), where Algorithm 1 line 11 recomputes them after the step; this saves a forward pass and keeps Prop. 3
(unbiasedness holds for caches from any earlier parameters).
"""

from typing import Any, Literal, NamedTuple, Protocol, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax.gramian._penalty import cross_gramian, gramian


class GramianEstimate(NamedTuple):
  """What ``update`` returns: the Gramian estimate and, with a low-rank prior, the cross-Gramian estimate."""

  gramian: jax.Array  # [k, k]
  cross: jax.Array  # [k, k_P]; [k, 0] without a prior


GramianState: TypeAlias = Any
"""An estimator's state: a pytree of arrays (:class:`SOGramState`, :class:`SAGramState` or
:class:`BatchGramianState`), carried through ``jax.jit`` and ``jax.lax.scan`` like an optax state."""


class GramianInitFn(Protocol):
  """``init(embeddings, *, weights=None, prior=None) -> state``: an estimator's initial state."""

  def __call__(
    self, embeddings: ArrayLike, *, weights: ArrayLike | None = None, prior: ArrayLike | None = None
  ) -> GramianState:
    """The initial state.

    Args:
      embeddings: the entity table [n, k] (SAGram caches it; the other estimators read only k and the dtype).
      weights: per-entity weights [n] of the cached rows (SAGram's weighted variant, App. C).
      prior: the low-rank prior's embeddings [n, k_P] of the cached rows (SAGram with a prior, Alg. 3).

    Returns:
      The estimator's state.
    """
    ...


class GramianUpdateFn(Protocol):
  """One step of an estimator: ``update(state, embeddings, ...) -> (estimate, state)``.

  ``update(state, embeddings, *, indices, weights, prior, where) -> (estimate, state)``: one step of an estimator,
  including the batch in the estimate (Alg. 1 line 8, Alg. 2 line 6).
  """

  def __call__(
    self,
    state: GramianState,
    embeddings: ArrayLike,
    *,
    indices: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    prior: ArrayLike | None = None,
    where: ArrayLike | None = None,
  ) -> tuple[GramianEstimate, GramianState]:
    """The estimate after this batch, and the next state.

    Args:
      state: the estimator's state.
      embeddings: the batch's embeddings [B, k] (under ``stop_gradient`` inside a loss).
      indices: the batch's entity ids [B] (SAGram's cache rows; non-uniform sampling's weights).
      weights: per-row weights [B] (App. C).
      prior: the low-rank prior's embeddings [B, k_P].
      where: a mask [B]; padded rows (False) never reach the state or the estimate.

    Returns:
      ``(estimate, state)``: a :class:`GramianEstimate` and the next state.
    """
    ...


class GramianEstimator(NamedTuple):
  """A Gramian estimator as an optax-style pair of pure functions.

  :func:`sogram`, :func:`sagram` and :func:`batch_gramian` build one.

  Attributes:
    init: the initial state (:class:`GramianInitFn`).
    update: one step (:class:`GramianUpdateFn`).
  """

  init: GramianInitFn
  update: GramianUpdateFn


class SOGramState(NamedTuple):
  """:func:`sogram`'s state: the running Gramian and cross-Gramian estimates and the number of updates."""

  gramian: jax.Array  # [k, k], running estimate of G
  cross: jax.Array  # [k, k_P], running estimate of H
  count: jax.Array  # type: ignore[assignment]  # shape=(), dtype=int32, number of updates


class SAGramState(NamedTuple):
  """:func:`sagram`'s state: the cache of every example's last embedding and the running sums over it."""

  cache: jax.Array  # [n, k], last seen embedding of every example
  gramian_sum: jax.Array  # [k, k], S = (1/n) sum_j a_j cache_j cache_j^T
  cross_sum: jax.Array  # [k, k_P], T = (1/n) sum_j cache_j q_j^T
  count: jax.Array  # type: ignore[assignment]  # shape=(), dtype=int32


class BatchGramianState(NamedTuple):
  """:func:`batch_gramian`'s state: the number of updates (the estimate itself is stateless)."""

  count: jax.Array  # type: ignore[assignment]  # shape=(), dtype=int32


def _shape_of(fn: str, embeddings) -> tuple[int, ...]:
  shape = tuple(getattr(embeddings, "shape", np.shape(embeddings)))
  if len(shape) < 1:
    raise ValueError(f"{fn}: `embeddings` must have a trailing embedding dimension k, got shape {shape}")
  return shape


def _dtype_of(embeddings):
  return getattr(embeddings, "dtype", None) or jnp.result_type(embeddings)


def _check_batch(fn: str, x, k: int | None, prior, prior_dim: int, where=None):
  """Validates a batch of embeddings [B, k] (k=None: any width) and its prior [B, prior_dim].

  NaN/inf only matter in valid rows (the Gramians select padded rows away).
  """
  x = _checks.as_float_array(fn, "embeddings", x, ndim=2, finite=False)
  if k is not None and x.shape[1] != k:
    raise ValueError(f"{fn}: `embeddings` has shape {tuple(x.shape)} but the estimator tracks k={k} dimensions")
  where = _checks.check_row_mask(fn, where, x.shape[0])
  _checks.check_finite(fn, "embeddings", x, where)
  if prior_dim and prior is None:
    raise ValueError(
      f"{fn}: this estimator has a low-rank prior (prior_dim={prior_dim}); pass `prior` [B, {prior_dim}]"
    )
  if prior is not None:
    if not prior_dim:
      raise ValueError(f"{fn}: `prior` was given but the estimator was built without a low-rank prior (prior_dim=0)")
    prior = _checks.as_float_array(fn, "prior", prior, ndim=2, finite=False)
    if prior.shape != (x.shape[0], prior_dim):
      raise ValueError(f"{fn}: `prior` has shape {tuple(prior.shape)}; expected ({x.shape[0]}, {prior_dim})")
    _checks.check_finite(fn, "prior", prior, where)
  return x, prior


def _has_valid_rows(n: int, where, axis_name) -> jax.Array:
  """Whether the (global) batch holds at least one valid row, as a boolean scalar."""
  count = jnp.asarray(n, jnp.int32) if where is None else jnp.sum(jnp.asarray(where), dtype=jnp.int32)
  if axis_name is not None:
    count = jax.lax.psum(count, axis_name)
  return count > 0


def _check_indices(fn: str, indices, b: int, n: int) -> jax.Array:
  """Integer example ids [B] in [0, n): floats would be truncated and out-of-range ids clamped by a gather."""
  if indices is None:
    raise ValueError(f"{fn}: pass the batch's example `indices` [{b}]")
  dtype = jnp.result_type(indices)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"{fn}: `indices` must be integer example ids, got dtype {dtype}")
  indices = jnp.asarray(indices)
  if indices.shape != (b,):
    raise ValueError(
      f"{fn}: `indices` must have shape ({b},) (one id per row of `embeddings`), got {tuple(indices.shape)}"
    )
  if _checks.is_concrete(indices) and indices.size:
    lo, hi = int(np.min(np.asarray(indices))), int(np.max(np.asarray(indices)))
    if lo < 0 or hi >= n:
      raise ValueError(f"{fn}: `indices` must lie in [0, {n}), got range [{lo}, {hi}]")
  return indices


def _check_weights(fn: str, weights, b: int, dtype) -> jax.Array:
  """Per-row weights [B], finite and non-negative; ones when None."""
  if weights is None:
    return jnp.ones((b,), dtype)
  w = _checks.as_float_array(fn, "weights", weights, ndim=1)
  if w.shape != (b,):
    raise ValueError(f"{fn}: `weights` has shape {tuple(w.shape)}; expected one weight per row, ({b},)")
  if _checks.is_concrete(w) and np.any(np.asarray(w) < 0):
    raise ValueError(f"{fn}: `weights` must be non-negative (min {float(np.min(np.asarray(w)))})")
  return w.astype(dtype)


def _gather(axis_name, *arrays):
  """All devices' batches, concatenated in device order, so replicated states receive identical updates.

  Each device writes its block into zeros of the global size and the blocks are summed (``psum``): adding zeros is
  exact, and unlike ``all_gather`` the result is typed as the same on every device, as the replicated state it
  updates must be (``jax.shard_map``'s replication check).
  """
  if axis_name is None:
    return arrays
  size, index = jax.lax.psum(1, axis_name), jax.lax.axis_index(axis_name)

  def gather(a):
    dtype = a.dtype
    a = a.astype(jnp.int32) if dtype == jnp.bool_ else a
    block = jnp.zeros((size * a.shape[0], *a.shape[1:]), a.dtype)
    block = jax.lax.dynamic_update_slice_in_dim(block, a, index * a.shape[0], axis=0)
    return jax.lax.psum(block, axis_name).astype(dtype)

  return tuple(None if a is None else gather(a) for a in arrays)


def sogram(alpha, *, prior_dim: int = 0, axis_name: str | None = None) -> GramianEstimator:
  r"""Stochastic Online Gramian (eq. 10, Alg. 2; Alg. 4 with a prior).

  The estimate after each batch B:

  .. math::
    \hat G^{(t)} = (1 - \alpha)\hat G^{(t-1)} + \frac{\alpha}{|B|}\sum_{i \in B} a_i\, u_i \otimes u_i
    = \sum_{\tau \le t} \alpha (1-\alpha)^{t-\tau} \hat G_B^{(\tau)}.

  A convex combination of PSD matrices, so the estimate stays PSD without projection. Memory :math:`O(k^2)`.
  Prop. 5: variance :math:`\le \sigma^2 \alpha / (2 - \alpha)`; bias decays as :math:`(1-\alpha)^t`.

  Args:
    alpha: :math:`\alpha \in (0, 1]`; a traced value is accepted (e.g. to ``vmap`` over a sweep) and then not
      range-checked.
    prior_dim: :math:`k_P` of a low-rank prior; 0 for none.
    axis_name: mapped axis over which the batch is sharded (the batch Gramian is summed over devices).

  Returns:
    ``init(embeddings)`` (any array or ``jax.ShapeDtypeStruct`` whose last axis is k) and
    ``update(state, embeddings, *, indices=None, weights=None, prior=None, where=None) -> (GramianEstimate,
    SOGramState)`` (``indices`` is ignored; the signature is every estimator's).

  Raises:
    ValueError: naming the argument, for ``alpha`` outside (0, 1] (concrete) or a negative ``prior_dim``.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.gramian import sogram
    >>> est = sogram(alpha=0.5)
    >>> state = est.init(jnp.zeros((4, 2)))
    >>> g, state = est.update(state, jnp.array([[2.0, 0.0]]))
    >>> g.gramian.tolist()
    [[2.0, 0.0], [0.0, 0.0]]
  """
  if _checks.is_concrete(alpha):
    alpha = _checks.as_float_in("sogram", "alpha", alpha, 0.0, 1.0, low_open=True)
  prior_dim = _checks.as_int("sogram", "prior_dim", prior_dim, low=0)

  def init(embeddings: ArrayLike, *, weights: ArrayLike | None = None, prior: ArrayLike | None = None) -> SOGramState:
    del weights, prior  # accepted so every estimator's init takes the same arguments
    k = _shape_of("sogram.init", embeddings)[-1]
    dtype = _dtype_of(embeddings)
    return SOGramState(jnp.zeros((k, k), dtype), jnp.zeros((k, prior_dim), dtype), jnp.zeros((), jnp.int32))

  def update(
    state: SOGramState,
    embeddings: ArrayLike,
    *,
    indices: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    prior: ArrayLike | None = None,
    where: ArrayLike | None = None,
  ) -> tuple[GramianEstimate, SOGramState]:
    del indices  # accepted so every estimator's update takes the same arguments
    x, prior = _check_batch("sogram.update", embeddings, state.gramian.shape[0], prior, prior_dim, where)
    batch = gramian(x, weights, where=where, axis_name=axis_name).astype(state.gramian.dtype)
    g = (1 - alpha) * state.gramian + alpha * batch
    h = state.cross
    if prior_dim:
      batch_h = cross_gramian(x, prior, weights, where=where, axis_name=axis_name).astype(h.dtype)
      h = (1 - alpha) * h + alpha * batch_h
    # A batch without a valid row (all padding, on every device) carries no information: the estimate must not
    # decay towards 0 by (1 - alpha), so it and the step count stay as they were.
    seen = _has_valid_rows(x.shape[0], where, axis_name)
    g, h = jnp.where(seen, g, state.gramian), jnp.where(seen, h, state.cross)
    return GramianEstimate(g, h), SOGramState(g, h, state.count + seen.astype(state.count.dtype))

  return GramianEstimator(init, update)


def project_psd(g: jax.Array) -> jax.Array:
  """Euclidean projection of a symmetric matrix onto the PSD cone (negative eigenvalues set to 0).

  Args:
    g: a symmetric matrix, [k, k].

  Returns:
    Its projection onto the PSD cone, [k, k].
  """
  s, u = jnp.linalg.eigh((g + g.T) / 2)
  return (u * jnp.maximum(s, 0.0)) @ u.T


def sagram(
  n: int,
  *,
  beta: Literal["sag", "saga"] = "saga",
  project: bool = False,
  prior_dim: int = 0,
  axis_name: str | None = None,
  shard_cache: bool = False,
) -> GramianEstimator:
  r"""Stochastic Average Gramian (eq. 8, Alg. 1; Alg. 3 with a prior).

  For a batch B of example indices:

  .. math::
    \hat G = \hat S + c \sum_{i \in B} a_i\,(u_i \otimes u_i - \hat u_i \otimes \hat u_i), \qquad
    \hat S \leftarrow \hat S + \frac1n \sum_{i \in B} a_i\,(u_i \otimes u_i - \hat u_i \otimes \hat u_i),
    \quad \hat u_i \leftarrow u_i,

  with :math:`c = 1/n` for ``beta="sag"`` (:math:`\beta = 1/n`: the estimate is the Gramian of the refreshed
  cache, PSD by Prop. 2) and :math:`c = 1/|B|` for ``beta="saga"`` (:math:`\beta = 1`: unbiased by Prop. 3, not
  necessarily PSD; ``project=True`` projects it onto the PSD cone). Memory :math:`O(nk)` for the cache.

  Duplicate indices in a batch: the cache and :math:`\hat S` take each example once (its last occurrence), and so
  does the SAG estimate; the SAGA estimate averages over all entries (batches drawn with replacement stay unbiased).

  Args:
    n: number of examples (cache rows).
    beta: ``"sag"`` or ``"saga"``.
    project: project the SAGA estimate onto the PSD cone.
    prior_dim: :math:`k_P` of a low-rank prior; 0 for none.
    axis_name: mapped axis over which the batch is sharded; every device gathers all devices' batches so the
      replicated caches stay identical.
    shard_cache: with ``axis_name``, the cache is split by rows over the devices (``state.cache`` is each device's
      block of n / N rows, as :func:`bcjax.parallel.shard_table` places it): a device looks up and writes only the
      rows it holds, and the old rows of the batch are summed over the devices. Memory O(nk / N) per device; the
      estimates are those of the replicated cache.

  Returns:
    ``init(embeddings [n, k], *, weights=None [n], prior=None [n, k_P])`` (the initial cache, Alg. 1 line 4) and
    ``update(state, embeddings [B, k], *, indices [B], weights=None [B], prior=None [B, k_P], where=None [B]) ->
    (GramianEstimate, state)``; ``indices`` is required. Rows with ``where`` False leave the cache and the sums
    untouched and do not count in the SAGA estimate's :math:`|B|`; a batch without a valid row leaves the state as
    it was.

  Raises:
    ValueError: naming the argument, for an unknown ``beta``, ``shard_cache`` without ``axis_name``, or (in ``init`` and
      ``update``) a cache, prior, weights or indices that do not fit ``n``.
  """
  n = _checks.check_positive_int("sagram", "n", n)
  if beta not in ("sag", "saga"):
    raise ValueError(f"sagram: `beta` must be 'sag' (beta = 1/n) or 'saga' (beta = 1), got {beta!r}")
  prior_dim = _checks.as_int("sagram", "prior_dim", prior_dim, low=0)
  if shard_cache and axis_name is None:
    raise ValueError("sagram: `shard_cache` splits the cache over the devices of `axis_name`; pass `axis_name`")

  def init(embeddings: ArrayLike, *, weights: ArrayLike | None = None, prior: ArrayLike | None = None) -> SAGramState:
    cache = _checks.as_float_array("sagram.init", "embeddings", embeddings, ndim=2)
    if cache.shape[0] != n:
      raise ValueError(f"sagram.init: `embeddings` has {cache.shape[0]} rows but the estimator was built for n={n}")
    if prior_dim and prior is None:
      raise ValueError(f"sagram.init: pass the full `prior` [n, {prior_dim}] to initialise the cross sum")
    k = cache.shape[1]
    cross = jnp.zeros((k, prior_dim), cache.dtype)
    if prior_dim:
      prior = _checks.as_float_array("sagram.init", "prior", prior, ndim=2)
      if prior.shape != (n, prior_dim):
        raise ValueError(f"sagram.init: `prior` has shape {tuple(prior.shape)}; expected ({n}, {prior_dim})")
      cross = cross_gramian(cache, prior)
    return SAGramState(cache, gramian(cache, weights), cross, jnp.zeros((), jnp.int32))

  def update(
    state: SAGramState,
    embeddings: ArrayLike,
    *,
    indices: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    prior: ArrayLike | None = None,
    where: ArrayLike | None = None,
  ) -> tuple[GramianEstimate, SAGramState]:
    fn = "sagram.update"
    k = state.cache.shape[1]
    x, prior = _check_batch(fn, embeddings, k, prior, prior_dim, where)
    indices = _check_indices(fn, indices, x.shape[0], n)
    a = _check_weights(fn, weights, x.shape[0], x.dtype)
    valid = jnp.ones(x.shape[:1], bool) if where is None else jnp.asarray(where, bool)
    x, indices, a, prior, valid = _gather(axis_name, x, indices, a, prior, valid)
    # Padded rows may hold anything (NaN, huge values, any id): they are zeroed before any product and never win a
    # cache row.
    x = jnp.where(valid[:, None], x, 0).astype(state.cache.dtype)
    if prior is not None:
      prior = jnp.where(valid[:, None], prior, 0)
    a = jnp.where(valid, a, 0)
    b = jnp.sum(valid, dtype=jnp.int32)
    position = jnp.arange(x.shape[0])
    if shard_cache:
      rows, offset = _cache_block(fn, state.cache, n, axis_name)
      local = indices - offset
      mine = valid & (local >= 0) & (local < rows)
      # Only the holder of a row reads it; the others add zeros, so the sum is exact and the same everywhere.
      old = jax.lax.psum(jnp.where(mine[:, None], state.cache[jnp.clip(local, 0, rows - 1)], 0), axis_name)
      winner = (
        jnp.full((rows,), -1, position.dtype)
        .at[jnp.where(mine, local, rows)]
        .max(jnp.where(mine, position, -1), mode="drop")
      )
      won = mine & (winner[jnp.clip(local, 0, rows - 1)] == position)
      first = jax.lax.psum(won.astype(jnp.int32), axis_name).astype(x.dtype)
    else:
      old = jnp.where(valid[:, None], state.cache[indices], 0)
      # The last valid occurrence of each index wins; others are masked out of the cache and S updates.
      winner = jnp.full((n,), -1, position.dtype).at[indices].max(jnp.where(valid, position, -1))
      first = (valid & (winner[indices] == position)).astype(x.dtype)
    delta = (x * (a * first)[:, None]).T @ x - (old * (a * first)[:, None]).T @ old
    gramian_sum = state.gramian_sum + delta / n
    if beta == "sag":
      estimate = gramian_sum
    else:
      estimate = state.gramian_sum + ((x * a[:, None]).T @ x - (old * a[:, None]).T @ old) / jnp.maximum(b, 1)
      if project:
        estimate = project_psd(estimate)
    cross_sum, cross = state.cross_sum, state.cross_sum
    if prior_dim:
      cross_delta = ((x - old) * first[:, None]).T @ prior
      cross_sum = state.cross_sum + cross_delta / n
      cross = cross_sum if beta == "sag" else state.cross_sum + (x - old).T @ prior / jnp.maximum(b, 1)
    # Non-winning duplicates and padded rows (and, sharded, other devices' rows) write out of bounds: dropped.
    if shard_cache:
      cache = state.cache.at[jnp.where(won, local, rows)].set(x, mode="drop")
    else:
      cache = state.cache.at[jnp.where(first > 0, indices, n)].set(x, mode="drop")
    return GramianEstimate(estimate, cross), SAGramState(
      cache, gramian_sum, cross_sum, state.count + (b > 0).astype(state.count.dtype)
    )

  return GramianEstimator(init, update)


def _cache_block(fn: str, cache: jax.Array, n: int, axis_name: str | None) -> tuple[int, jax.Array]:
  """This device's rows of a row-sharded cache and the global id of its first row."""
  rows, devices = cache.shape[0], jax.lax.psum(1, axis_name)
  if rows * devices != n:
    raise ValueError(
      f"{fn}: with `shard_cache` each device holds n / N rows; got a block of {rows} rows on {devices} "
      f"devices for n={n} (place the cache with bcjax.parallel.shard_table, n divisible by N)"
    )
  return rows, jax.lax.axis_index(axis_name) * rows


def sampling_probabilities(counts, kind: Literal["uniform", "linear", "sqrt"]) -> np.ndarray:
  r"""Candidate-sampling distribution over n items.

  Uniform, proportional to item frequency ("linear") or to its square root ("sqrt"), as in the paper's baselines.
  Returns p [n] summing to 1.

  Args:
    counts: item frequencies [n] (``linear`` and ``sqrt``).
    kind: ``uniform``, ``linear`` or ``sqrt``.

  Returns:
    p [n], summing to 1.

  Raises:
    ValueError: an unknown kind, or counts that are negative, empty or all zero.
  """
  counts = np.asarray(counts, dtype=np.float64)
  if counts.ndim != 1 or counts.size == 0:
    raise ValueError(f"sampling_probabilities: `counts` must be a non-empty vector, got shape {counts.shape}")
  if np.any(counts < 0) or not np.all(np.isfinite(counts)):
    raise ValueError("sampling_probabilities: `counts` must be finite and non-negative")
  if kind == "uniform":
    p = np.ones_like(counts)
  elif kind == "linear":
    p = counts.copy()
  elif kind == "sqrt":
    p = np.sqrt(counts)
  else:
    raise ValueError(f"sampling_probabilities: `kind` must be 'uniform', 'linear' or 'sqrt', got {kind!r}")
  if p.sum() <= 0:
    raise ValueError("sampling_probabilities: all counts are zero")
  return p / p.sum()


def batch_gramian(
  *,
  sampling: Literal["uniform", "linear", "sqrt"] = "uniform",
  counts=None,
  prior_dim: int = 0,
  axis_name: str | None = None,
) -> GramianEstimator:
  r"""Candidate-sampling baseline in Gramian form (eq. 14).

  A stateless estimate from the current batch,

  .. math::
    \hat G = \frac{1}{|B|} \sum_{i \in B} \mu_i\, a_i\, u_i \otimes u_i, \qquad \mu_i = \frac{1}{n\, p_i},

  with inverse-probability weights for batches drawn from :math:`p` (unbiased: :math:`\mathbb E \hat G = G^a`).

  Args:
    sampling: the distribution the batch was drawn from; "linear" and "sqrt" need ``counts``.
    counts: item frequencies [n] that define p.
    prior_dim: :math:`k_P` of a low-rank prior.
    axis_name: mapped axis over which the batch is sharded.

  Returns:
    ``init(embeddings)`` and ``update(state, embeddings, *, indices=None, weights=None, prior=None, where=None)``;
    ``indices`` are needed for non-uniform sampling.

  Raises:
    ValueError: an unknown ``sampling``, non-uniform sampling without ``counts``, or (in ``update``) without
      ``indices``.
  """
  if sampling not in ("uniform", "linear", "sqrt"):
    raise ValueError(f"batch_gramian: `sampling` must be 'uniform', 'linear' or 'sqrt', got {sampling!r}")
  if sampling != "uniform" and counts is None:
    raise ValueError(f"batch_gramian: sampling={sampling!r} needs the item `counts`")
  mu = None if counts is None else jnp.asarray(1.0 / (len(counts) * sampling_probabilities(counts, sampling)))

  def init(
    embeddings: ArrayLike, *, weights: ArrayLike | None = None, prior: ArrayLike | None = None
  ) -> BatchGramianState:
    del weights, prior  # accepted so every estimator's init takes the same arguments
    _shape_of("batch_gramian.init", embeddings)
    return BatchGramianState(jnp.zeros((), jnp.int32))

  def update(
    state: BatchGramianState,
    embeddings: ArrayLike,
    *,
    indices: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    prior: ArrayLike | None = None,
    where: ArrayLike | None = None,
  ) -> tuple[GramianEstimate, BatchGramianState]:
    fn = "batch_gramian.update"
    x, prior = _check_batch(fn, embeddings, None, prior, prior_dim, where)
    w = None if weights is None else _check_weights(fn, weights, x.shape[0], x.dtype)
    if mu is not None and sampling != "uniform":
      if indices is None:
        raise ValueError(f"{fn}: sampling={sampling!r} needs the sampled `indices`")
      mu_b = mu[_check_indices(fn, indices, x.shape[0], mu.shape[0])].astype(x.dtype)
      w = mu_b if w is None else w * mu_b
    g = gramian(x, w, where=where, axis_name=axis_name)
    h = jnp.zeros((x.shape[1], prior_dim), x.dtype)
    if prior_dim:
      h = cross_gramian(x, prior, w, where=where, axis_name=axis_name)
    return GramianEstimate(g, h), BatchGramianState(state.count + 1)

  return GramianEstimator(init, update)
