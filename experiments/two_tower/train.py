r"""One training step of a two-tower model with the all-pairs penalty in Gramian form (Alg. 2 of Krichene et al.).

Objective (eq. 1-4 with the zero prior): :math:`f(\theta) = \frac1{|B'|}\sum_{i \in B'} \tfrac12 (\langle u_i, v_i
\rangle - s_i)^2 + \lambda \langle G_u, G_v \rangle`, where the Gramians are uniform over all left / right entities.
Each step draws the observed batch B' uniformly from the training pairs and one entity batch per side from the
sampling distribution p (uniform, linear or sqrt in the entity's frequency). The estimator (SOGram or the
stateless batch Gramian of candidate sampling) is updated with the stop-gradient entity embeddings, weighted by
:math:`1/(np)`, *inside* the loss, and the penalty gradient comes from the surrogate of eq. 7 on the same entities.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from bcjax.gramian import GramianEstimator, full_gramian, gramian_penalty, penalty_surrogate
from bcjax.parallel import DATA_AXIS
from experiments.train_step import TrainState, fresh_state, make_train_step, require_divisible
from experiments.two_tower.data import TrainData, gather, sample
from experiments.two_tower.sparse import RowSparse, descent


def make_optimizer(name: str, learning_rate: float) -> optax.GradientTransformation | RowSparse:
  """The train steps' optimiser. Adagrad and SGD update only the input-table rows a step uses, which is exactly
  their dense update; ``lazy-adam`` is Adam on the towers and lazy Adam on the table rows a step uses (not Adam:
  an unused row's moments do not decay); ``adam`` is optax's, dense (see :mod:`experiments.two_tower.sparse`)."""
  optimizers = {"adagrad": optax.adagrad, "sgd": optax.sgd, "adam": optax.adam, "lazy-adam": optax.adam}
  if name not in optimizers:
    raise ValueError(f"optimizer must be one of {sorted(optimizers)}, got {name!r}")
  transform = optimizers[name](learning_rate)
  return transform if name == "adam" else RowSparse(transform, transform)


Estimators = GramianEstimator | tuple[GramianEstimator, GramianEstimator] | None


def _sides(estimator: Estimators) -> tuple:
  """(left, right) estimators: one estimator serves both sides, a pair gives each side its own (SAGram's caches have
  one row per entity of their side)."""
  if estimator is None or isinstance(estimator, GramianEstimator):
    return estimator, estimator
  return tuple(estimator)


def init_state(graphdef, params, optimizer, estimator: Estimators, k: int, caches=None) -> TrainState:
  """A fresh :class:`~experiments.train_step.TrainState` whose ``extra`` is the (left, right) estimator states (empty
  for the exact oracle, ``estimator=None``).

  ``caches``: the (left [n_u, k], right [n_v, k]) embeddings of every entity under ``params``, which initialise
  caching estimators (SAGram, Alg. 1 line 4); the other estimators start from zero and need none.
  """
  left_est, right_est = _sides(estimator)
  if estimator is None:
    left, right = (), ()
  elif caches is not None:
    left, right = left_est.init(caches[0]), right_est.init(caches[1])
  else:
    shape = jax.ShapeDtypeStruct((1, k), jnp.float32)
    left, right = left_est.init(shape), right_est.init(shape)
  return fresh_state(optimizer, params, (left, right))


def exact_gramians(graphdef: nnx.GraphDef, params, data: TrainData, chunk_size: int) -> tuple[jax.Array, jax.Array]:
  """The oracle: (G_u, G_v) of every left and right entity under the current parameters (a chunked forward pass
  over both corpora, constants for the gradient)."""
  model = nnx.merge(graphdef, jax.lax.stop_gradient(params))
  g_u = full_gramian(
    lambda i: model.embed_left(gather(data.left_groups, i)), data.left_groups[0].shape[0], chunk_size=chunk_size
  )
  g_v = full_gramian(
    lambda i: model.embed_right(gather(data.right_groups, i)), data.right_groups[0].shape[0], chunk_size=chunk_size
  )
  return g_u, g_v


class StepGroups(NamedTuple):
  """The bags (feature ids per group) of one step's entities: the B' pairs' left and right entities and each side's
  entity batch. The loss reads the input table only through them (see
  :class:`~experiments.two_tower.sparse.RowSparse`)."""

  pair_left: tuple[jax.Array, ...]
  pair_right: tuple[jax.Array, ...]
  left: tuple[jax.Array, ...]
  right: tuple[jax.Array, ...]


class Rows(NamedTuple):
  """One step's sampled rows, drawn on the global batch so every device count sees the same ones: B' training pairs,
  and each side's entity batch with its weights mu = 1 / (n p)."""

  pairs: jax.Array  # [B]
  left_idx: jax.Array  # [B_p]
  left_mu: jax.Array
  right_idx: jax.Array
  right_mu: jax.Array


class StepInputs(NamedTuple):
  """What the loss of one step reads: the entities' bags, the pairs' targets s_i, the sampled rows and, for the
  exact oracle, (G_u, G_v) of every entity (None otherwise)."""

  groups: StepGroups
  target: jax.Array  # [B]
  rows: Rows
  exact: tuple[jax.Array, jax.Array] | None


# The bags, targets and rows are split over the mesh; the oracle's Gramians are replicated.
_INPUT_SPECS = StepInputs(jax.P(DATA_AXIS), jax.P(DATA_AXIS), jax.P(DATA_AXIS), jax.P())


def gramian_train_step(
  graphdef: nnx.GraphDef,
  optimizer,
  estimator: Estimators,
  *,
  lam: float,
  batch_size: int,
  penalty_batch_size: int,
  mesh: jax.sharding.Mesh | None = None,
  exact_chunk_size: int = 4096,
):
  """Returns the jitted ``train_step(state, data, rng) -> (state, metrics)`` (:func:`experiments.train_step.
  make_train_step`; the state is donated and its ``extra`` holds the (left, right) estimator states).

  ``optimizer``: an optax transformation, or a :class:`~experiments.two_tower.sparse.RowSparse` one (see
  :func:`make_optimizer`), which updates only the input-table rows the step uses.
  ``estimator`` serves both sides, or is a (left, right) pair. ``estimator=None`` is the exact-Gramian oracle: every
  step recomputes G_u and G_v over all entities
  (:func:`exact_gramians`, ``exact_chunk_size`` rows at a time) and the surrogate's gradient is taken on the same
  sampled entity rows as the estimators', so the oracle differs from them only in the Gramians' estimation error.

  With ``mesh`` (a :func:`bcjax.parallel.data_mesh`) the step is data-parallel: the rows are split over the mesh
  inside ``jax.shard_map``, parameters, optimiser and estimator states are replicated, and every batch mean and
  Gramian is summed over :data:`~bcjax.parallel.DATA_AXIS` -- the ``estimator`` must then be built with
  ``axis_name=DATA_AXIS``. Both batch sizes must be divisible by the mesh's device count.
  """
  axis = None if mesh is None else DATA_AXIS
  left_estimator, right_estimator = _sides(estimator)
  require_divisible("gramian_train_step", mesh, batch_size=batch_size, penalty_batch_size=penalty_batch_size)

  def mean(x):
    m = jnp.mean(x)
    return m if axis is None else jax.lax.pmean(m, axis)  # equal rows per device: the mean of means

  def loss_fn(params, extra: tuple, inputs: StepInputs):
    groups, rows = inputs.groups, inputs.rows
    model = nnx.merge(graphdef, params)
    u = model.embed_left(groups.pair_left)
    v = model.embed_right(groups.pair_right)
    residual = jnp.sum(u * v, axis=-1) - inputs.target
    observed = 0.5 * mean(residual**2)
    u_b = model.embed_left(groups.left)
    v_b = model.embed_right(groups.right)
    if estimator is None:
      (g_u, g_v), left_state, right_state = inputs.exact, (), ()
    else:
      # The estimates include the current batch (Alg. 2 line 6) and are constants for the gradient (Prop. 1).
      est_u, left_state = left_estimator.update(
        extra[0], jax.lax.stop_gradient(u_b), indices=rows.left_idx, weights=rows.left_mu
      )
      est_v, right_state = right_estimator.update(
        extra[1], jax.lax.stop_gradient(v_b), indices=rows.right_idx, weights=rows.right_mu
      )
      g_u, g_v = est_u.gramian, est_v.gramian
    surrogate = penalty_surrogate(u_b, v_b, g_u, g_v, u_weights=rows.left_mu, v_weights=rows.right_mu, axis_name=axis)
    loss = observed + lam * surrogate
    metrics = {"loss": loss, "observed_loss": observed, "penalty_estimate": gramian_penalty(g_u, g_v)}
    return loss, ((left_state, right_state), metrics)

  def prepare(state: TrainState, data: TrainData, rng: jax.Array) -> StepInputs:
    # Drawn replicated on the global batch, so every device count sees the same rows.
    k_pairs, k_left, k_right = jax.random.split(rng, 3)
    pairs = jax.random.randint(k_pairs, (batch_size,), 0, data.num_pairs)
    rows = Rows(
      pairs,
      *sample(data.left_sampler, k_left, penalty_batch_size),
      *sample(data.right_sampler, k_right, penalty_batch_size),
    )
    groups = StepGroups(
      gather(data.left_groups, data.pair_left[pairs]),
      gather(data.right_groups, data.pair_right[pairs]),
      gather(data.left_groups, rows.left_idx),
      gather(data.right_groups, rows.right_idx),
    )
    # The oracle's full-corpus pass runs in the global view, outside shard_map: with a mesh XLA partitions it.
    exact = None if estimator is not None else exact_gramians(graphdef, state.params, data, exact_chunk_size)
    return StepInputs(groups, data.pair_target[pairs], rows, exact)

  return make_train_step(
    jax.grad(loss_fn, has_aux=True),
    descent(optimizer),
    prepare=prepare,
    mesh=mesh,
    input_specs=_INPUT_SPECS,
  )


def make_estimation_error(
  graphdef: nnx.GraphDef, estimator: Estimators, *, penalty_batch_size: int, exact_chunk_size: int = 4096
):
  r"""Returns the jitted ``error(state, data, rng) -> [2]``: the relative Frobenius error
  :math:`\lVert \hat G - G(\theta)\rVert_F / \lVert G(\theta)\rVert_F` of the (left, right) Gramian estimates the next
  step would use, against the exact Gramians of every entity at the state's parameters (as in Fig. 2 of the paper,
  but along a real training run). The estimate is the estimator's update on a freshly drawn entity batch, exactly as
  in the train step: the batch Gramian for sampling, SOGram's moving average, SAGram's corrected cache sum. The state
  is not changed. Single-device (an estimator built without ``axis_name``)."""
  left_estimator, right_estimator = _sides(estimator)

  @jax.jit
  def error(state: TrainState, data: TrainData, rng: jax.Array) -> jax.Array:
    model = nnx.merge(graphdef, state.params)
    exact = exact_gramians(graphdef, state.params, data, exact_chunk_size)
    out = []
    for side, est, est_state, sampler, groups, key, g in (
      ("left", left_estimator, state.extra[0], data.left_sampler, data.left_groups, 0, exact[0]),
      ("right", right_estimator, state.extra[1], data.right_sampler, data.right_groups, 1, exact[1]),
    ):
      idx, mu = sample(sampler, jax.random.fold_in(rng, key), penalty_batch_size)
      x = (model.embed_left if side == "left" else model.embed_right)(gather(groups, idx))
      estimate, _ = est.update(est_state, x, indices=idx, weights=mu)
      out.append(jnp.linalg.norm(estimate.gramian - g) / jnp.linalg.norm(g))
    return jnp.stack(out)

  return error


def make_embedder(graphdef: nnx.GraphDef, chunk_size: int = 8192):
  """``embed(params, groups, side) -> [n, k]`` for all n entities of one side, in jitted chunks."""

  @functools.partial(jax.jit, static_argnums=(2,))
  def embed_chunk(params, groups, side: str):
    model = nnx.merge(graphdef, params)
    return model.embed_left(groups) if side == "left" else model.embed_right(groups)

  def embed(params, groups, side: str, idx=None):
    n = groups[0].shape[0] if idx is None else len(idx)
    out = []
    for start in range(0, n, chunk_size):
      rows = (
        jnp.arange(start, min(start + chunk_size, n)) if idx is None else jnp.asarray(idx[start : start + chunk_size])
      )
      chunk = gather(groups, rows)
      if rows.shape[0] < chunk_size and n > chunk_size:  # pad the last chunk: one compilation per side
        pad = chunk_size - rows.shape[0]
        chunk = tuple(jnp.pad(g, ((0, pad), (0, 0)), constant_values=-1) for g in chunk)
        out.append(embed_chunk(params, chunk, side)[: rows.shape[0]])
      else:
        out.append(embed_chunk(params, chunk, side))
    return jnp.concatenate(out, axis=0)

  return embed
