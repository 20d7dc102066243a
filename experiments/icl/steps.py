"""The ICL methods' train steps, each fused into one jitted, state-donating call per batch, so that an epoch costs
one dispatch per batch and one host synchronisation (its losses) at its end.

* :func:`adam_step`: one loss (NCE-I, NCE-II, mixed NCE-I or distillation against a frozen teacher) and an Adam step;
* :func:`agent_step`: one loss and an SGD step whose rate a learning-rate agent picks from that loss (ICL w/o M);
* :func:`meta_step`: ICL's step per query batch (eq. 12, first order): n_inner SGD steps on NCE-II from θ (a scan,
  compiled once whatever n_inner, or unrolled: on XLA's CPU backend a scan over convolutions ran 5× slower than the
  unrolled steps on digits-2, while on PROTEINS' graphs both ran alike),
  with lr_s fixed or from the support agent; the mixed NCE-I loss and gradient at θ'; the outer step on θ (SGD with
  lr_q fixed or from the query agent, or Adam as the reference code). It composes
  :func:`bcjax.first_order_meta_gradient` and :func:`bcjax.learning_rate_agent`; nothing here re-derives them.

The carry (parameters, BatchNorm statistics, Adam state, the agents' states) is donated: its buffers, the agents'
replay buffers included, are updated in place.

With ``mesh`` (``--devices``) a step is data-parallel: its batches arrive as device blocks (``devices=`` of the
data's ``views``) split over the mesh inside ``jax.shard_map``, the carry is replicated, and the losses, their
gradients and the BatchNorm statistics are those of the whole batch (:func:`experiments.icl.train.loss_fn` with
``axis_name``), so every device applies the same update and the carry stays replicated.
"""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from bcjax._device import copy_tree
from bcjax.contrastive import AgentConfig, first_order_meta_gradient, learning_rate_agent, sgd_step
from bcjax.parallel import DATA_AXIS
from experiments.common import adam
from experiments.icl.train import batch_loss


class Carry(NamedTuple):
  params: Any
  stats: Any
  opt_state: Any  # Adam's state (unused by the SGD-only variants)
  agents: tuple  # () or (support agent, query agent) states


def init_carry(
  params,
  stats,
  learning_rate: float,
  weight_decay: float,
  agent: AgentConfig | None,
  key: jax.Array,
  initial_loss: float | None = None,
) -> Carry:
  """Device copies of θ and the statistics, a fresh Adam state and, with ``agent``, two fresh agents that have seen
  ``initial_loss`` (the pre-training's last mini-batch loss)."""
  params, stats = copy_tree((params, stats))
  agents = ()
  if agent is not None:
    make = learning_rate_agent(agent)
    agents = tuple(make.init(k, initial_loss) for k in jax.random.split(key))
  return Carry(params, stats, adam(learning_rate, weight_decay).init(params), agents)


def _on_mesh(step, mesh, block_axes: tuple):
  """``step(carry, *args) -> (carry, out)`` run data-parallel over ``mesh`` (unchanged without one): ``block_axes[i]``
  is the axis of ``args[i]``'s leaves that holds the device blocks (each device gets its own, squeezed), None for an
  argument every device sees whole (keys, scalars, a frozen teacher). Replicated parameters used on every device's
  rows get the gradient summed over the mesh from shard_map's autodiff; the carry and the outputs are replicated."""
  if mesh is None:
    return step

  def local(carry, *args):
    args = [
      a if axis is None else jax.tree.map(lambda x, axis=axis: jnp.squeeze(x, axis), a)
      for a, axis in zip(args, block_axes)
    ]
    return step(carry, *args)

  specs = tuple(jax.P() if axis is None else jax.P(*([None] * axis), DATA_AXIS) for axis in block_axes)
  return jax.shard_map(local, mesh=mesh, in_specs=(jax.P(),) + specs, out_specs=jax.P())


def _adam_apply(optimizer, params, opt_state, grads):
  updates, opt_state = optimizer.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state


