r"""Learning-rate learning of ICL (section 3.3.2): a DDPG agent whose action is the next step's learning rate.

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
Training: replay buffer, batch 32; target :math:`y = r + \gamma (1 - d) Q'(s', \mu'(s'))`, critic MSE, actor
:math:`-\operatorname{mean} Q(s, \mu(s))`, Adam(1e-5) for both, soft target updates with τ = 10⁻³; the first
``warmup`` + 1 actions are uniform; afterwards :math:`u = \mu(s) + \max(\epsilon, 0) x_{OU}` clipped to [0, 1],
with an Ornstein–Uhlenbeck process (θ 0.15, σ 0.2, dt 0.01) and ε decaying by 1/50 000 per action.
Exploration noise is in the unit action space: the reference adds it to the raw rate.

Reference: Ji et al., WSDM 2023; Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx


class AgentConfig(NamedTuple):
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
      _, h = jax.lax.scan(lambda carry, x, cell=cell: cell(carry, x), (zeros, zeros), h)
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
  actor: nnx.State
  critic: nnx.State
  actor_target: nnx.State
  critic_target: nnx.State
  actor_opt: optax.OptState
  critic_opt: optax.OptState


class Transitions(NamedTuple):
  state: jax.Array  # [B, window]
  action: jax.Array  # [B] unit actions
  reward: jax.Array  # [B]
  next_state: jax.Array  # [B, window]
  done: jax.Array  # [B] 1.0 where the episode ended


class ReplayBuffer:
  """A host ring buffer of transitions; ``sample`` draws without replacement (with it while it holds fewer than
  the batch)."""

  def __init__(self, capacity: int, window: int):
    self.capacity, self.size, self.at = capacity, 0, 0
    self.data = Transitions(np.zeros((capacity, window), np.float32), *(np.zeros(capacity, np.float32)
                                                                         for _ in range(2)),
                            np.zeros((capacity, window), np.float32), np.zeros(capacity, np.float32))

  def add(self, state, action, reward, next_state, done: bool = False):
    for column, value in zip(self.data, (state, action, reward, next_state, float(done))):
      column[self.at] = value
    self.at = (self.at + 1) % self.capacity
    self.size = min(self.size + 1, self.capacity)

  def sample(self, rng: np.random.Generator, batch_size: int) -> Transitions:
    rows = rng.choice(self.size, batch_size, replace=self.size < batch_size)
    return Transitions(*(jnp.asarray(column[rows]) for column in self.data))


@functools.lru_cache(maxsize=None)
def _update_fn(config: AgentConfig, actor_def: nnx.GraphDef, critic_def: nnx.GraphDef):
  actor_opt = optax.adam(config.actor_learning_rate)
  critic_opt = optax.adam(config.critic_learning_rate)

  def critic_loss(critic, state: DDPGState, batch: Transitions):
    next_action = nnx.merge(actor_def, state.actor_target)(batch.next_state)
    target_q = nnx.merge(critic_def, state.critic_target)(batch.next_state, next_action)
    y = jax.lax.stop_gradient(batch.reward + config.gamma * (1.0 - batch.done) * target_q)
    q = nnx.merge(critic_def, critic)(batch.state, batch.action)
    return jnp.mean((q - y) ** 2)

  def actor_loss(actor, critic, batch: Transitions):
    action = nnx.merge(actor_def, actor)(batch.state)
    return -jnp.mean(nnx.merge(critic_def, critic)(batch.state, action))

  @jax.jit
  def update(state: DDPGState, batch: Transitions):
    c_loss, c_grad = jax.value_and_grad(critic_loss)(state.critic, state, batch)
    c_upd, c_opt = critic_opt.update(c_grad, state.critic_opt, state.critic)
    critic = optax.apply_updates(state.critic, c_upd)
    a_loss, a_grad = jax.value_and_grad(actor_loss)(state.actor, critic, batch)
    a_upd, a_opt = actor_opt.update(a_grad, state.actor_opt, state.actor)
    actor = optax.apply_updates(state.actor, a_upd)
    soft = lambda target, online: optax.incremental_update(online, target, config.tau)  # noqa: E731
    return DDPGState(actor, critic, soft(state.actor_target, actor), soft(state.critic_target, critic), a_opt,
                     c_opt), {"critic_loss": c_loss, "actor_loss": a_loss}

  return actor_opt, critic_opt, update


@functools.lru_cache(maxsize=None)
def _policy_fn(actor_def: nnx.GraphDef):
  return jax.jit(lambda actor, state: nnx.merge(actor_def, actor)(state[None])[0])


class DDPG:
  """A DDPG agent with a one-dimensional action in [0, 1]: ``act(state)``, ``remember(...)``, ``learn()``.

  Networks and updates are pure jitted functions of :class:`DDPGState`; the replay buffer, the OU noise and the
  warm-up counter live on the host."""

  def __init__(self, config: AgentConfig, key: jax.Array):
    if not 0.0 < config.lr_min < config.lr_max:
      raise ValueError(f"DDPG: need 0 < lr_min < lr_max, got {config.lr_min} and {config.lr_max}")
    if config.window < 1 or config.batch_size < 1 or config.warmup < 0:
      raise ValueError(f"DDPG: `window` and `batch_size` must be >= 1 and `warmup` >= 0, got {config.window}, "
                       f"{config.batch_size}, {config.warmup}")
    self.config = config
    k_actor, k_critic, k_np = jax.random.split(key, 3)
    actor = Actor(config.actor_hidden, config.actor_layer_norm, rngs=nnx.Rngs(k_actor))
    critic = Critic(config.window, config.critic_hidden, rngs=nnx.Rngs(k_critic))
    self.actor_def, actor_params = nnx.split(actor)
    self.critic_def, critic_params = nnx.split(critic)
    actor_opt, critic_opt, self._update = _update_fn(config, self.actor_def, self.critic_def)
    self.state = DDPGState(actor_params, critic_params, actor_params, critic_params, actor_opt.init(actor_params),
                           critic_opt.init(critic_params))
    self._policy = _policy_fn(self.actor_def)
    self.rng = np.random.default_rng(np.asarray(jax.random.key_data(k_np)).ravel())
    self.buffer = ReplayBuffer(config.buffer_size, config.window)
    self.ou, self.epsilon, self.steps = 0.0, 1.0, 0

  def policy(self, state) -> float:
    """The actor's deterministic unit action μ(s)."""
    return float(self._policy(self.state.actor, jnp.asarray(state, jnp.float32)))

  def act(self, state) -> float:
    """A unit action: uniform during the warm-up, then μ(s) plus decaying OU noise, clipped to [0, 1]."""
    c = self.config
    self.steps += 1
    if self.steps <= c.warmup + 1:
      return float(self.rng.uniform())
    self.ou += c.ou_theta * (0.0 - self.ou) * c.ou_dt + c.ou_sigma * np.sqrt(c.ou_dt) * self.rng.normal()
    noise = max(self.epsilon, 0.0) * self.ou
    self.epsilon -= c.epsilon_decay
    return float(np.clip(self.policy(state) + noise, 0.0, 1.0))

  def remember(self, state, action: float, reward: float, next_state, done: bool = False):
    self.buffer.add(state, action, reward, next_state, done)

  def learn(self) -> dict | None:
    """One DDPG update after the warm-up (None before)."""
    if self.steps <= self.config.warmup or self.buffer.size == 0:
      return None
    self.state, metrics = self._update(self.state, self.buffer.sample(self.rng, self.config.batch_size))
    return {k: float(v) for k, v in metrics.items()}

  def learning_rate(self, action: float) -> float:
    return self.config.lr_min + action * (self.config.lr_max - self.config.lr_min)


