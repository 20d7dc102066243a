"""The replay buffer of ICL's learning-rate agent (section 3.3.2).

A fixed-capacity ring of transitions and uniform draws from it without replacement, as pure jittable functions of
NamedTuples (no flax: the buffer is plain arrays).

Reference: Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016 (experience replay).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp


class Transitions(NamedTuple):
  """Transitions of the learning-rate MDP.

  Loss windows, unit actions, rewards (loss decrements), next windows and episode ends; unbatched in
  :func:`replay_add`, with a leading batch axis from :func:`replay_sample`.
  """

  state: jax.Array  # [..., window]
  action: jax.Array  # [...] unit actions
  reward: jax.Array  # [...]
  next_state: jax.Array  # [..., window]
  done: jax.Array  # [...] 1.0 where the episode ended


class ReplayBuffer(NamedTuple):
  """A fixed-capacity ring buffer of transitions.

  ``data`` rows [capacity, ...], ``size`` rows held, ``at`` the next row written (the oldest once full).
  """

  data: Transitions
  size: jax.Array  # int32 []
  at: jax.Array  # int32 []


def replay_buffer(capacity: int, window: int) -> ReplayBuffer:
  """An empty buffer of ``capacity`` transitions over loss windows of length ``window``.

  Args:
    capacity: transitions held at most.
    window: the loss window's length (a state's width).

  Returns:
    An empty :class:`ReplayBuffer`.
  """
  zeros = jnp.zeros(capacity, jnp.float32)
  return ReplayBuffer(
    Transitions(
      jnp.zeros((capacity, window), jnp.float32), zeros, zeros, jnp.zeros((capacity, window), jnp.float32), zeros
    ),
    jnp.zeros((), jnp.int32),
    jnp.zeros((), jnp.int32),
  )


def replay_add(buffer: ReplayBuffer, transition: Transitions) -> ReplayBuffer:
  """Writes one transition (unbatched fields) at ``at``, overwriting the oldest row once the buffer is full.

  Args:
    buffer: the buffer.
    transition: one transition, unbatched.

  Returns:
    The buffer with it written.
  """
  capacity = buffer.data.reward.shape[0]
  data = jax.tree.map(
    lambda column, value: column.at[buffer.at].set(jnp.asarray(value, column.dtype)), buffer.data, transition
  )
  return ReplayBuffer(data, jnp.minimum(buffer.size + 1, capacity), (buffer.at + 1) % capacity)


def _distinct_rows(key: jax.Array, n: jax.Array, k: int) -> jax.Array:
  """K distinct uniform draws from range(n) (n ≥ k, traced) by Floyd's algorithm.

  For j = n − k … n − 1 draw t from range(j + 1) and keep t, or j when t is already kept. O(k²) work whatever n (no
  permutation of the buffer).
  """
  keys = jax.random.split(key, k)

  def draw(i, chosen):
    j = (n - k + i).astype(jnp.int32)
    t = jax.random.randint(keys[i], (), 0, j + 1, jnp.int32)
    return chosen.at[i].set(jnp.where(jnp.any(chosen == t), j, t))

  return jax.lax.fori_loop(0, k, draw, jnp.full(k, -1, jnp.int32))


def replay_sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Transitions:
  """``batch_size`` stored transitions drawn uniformly, without replacement (with it while fewer are held).

  The buffer must hold at least one.

  Args:
    buffer: a buffer holding at least one transition.
    key: a PRNG key.
    batch_size: transitions drawn.

  Returns:
    The drawn :class:`Transitions`, each field with a leading [batch_size] axis.
  """
  size = jnp.maximum(buffer.size, 1)
  k_floyd, k_any = jax.random.split(key)
  rows = jnp.where(
    size >= batch_size,
    _distinct_rows(k_floyd, size, batch_size),
    jax.random.randint(k_any, (batch_size,), 0, size, jnp.int32),
  )
  return jax.tree.map(lambda column: column[rows], buffer.data)