@functools.cache
def adam_step(
  train_def: nnx.GraphDef,
  kind: str,
  temperature: float,
  learning_rate: float,
  weight_decay: float,
  static_extra=None,
  teacher_def: nnx.GraphDef | None = None,
  mesh=None,
):
  """``step(carry, views, key, extra, teacher) -> (carry, loss)``: ``kind``'s loss on one batch and one Adam step.
  With ``teacher_def`` (distillation) ``teacher = (params, stats)`` of the frozen encoder embeds the anchors inside
  the step; otherwise pass ``None``."""
  loss_fn = batch_loss(train_def, kind, temperature, static_extra, None if mesh is None else DATA_AXIS)
  optimizer = adam(learning_rate, weight_decay)

  def step(carry: Carry, views, key, extra, teacher):
    if teacher_def is not None:
      views = (views, nnx.merge(teacher_def, *teacher)(views.anchor))
    (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(carry.params, carry.stats, (views, key, extra))
    params, opt_state = _adam_apply(optimizer, carry.params, carry.opt_state, grads)
    return carry._replace(params=params, stats=stats, opt_state=opt_state), loss

  return jax.jit(_on_mesh(step, mesh, (0, None, None, None)), donate_argnums=(0,))


@functools.cache
def agent_step(
  train_def: nnx.GraphDef, kind: str, temperature: float, agent: AgentConfig, which: int, static_extra=None, mesh=None
):
  """``step(carry, views, key, extra) -> (carry, loss)``: ``kind``'s loss on one batch and an SGD step with the rate
  that agent ``which`` (0 support, 1 query) picks from that loss."""
  loss_fn = batch_loss(train_def, kind, temperature, static_extra, None if mesh is None else DATA_AXIS)
  observe = learning_rate_agent(agent).observe

  def step(carry: Carry, views, key, extra):
    k_loss, k_agent = jax.random.split(key)
    (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(carry.params, carry.stats, (views, k_loss, extra))
    rate, agent_state, _ = observe(carry.agents[which], loss, k_agent)
    agents = tuple(agent_state if i == which else a for i, a in enumerate(carry.agents))
    return carry._replace(params=sgd_step(carry.params, grads, rate), stats=stats, agents=agents), loss

  return jax.jit(_on_mesh(step, mesh, (0, None, None)), donate_argnums=(0,))


class MetaRule(NamedTuple):
  """How :func:`meta_step` picks its rates: learned by the two agents (``agent``), or fixed ``inner_rate`` and an
  outer SGD step with ``outer_rate`` (``outer="sgd"``, eq. 12) or Adam (``outer="adam"``, the reference code)."""

  agent: AgentConfig | None
  inner_rate: float
  outer: str
  outer_rate: float
  learning_rate: float  # Adam's, when outer == "adam"
  weight_decay: float
  unroll: bool = False  # unroll the inner steps instead of scanning over them


@functools.cache
def meta_step(train_def: nnx.GraphDef, temperature: float, new_num: int, rule: MetaRule, mesh=None):
  """``step(carry, supports, query, key, alpha) -> (carry, (query loss, support losses [n_inner]))``: ICL's
  fused step per query batch (see the module docstring). ``supports`` are the n_inner NCE-II batches stacked on a
  leading axis (their device blocks on the next); ``query`` the mixed NCE-I batch; ``alpha`` the growth ratio of
  NCE-II."""
  axis_name = None if mesh is None else DATA_AXIS
  support_loss = batch_loss(train_def, "nce-ii", temperature, None, axis_name)
  query_loss = batch_loss(train_def, "mixed", temperature, new_num, axis_name)
  observe = learning_rate_agent(rule.agent).observe if rule.agent is not None else None
  optimizer = adam(rule.learning_rate, rule.weight_decay)

  def step(carry: Carry, supports, query, key, alpha):
    n_inner = jax.tree.leaves(supports)[0].shape[0]
    k_support, k_query, k_agents, k_outer = jax.random.split(key, 4)
    support_keys = jax.random.split(k_support, n_inner)
    if rule.unroll:
      batches = [(jax.tree.map(lambda x, i=i: x[i], supports), support_keys[i], alpha) for i in range(n_inner)]
    else:
      batches = (supports, support_keys, jnp.full(n_inner, alpha))
    if observe is None:
      rates, rate_state = rule.inner_rate, None
    else:

      def rates(agent_state, i, loss):
        lr, agent_state, _ = observe(agent_state, loss, jax.random.fold_in(k_agents, i))
        return lr, agent_state

      rate_state = carry.agents[0]
    meta = first_order_meta_gradient(
      support_loss,
      query_loss,
      carry.params,
      carry.stats,
      batches,
      (query, k_query, new_num),
      rates,
      stacked=not rule.unroll,
      rate_state=rate_state,
    )
    agents = carry.agents
    if observe is not None:
      lr_q, agent_q, _ = observe(carry.agents[1], meta.query_loss, k_outer)
      params, opt_state, agents = sgd_step(carry.params, meta.grads, lr_q), carry.opt_state, (meta.rate_state, agent_q)
    elif rule.outer == "adam":
      params, opt_state = _adam_apply(optimizer, carry.params, carry.opt_state, meta.grads)
    else:
      params, opt_state = sgd_step(carry.params, meta.grads, rule.outer_rate), carry.opt_state
    return Carry(params, meta.aux, opt_state, agents), (meta.query_loss, meta.support_losses)

  return jax.jit(_on_mesh(step, mesh, (1, 0, None, None)), donate_argnums=(0,))