class LearningRateAgent:
  """Chooses each step's learning rate from the recent losses: ``lr = agent(loss)`` where ``loss`` is the current
  step's mini-batch loss at the current parameters, measured before the update the returned rate will drive.

  The previous call's transition is completed with reward (previous loss − this loss) and stored, one DDPG update
  runs, then the next action is taken from the window that ends with this loss."""

  def __init__(self, config: AgentConfig, key: jax.Array, initial_loss: float | None = None):
    self.ddpg = DDPG(config, key)
    self.history = [] if initial_loss is None else [float(initial_loss)]
    self.pending = None  # (state, action, loss) of the last action
    self.last_lr = None

  def window(self) -> np.ndarray:
    w = self.ddpg.config.window
    recent = self.history[-w:]
    return np.array(recent + [0.0] * (w - len(recent)), np.float32)

  def __call__(self, loss: float) -> float:
    loss = float(loss)
    if not np.isfinite(loss):
      raise ValueError(f"LearningRateAgent: the loss must be finite, got {loss}")
    self.history.append(loss)
    state = self.window()
    if self.pending is not None:
      prev_state, prev_action, prev_loss = self.pending
      self.ddpg.remember(prev_state, prev_action, prev_loss - loss, state)
      self.ddpg.learn()
    action = self.ddpg.act(state)
    self.pending = (state, action, loss)
    self.last_lr = self.ddpg.learning_rate(action)
    return self.last_lr
