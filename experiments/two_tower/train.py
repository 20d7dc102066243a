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

from bcjax.gramian import GramianEstimator, gramian_penalty, penalty_surrogate
from experiments.two_tower.data import TrainData, gather, sample


class TrainState(NamedTuple):
  params: nnx.State
  opt_state: optax.OptState
  left_estimator: tuple  # estimator states of G_u and G_v
  right_estimator: tuple
  step: jax.Array


def make_optimizer(name: str, learning_rate: float) -> optax.GradientTransformation:
  optimizers = {"adagrad": optax.adagrad, "sgd": optax.sgd, "adam": optax.adam}
  if name not in optimizers:
    raise ValueError(f"optimizer must be one of {sorted(optimizers)}, got {name!r}")
  return optimizers[name](learning_rate)


def init_state(graphdef, params, optimizer, estimator: GramianEstimator, k: int) -> TrainState:
  shape = jax.ShapeDtypeStruct((1, k), jnp.float32)
  return TrainState(params, optimizer.init(params), estimator.init(shape), estimator.init(shape),
                    jnp.zeros((), jnp.int32))


def make_train_step(graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation, estimator: GramianEstimator,
                    *, lam: float, batch_size: int, penalty_batch_size: int):
  """Returns the jitted ``train_step(state, data, rng) -> (state, metrics)``; the state is donated."""

  def loss_fn(params, state: TrainState, data: TrainData, rng):
    model = nnx.merge(graphdef, params)
    k_pairs, k_left, k_right = jax.random.split(rng, 3)
    pairs = jax.random.randint(k_pairs, (batch_size,), 0, data.pair_left.shape[0])
    u = model.embed_left(gather(data.left_groups, data.pair_left[pairs]))
    v = model.embed_right(gather(data.right_groups, data.pair_right[pairs]))
    residual = jnp.sum(u * v, axis=-1) - data.pair_target[pairs]
    observed = 0.5 * jnp.mean(residual ** 2)
    left_idx, left_mu = sample(data.left_sampler, k_left, penalty_batch_size)
    right_idx, right_mu = sample(data.right_sampler, k_right, penalty_batch_size)
    u_b = model.embed_left(gather(data.left_groups, left_idx))
    v_b = model.embed_right(gather(data.right_groups, right_idx))
    # The estimates include the current batch (Alg. 2 line 6) and are constants for the gradient (Prop. 1).
    g_u, left_state = estimator.update(state.left_estimator, jax.lax.stop_gradient(u_b), indices=left_idx,
                                       weights=left_mu)
    g_v, right_state = estimator.update(state.right_estimator, jax.lax.stop_gradient(v_b), indices=right_idx,
                                        weights=right_mu)
    surrogate = penalty_surrogate(u_b, v_b, g_u.gramian, g_v.gramian, u_weights=left_mu, v_weights=right_mu)
    loss = observed + lam * surrogate
    metrics = {"loss": loss, "observed_loss": observed, "penalty_estimate": gramian_penalty(g_u.gramian,
                                                                                          g_v.gramian)}
    return loss, (left_state, right_state, metrics)

  @functools.partial(jax.jit, donate_argnums=(0,))
  def train_step(state: TrainState, data: TrainData, rng: jax.Array):
    grads, (left_state, right_state, metrics) = jax.grad(loss_fn, has_aux=True)(state.params, state, data, rng)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(params, opt_state, left_state, right_state, state.step + 1), metrics

  return train_step


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
      rows = jnp.arange(start, min(start + chunk_size, n)) if idx is None else jnp.asarray(idx[start:start +
                                                                                                chunk_size])
      chunk = gather(groups, rows)
      if rows.shape[0] < chunk_size and n > chunk_size:  # pad the last chunk: one compilation per side
        pad = chunk_size - rows.shape[0]
        chunk = tuple(jnp.pad(g, ((0, pad), (0, 0)), constant_values=-1) for g in chunk)
        out.append(embed_chunk(params, chunk, side)[:rows.shape[0]])
      else:
        out.append(embed_chunk(params, chunk, side))
    return jnp.concatenate(out, axis=0)

  return embed
