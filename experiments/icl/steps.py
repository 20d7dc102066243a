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

Each is :func:`experiments.train_step.make_train_step` with ICL's parts: the state's ``extra`` is (BatchNorm
statistics, the agents' states), its ``opt_state`` Adam's (unused by the SGD-only variants); the state is donated, so
its buffers, the agents' replay buffers included, are updated in place. A step is ``step(state, batch, key) ->
(state, metrics)`` with ``metrics["loss"]`` the batch's loss (the query loss of a meta step).

With ``mesh`` (``--devices``) a step is data-parallel: its batches arrive as device blocks (``devices=`` of the
data's ``views``) split over the mesh inside ``jax.shard_map`` (each device's block squeezed), the state is
replicated, and the losses, their gradients and the BatchNorm statistics are those of the whole batch
(:func:`experiments.icl.train.loss_fn` with ``axis_name``), so every device applies the same update and the state
stays replicated.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from bcjax.contrastive import AgentConfig, first_order_meta_gradient, learning_rate_agent, sgd_step
from bcjax.parallel import DATA_AXIS
from experiments.common import adam
from experiments.icl.train import batch_loss
from experiments.train_step import TrainState, apply_optimizer, fresh_state, make_train_step, optax_descent


def init_state(
  params,
  stats,
  learning_rate: float,
  weight_decay: float,
  agent: AgentConfig | None,
  key: jax.Array,
  initial_loss: float | None = None,
) -> TrainState:
  """Device copies of θ and the statistics, a fresh Adam state and, with ``agent``, two fresh agents that have seen
  ``initial_loss`` (the pre-training's last mini-batch loss): ``extra`` = (statistics, agents)."""
  agents = ()
  if agent is not None:
    make = learning_rate_agent(agent)
    agents = tuple(make.init(k, initial_loss) for k in jax.random.split(key))
  return fresh_state(adam(learning_rate, weight_decay), params, (stats, agents))


def _icl_step(gradient, descent, prepare, mesh, inputs: type, block_axes: tuple):
  """The train step of ICL's parts (:func:`experiments.train_step.make_train_step`): ``inputs`` (a NamedTuple
  class) has a field per entry of ``block_axes``, the axis of its leaves that holds the device blocks (None: seen
  whole by every device)."""
  specs = inputs(*(jax.P() if axis is None else jax.P(*([None] * axis), DATA_AXIS) for axis in block_axes))
  return make_train_step(_blockwise(gradient, mesh, block_axes), descent, prepare=prepare, mesh=mesh, input_specs=specs)


def _blockwise(gradient, mesh, block_axes: tuple):
  """``gradient`` reading one device's block of each blocked input, squeezed (unchanged without a mesh)."""
  if mesh is None:
    return gradient

  def local(params, extra, inputs):
    inputs = type(inputs)(
      *(
        a if axis is None else jax.tree.map(lambda x, axis=axis: jnp.squeeze(x, axis), a)
        for a, axis in zip(inputs, block_axes)
      )
    )
    return gradient(params, extra, inputs)

  return local


def _loss_gradient(loss):
  """The gradient of ``loss(params, stats, batch) -> (loss, stats)`` (:func:`~experiments.icl.train.batch_loss`) in
  the train step's shape: ``extra`` = (statistics, agents), the agents carried through."""

  def gradient(params, extra, batch):
    stats, agents = extra
    (value, stats), grads = jax.value_and_grad(loss, has_aux=True)(params, stats, batch)
    return grads, ((stats, agents), {"loss": value})

  return gradient


class AdamInputs(NamedTuple):
  views: object
  key: jax.Array
  extra: jax.Array
  teacher: object  # (params, stats) of the frozen teacher, or None


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
  """``step(state, (views, extra, teacher), key) -> (state, metrics)``: ``kind``'s loss on one batch and one Adam
  step. With ``teacher_def`` (distillation) ``teacher = (params, stats)`` of the frozen encoder embeds the anchors
  inside the step; otherwise pass ``None``."""
  loss = batch_loss(train_def, kind, temperature, static_extra, None if mesh is None else DATA_AXIS)
  loss_gradient = _loss_gradient(loss)

  def gradient(params, extra, inputs: AdamInputs):
    views = inputs.views
    if teacher_def is not None:
      views = (views, nnx.merge(teacher_def, *inputs.teacher)(views.anchor))
    return loss_gradient(params, extra, (views, inputs.key, inputs.extra))

  def prepare(state, batch, key) -> AdamInputs:
    return AdamInputs(batch[0], key, batch[1], batch[2])

  descent = optax_descent(adam(learning_rate, weight_decay))
  return _icl_step(gradient, descent, prepare, mesh, AdamInputs, (0, None, None, None))


class AgentInputs(NamedTuple):
  views: object
  key: jax.Array  # the loss's
  extra: jax.Array
  agent_key: jax.Array  # the agent's


@functools.cache
def agent_step(
  train_def: nnx.GraphDef, kind: str, temperature: float, agent: AgentConfig, which: int, static_extra=None, mesh=None
):
  """``step(state, (views, extra), key) -> (state, metrics)``: ``kind``'s loss on one batch and an SGD step with
  the rate that agent ``which`` (0 support, 1 query) picks from that loss."""
  loss = batch_loss(train_def, kind, temperature, static_extra, None if mesh is None else DATA_AXIS)
  loss_gradient = _loss_gradient(loss)
  observe = learning_rate_agent(agent).observe

  def gradient(params, extra, inputs: AgentInputs):
    return loss_gradient(params, extra, (inputs.views, inputs.key, inputs.extra))

  def descend(grad_fn, state: TrainState, inputs: AgentInputs, place):
    grads, ((stats, agents), metrics) = grad_fn(state.params, state.extra, place(inputs))
    rate, agent_state, _ = observe(agents[which], metrics["loss"], inputs.agent_key)
    agents = tuple(agent_state if i == which else a for i, a in enumerate(agents))
    return sgd_step(state.params, grads, rate), state.opt_state, (stats, agents), metrics

  def prepare(state, batch, key) -> AgentInputs:
    k_loss, k_agent = jax.random.split(key)
    return AgentInputs(batch[0], k_loss, batch[1], k_agent)

  return _icl_step(gradient, descend, prepare, mesh, AgentInputs, (0, None, None, None))


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


class MetaInputs(NamedTuple):
  supports: object  # the n_inner NCE-II batches, stacked on axis 0 (device blocks on axis 1)
  query: object  # the mixed NCE-I batch
  support_keys: jax.Array  # [n_inner]
  query_key: jax.Array
  agents_key: jax.Array  # the support agent's, folded with the inner step
  outer_key: jax.Array  # the query agent's
  alpha: jax.Array


@functools.cache
def meta_step(train_def: nnx.GraphDef, temperature: float, new_num: int, rule: MetaRule, mesh=None):
  """``step(state, (supports, query, alpha), key) -> (state, metrics)``: ICL's fused step per query batch (see the
  module docstring); ``metrics`` holds the query ``loss`` and the ``support_losses`` [n_inner]. ``supports`` are
  the n_inner NCE-II batches stacked on a leading axis (their device blocks on the next); ``query`` the mixed NCE-I
  batch; ``alpha`` the growth ratio of NCE-II."""
  axis_name = None if mesh is None else DATA_AXIS
  support_loss = batch_loss(train_def, "nce-ii", temperature, None, axis_name)
  query_loss = batch_loss(train_def, "mixed", temperature, new_num, axis_name)
  observe = learning_rate_agent(rule.agent).observe if rule.agent is not None else None
  optimizer = adam(rule.learning_rate, rule.weight_decay)

  def prepare(state, batch, key) -> MetaInputs:
    supports, query, alpha = batch
    n_inner = jax.tree.leaves(supports)[0].shape[0]
    k_support, k_query, k_agents, k_outer = jax.random.split(key, 4)
    return MetaInputs(supports, query, jax.random.split(k_support, n_inner), k_query, k_agents, k_outer, alpha)

  def gradient(params, extra, inputs: MetaInputs):
    """The first-order meta-gradient (eq. 12) at θ: n_inner support steps, the query loss at θ'."""
    stats, agents = extra
    supports, n_inner = inputs.supports, inputs.support_keys.shape[0]
    if rule.unroll:
      batches = [
        (jax.tree.map(lambda x, i=i: x[i], supports), inputs.support_keys[i], inputs.alpha) for i in range(n_inner)
      ]
    else:
      batches = (supports, inputs.support_keys, jnp.full(n_inner, inputs.alpha))
    if observe is None:
      rates, rate_state = rule.inner_rate, None
    else:

      def rates(agent_state, i, loss):
        lr, agent_state, _ = observe(agent_state, loss, jax.random.fold_in(inputs.agents_key, i))
        return lr, agent_state

      rate_state = agents[0]
    meta = first_order_meta_gradient(
      support_loss,
      query_loss,
      params,
      stats,
      batches,
      (inputs.query, inputs.query_key, new_num),
      rates,
      stacked=not rule.unroll,
      rate_state=rate_state,
    )
    agents = agents if observe is None else (meta.rate_state, agents[1])
    return meta.grads, ((meta.aux, agents), {"loss": meta.query_loss, "support_losses": meta.support_losses})

  def descend(grad_fn, state: TrainState, inputs: MetaInputs, place):
    """The outer step on θ: SGD at the query agent's rate, Adam, or SGD at ``outer_rate``."""
    grads, ((stats, agents), metrics) = grad_fn(state.params, state.extra, place(inputs))
    opt_state = state.opt_state
    if observe is not None:
      lr_q, agent_q, _ = observe(agents[1], metrics["loss"], inputs.outer_key)
      params, agents = sgd_step(state.params, grads, lr_q), (agents[0], agent_q)
    elif rule.outer == "adam":
      params, opt_state = apply_optimizer(optimizer, grads, opt_state, state.params)
    else:
      params = sgd_step(state.params, grads, rule.outer_rate)
    return params, opt_state, (stats, agents), metrics

  return _icl_step(gradient, descend, prepare, mesh, MetaInputs, (1, 0, None, None, None, None, None))
