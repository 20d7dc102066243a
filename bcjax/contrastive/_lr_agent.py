r"""Learning-rate learning of ICL (section 3.3.2).

A DDPG agent whose action is the next step's learning rate, as pure jittable functions of a NamedTuple state in the
optax style (a factory returns ``init`` and the steps).

MDP (the paper, with the reference code's concrete choices where the paper is silent):

* state :math:`s_t`: the last ``window`` (32) mini-batch losses of the agent's own stream, oldest first, right-padded
  with zeros;
* action :math:`u_t \in [0, 1]`, the learning rate :math:`lr_t = lr_{\min} + u_t (lr_{\max} - lr_{\min})` on a
  linear scale, :math:`[10^{-6}, 0.1]`;
* reward :math:`r_t = L_t - L_{t+1}`: the decrement of the loss caused by the action just taken. The reference
  code pairs each action with the previous step's decrement; here the transition is kept pending until
  :math:`L_{t+1}` is known.

Networks: actor = 2-layer LSTM (hidden 20; the code passes 10) over the loss window → Linear → sigmoid of the last
step; critic = MLP (window + 1) → 10 → 10 → 1 with LeakyReLU(0.01). The reference's size-1 LayerNorm after the
actor's Linear makes the output a constant (only its bias is learnt), so it is off unless ``actor_layer_norm``.
Training: replay buffer, batch 32 drawn without replacement (with it while the buffer holds fewer); target
:math:`y = r + \gamma (1 - d) Q'(s', \mu'(s'))`, critic MSE, actor :math:`-\operatorname{mean} Q(s, \mu(s))`,
Adam(1e-5) for both, soft target updates :math:`\theta' \leftarrow \tau \theta + (1 - \tau) \theta'` with τ = 10⁻³;
the first ``warmup`` + 1 actions are uniform; afterwards :math:`u = \mu(s) + \max(\epsilon, 0) x_{OU}` clipped to
[0, 1], with an Ornstein–Uhlenbeck process (θ 0.15, σ 0.2, dt 0.01) and ε decaying by 1/50 000 per action.
Exploration noise is in the unit action space: the reference adds it to the raw rate.

Reference: Ji et al., WSDM 2023; Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from bcjax._device import copy_tree
from bcjax.contrastive._replay import ReplayBuffer, Transitions, replay_add, replay_buffer, replay_sample


class AgentConfig(NamedTuple):
  """The learning-rate agent's settings (section 3.3.2), each default the paper's or, where it is silent, the code's.

  The learning-rate range, the networks' widths and rates, DDPG's discount ``gamma`` and soft-update ``tau``, the
  replay batch and buffer, the warm-up of uniform actions and the Ornstein-Uhlenbeck exploration noise.
  """

  window: int = 32
  actor_hidden: int = 20  # the paper; the reference code uses 10
  critic_hidden: int = 10
  lr_min: float = 1e-6
  lr_max: float = 0.1
  actor_learning_rate: float = 1e-5
  critic_learning_rate: float = 1e-5
  gamma: float = 0.99
  tau: float = 1e-3
  batch_size: int = 32
  warmup: int = 100
  ou_theta: float = 0.15
  ou_sigma: float = 0.2
  ou_dt: float = 0.01
  epsilon_decay: float = 1.0 / 50_000
  buffer_size: int = 100_000  # the reference allows 6e6 but never holds more than one run's steps
  actor_layer_norm: bool = False  # the reference's size-1 LayerNorm (actor output independent of the state)


class Actor(nnx.Module):
  """Loss window [B, window] → unit action [B] in (0, 1)."""

  def __init__(self, hidden: int, layer_norm: bool, *, rngs: nnx.Rngs):
    self.hidden = hidden
    self.cells = nnx.List([nnx.LSTMCell(1, hidden, rngs=rngs), nnx.LSTMCell(hidden, hidden, rngs=rngs)])
    self.head = nnx.Linear(hidden, 1, rngs=rngs)
    self.norm = nnx.LayerNorm(1, rngs=rngs) if layer_norm else None

  def __call__(self, state: jax.Array) -> jax.Array:
    h = jnp.swapaxes(state, 0, 1)[..., None]  # time-major [window, B, 1]
    for cell in self.cells:
      zeros = jnp.zeros((state.shape[0], self.hidden), state.dtype)  # zero initial state (the code draws N(0, 1))
      _, h = jax.lax.scan(cell, (zeros, zeros), h)
    out = self.head(h[-1])
    if self.norm is not None:
      out = self.norm(out)
    return jax.nn.sigmoid(out[:, 0])


class Critic(nnx.Module):
  """(state [B, window], unit action [B]) → Q [B]."""

  def __init__(self, window: int, hidden: int, *, rngs: nnx.Rngs):
    self.l1 = nnx.Linear(window + 1, hidden, rngs=rngs)
    self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
    self.l3 = nnx.Linear(hidden, 1, rngs=rngs)

  def __call__(self, state: jax.Array, action: jax.Array) -> jax.Array:
    h = jax.nn.leaky_relu(self.l1(jnp.concatenate([state, action[:, None]], axis=-1)), 0.01)
    h = jax.nn.leaky_relu(self.l2(h), 0.01)
    return self.l3(h)[:, 0]


class DDPGState(NamedTuple):
  """A DDPG agent's state.

  The online and target networks, their optimiser states, the replay buffer and the exploration noise's state.
  """

  actor: nnx.State
  critic: nnx.State
  actor_target: nnx.State
  critic_target: nnx.State
  actor_opt: optax.OptState
  critic_opt: optax.OptState
  buffer: ReplayBuffer
  ou: jax.Array  # the Ornstein–Uhlenbeck state x_OU, float32 []
  epsilon: jax.Array  # the noise scale ε, float32 []
  steps: jax.Array  # actions taken, int32 []


class DDPG(NamedTuple):
  """A DDPG agent with a one-dimensional action in [0, 1] (see :func:`ddpg`); every function is pure and jittable.

  * ``init(key) -> DDPGState``;
  * ``policy(state, observation [window]) -> μ(s)``, the deterministic unit action;
  * ``act(state, observation, key) -> (unit action, state)``: uniform during the warm-up, then μ(s) plus the
    decaying OU noise, clipped to [0, 1];
  * ``remember(state, transition) -> state``: one unbatched :class:`Transitions` into the replay buffer;
  * ``learn(state, key) -> (state, metrics)``: one update from a replay batch once the warm-up is over and the
    buffer holds a transition (otherwise the state is returned unchanged and ``metrics["learned"]`` is false).
  """

  init: Callable
  policy: Callable
  act: Callable
  remember: Callable
  learn: Callable


def _distinct_buffers(state):
  """A copy of every leaf.

  The targets start equal to the online networks, and a jitted step that donates its state cannot take one buffer twice.
  """
  return copy_tree(state)


def _check_config(config: AgentConfig) -> None:
  if not 0.0 < config.lr_min < config.lr_max:
    raise ValueError(f"ddpg: need 0 < lr_min < lr_max, got {config.lr_min} and {config.lr_max}")
  for name in ("window", "batch_size", "buffer_size", "actor_hidden", "critic_hidden"):
    if getattr(config, name) < 1:
      raise ValueError(f"ddpg: `{name}` must be >= 1, got {getattr(config, name)}")
  if config.warmup < 0:
    raise ValueError(f"ddpg: `warmup` must be >= 0, got {config.warmup}")
  if config.batch_size > config.buffer_size:
    raise ValueError(f"ddpg: `batch_size` ({config.batch_size}) exceeds `buffer_size` ({config.buffer_size})")


def ddpg(config: AgentConfig) -> DDPG:
  """The DDPG agent of :mod:`bcjax.contrastive._lr_agent` as pure functions over :class:`DDPGState`.

  Args:
    config: the agent's :class:`AgentConfig`.

  Returns:
    A :class:`DDPG`: ``init``, ``policy``, ``act``, ``remember`` and ``learn`` as pure functions.

  Raises:
    ValueError: a config field out of range.
  """
  _check_config(config)
  actor_def = nnx.graphdef(Actor(config.actor_hidden, config.actor_layer_norm, rngs=nnx.Rngs(0)))
  critic_def = nnx.graphdef(Critic(config.window, config.critic_hidden, rngs=nnx.Rngs(0)))
  actor_opt, critic_opt = optax.adam(config.actor_learning_rate), optax.adam(config.critic_learning_rate)

  def init(key: jax.Array) -> DDPGState:
    k_actor, k_critic = jax.random.split(key)
    actor = nnx.state(Actor(config.actor_hidden, config.actor_layer_norm, rngs=nnx.Rngs(k_actor)))
    critic = nnx.state(Critic(config.window, config.critic_hidden, rngs=nnx.Rngs(k_critic)))
    state = DDPGState(
      actor,
      critic,
      actor,
      critic,
      actor_opt.init(actor),
      critic_opt.init(critic),
      replay_buffer(config.buffer_size, config.window),
      jnp.zeros((), jnp.float32),
      jnp.ones((), jnp.float32),
      jnp.zeros((), jnp.int32),
    )
    return _distinct_buffers(state)

  def policy(state: DDPGState, observation: jax.Array) -> jax.Array:
    return nnx.merge(actor_def, state.actor)(jnp.asarray(observation, jnp.float32)[None])[0]

  def act(state: DDPGState, observation: jax.Array, key: jax.Array) -> tuple[jax.Array, DDPGState]:
    steps = state.steps + 1
    k_uniform, k_noise = jax.random.split(key)

    def explore(_):
      return jax.random.uniform(k_uniform, dtype=jnp.float32), state.ou, state.epsilon

    def exploit(_):
      ou = (
        state.ou
        + config.ou_theta * (0.0 - state.ou) * config.ou_dt
        + config.ou_sigma * jnp.sqrt(config.ou_dt) * jax.random.normal(k_noise, dtype=jnp.float32)
      )
      action = jnp.clip(policy(state, observation) + jnp.maximum(state.epsilon, 0.0) * ou, 0.0, 1.0)
      return action, ou.astype(jnp.float32), (state.epsilon - config.epsilon_decay).astype(jnp.float32)

    action, ou, epsilon = jax.lax.cond(steps <= config.warmup + 1, explore, exploit, None)
    return action.astype(jnp.float32), state._replace(ou=ou, epsilon=epsilon, steps=steps)

  def remember(state: DDPGState, transition: Transitions) -> DDPGState:
    return state._replace(buffer=replay_add(state.buffer, transition))

  def critic_loss(critic, state: DDPGState, batch: Transitions):
    next_action = nnx.merge(actor_def, state.actor_target)(batch.next_state)
    target_q = nnx.merge(critic_def, state.critic_target)(batch.next_state, next_action)
    y = jax.lax.stop_gradient(batch.reward + config.gamma * (1.0 - batch.done) * target_q)
    q = nnx.merge(critic_def, critic)(batch.state, batch.action)
    return jnp.mean((q - y) ** 2)

  def actor_loss(actor, critic, batch: Transitions):
    action = nnx.merge(actor_def, actor)(batch.state)
    return -jnp.mean(nnx.merge(critic_def, critic)(batch.state, action))

  def update(state: DDPGState, key: jax.Array):
    batch = replay_sample(state.buffer, key, config.batch_size)
    c_loss, c_grad = jax.value_and_grad(critic_loss)(state.critic, state, batch)
    c_upd, c_opt = critic_opt.update(c_grad, state.critic_opt, state.critic)
    critic = optax.apply_updates(state.critic, c_upd)
    a_loss, a_grad = jax.value_and_grad(actor_loss)(state.actor, critic, batch)
    a_upd, a_opt = actor_opt.update(a_grad, state.actor_opt, state.actor)
    actor = optax.apply_updates(state.actor, a_upd)
    soft = lambda target, online: optax.incremental_update(online, target, config.tau)
    return state._replace(
      actor=actor,
      critic=critic,
      actor_target=soft(state.actor_target, actor),
      critic_target=soft(state.critic_target, critic),
      actor_opt=a_opt,
      critic_opt=c_opt,
    ), (c_loss, a_loss)

  def learn(state: DDPGState, key: jax.Array) -> tuple[DDPGState, dict]:
    ready = (state.steps > config.warmup) & (state.buffer.size > 0)
    skip = lambda s, _: (s, (jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32)))
    state, (c_loss, a_loss) = jax.lax.cond(ready, update, skip, state, key)
    return state, {"learned": ready, "critic_loss": c_loss, "actor_loss": a_loss}

  return DDPG(init, policy, act, remember, learn)


def _no_update() -> dict:
  zero = jnp.zeros((), jnp.float32)
  return {"learned": jnp.zeros((), bool), "critic_loss": zero, "actor_loss": zero}


class AgentState(NamedTuple):
  """The state of a :func:`learning_rate_agent`.

  The DDPG agent, the window of the recent losses and the pending transition (the last action, its window and the loss
  it was taken at).
  """

  ddpg: DDPGState
  history: jax.Array  # [window] the last losses, oldest first, zero right-padded
  count: jax.Array  # type: ignore[assignment]  # int32 [] losses held in ``history`` (≤ window)
  pending: Transitions  # state, action and, in ``reward``, the loss L_t of the last action
  has_pending: jax.Array  # bool []


class LearningRateAgent(NamedTuple):
  """A loss-driven learning-rate agent (see :func:`learning_rate_agent`); pure and jittable.

  * ``init(key, initial_loss=None) -> AgentState``;
  * ``observe(state, loss, key) -> (learning_rate, state, metrics)``.
  """

  init: Callable
  observe: Callable
  learning_rate: Callable  # unit action → learning rate
  ddpg: DDPG


def learning_rate_agent(config: AgentConfig) -> LearningRateAgent:
  r"""Chooses each step's learning rate from the recent losses (section 3.3.2).

  ``observe(state, loss, key)`` takes :math:`L_t`, the current step's mini-batch loss at the current parameters
  (measured before the update the returned rate will drive). It appends :math:`L_t` to the window, completes the
  previous action's transition with the reward :math:`L_{t-1} - L_t` and stores it, runs one DDPG update, then acts
  from the window ending with :math:`L_t`, returning :math:`lr_t = lr_{\min} + u_t (lr_{\max} - lr_{\min})`.

  A non-finite ``loss`` leaves the state unchanged and returns ``lr_min`` with ``metrics["finite"]`` false: the
  caller stops on it, and the agent's networks never see a NaN.

  Args:
    config: the agent's :class:`AgentConfig`.

  Returns:
    A :class:`LearningRateAgent`: ``init(key, initial_loss=None)`` and ``observe(state, loss, key) -> (lr, state,
    metrics)``.

  Raises:
    ValueError: a config field out of range.

  Example::

    agent = bcjax.learning_rate_agent(bcjax.AgentConfig())
    state = agent.init(jax.random.key(0))
    lr, state, _ = jax.jit(agent.observe)(state, loss, key)
  """
  agent = ddpg(config)
  w = config.window

  def learning_rate(action: jax.Array) -> jax.Array:
    return config.lr_min + action * (config.lr_max - config.lr_min)

  def init(key: jax.Array, initial_loss=None) -> AgentState:
    history, count = jnp.zeros(w, jnp.float32), jnp.zeros((), jnp.int32)
    if initial_loss is not None:
      history, count = history.at[0].set(jnp.asarray(initial_loss, jnp.float32)), count + 1
    zero = jnp.zeros((), jnp.float32)
    return _distinct_buffers(
      AgentState(
        agent.init(key),
        history,
        count,
        Transitions(jnp.zeros(w, jnp.float32), zero, zero, jnp.zeros(w, jnp.float32), zero),
        jnp.zeros((), bool),
      )
    )

  def step(state: AgentState, loss: jax.Array, key: jax.Array):
    k_learn, k_act = jax.random.split(key)
    history = jnp.where(
      state.count >= w,
      jnp.roll(state.history, -1).at[w - 1].set(loss),
      state.history.at[jnp.minimum(state.count, w - 1)].set(loss),
    )
    pending = state.pending

    def store_and_learn(ddpg_state):
      transition = Transitions(
        pending.state, pending.action, pending.reward - loss, history, jnp.zeros((), jnp.float32)
      )
      return agent.learn(agent.remember(ddpg_state, transition), k_learn)

    def wait(ddpg_state):  # the first observation: no action to reward yet
      return ddpg_state, _no_update()

    # lax.cond, not a select: the replay buffer is large and a select would copy it
    ddpg_state, metrics = jax.lax.cond(state.has_pending, store_and_learn, wait, state.ddpg)
    action, ddpg_state = agent.act(ddpg_state, history, k_act)
    zero = jnp.zeros((), jnp.float32)
    new_state = AgentState(
      ddpg_state,
      history,
      jnp.minimum(state.count + 1, w),
      Transitions(history, action, loss, history, zero),
      jnp.ones((), bool),
    )
    return learning_rate(action), new_state, {**metrics, "action": action}

  def observe(state: AgentState, loss, key: jax.Array):
    loss = jnp.asarray(loss, jnp.float32)
    finite = jnp.isfinite(loss)

    def skip(state, loss, key):
      del loss, key
      return (jnp.asarray(config.lr_min, jnp.float32), state, {**_no_update(), "action": jnp.zeros((), jnp.float32)})

    rate, state, metrics = jax.lax.cond(finite, step, skip, state, loss, key)
    return rate.astype(jnp.float32), state, {**metrics, "finite": finite}

  return LearningRateAgent(init, observe, learning_rate, agent)
