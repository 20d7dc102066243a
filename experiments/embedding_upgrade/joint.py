r"""Joint training of a new model with its backward map (BC-Aligner), against training it alone and fitting the map
afterwards.

The new model C is a projection head over a real encoder's sentence embeddings x (width change D_x -> ``head_dim``):
:math:`C(x) = \mathrm{normalise}(h + W_2\,\mathrm{gelu}(h))`, :math:`h = W_1 x + b_1`, trained with InfoNCE on
paraphrase pairs (in-batch negatives). Jointly, an affine backward map :math:`B_C` to the previous version's space is
learned with it, and the loss adds :math:`\lambda` times BC-Aligner's multi-step loss (eq. 10,
:func:`bcjax.multi_step_loss`) through the registry's frozen older map :math:`B_1`, on the paired rows. The train step
is one jitted function over the split NNX state and the map's parameters, both donated.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import bcjax
from bcjax.alignment import affine_transform
from experiments.train_step import fresh_state, make_train_step, optax_descent


class Head(nnx.Module):
  """The new model C over fixed sentence features: a residual two-layer projection, L2-normalised."""

  def __init__(self, d_in: int, d_out: int, *, rngs: nnx.Rngs):
    self.inner = nnx.Linear(d_in, d_out, rngs=rngs)
    self.outer = nnx.Linear(d_out, d_out, rngs=rngs)

  def __call__(self, x):
    h = self.inner(x)
    z = h + self.outer(jax.nn.gelu(h))
    return z / jnp.maximum(jnp.linalg.norm(z, axis=-1, keepdims=True), 1e-12)


@functools.lru_cache(maxsize=4)
def _joint_step(graphdef: nnx.GraphDef, learning_rate: float, temperature: float):
  """(Adam, the jitted ``train_step(state, (batch, history, lam), rng) -> (state, [loss, InfoNCE, multi-step])``)
  over the parameters (C's state, B_C's {"w", "b"}) (:func:`experiments.train_step.make_train_step`)."""
  optimizer = optax.adam(learning_rate)

  def loss_fn(params, extra, inputs):
    (x1, x2, xa, za), history, lam = inputs
    state_p, w_p = params
    head = nnx.merge(graphdef, state_p)
    contrastive = bcjax.info_nce(head(x1), head(x2), temperature=temperature)
    align = bcjax.multi_step_loss(
      head(xa),
      za,
      w_p,
      [jax.lax.stop_gradient(history)],
      transform=affine_transform(),
      history_transforms=affine_transform(),
    )
    value = contrastive + lam * align
    return value, (extra, jnp.stack([value, contrastive, align]))

  return optimizer, make_train_step(jax.grad(loss_fn, has_aux=True), optax_descent(optimizer))


def train_head(
  features: np.ndarray,
  pairs: np.ndarray,
  aligned_rows: np.ndarray,
  z_prev: np.ndarray,
  history: dict,
  *,
  head_dim: int,
  lam: float,
  steps: int,
  seed: int,
  batch_size: int = 256,
  learning_rate: float = 2e-3,
  temperature: float = 0.05,
  log=None,
):
  """Trains C (and, with ``lam`` > 0, its backward map jointly) and returns (C's embeddings of every row of
  ``features``, the backward map's affine parameters {"w", "b"} (meaningful when ``lam`` > 0)).

  Args:
    features: the encoder's embeddings x of every sentence, [n, D_x].
    pairs: paraphrase pairs (row, row) for InfoNCE, [m, 2].
    aligned_rows: rows whose previous-version embeddings are known (the paired rows).
    z_prev: the previous version's embeddings of every row, [n, D_prev] (only ``aligned_rows`` are read).
    history: the frozen affine map B_1 from the previous version to the one before it ({"w", "b"}).
  """
  rngs = nnx.Rngs(seed)
  head = Head(features.shape[1], head_dim, rngs=rngs)
  graphdef, state = nnx.split(head)
  d_prev = z_prev.shape[1]
  w = affine_transform().init(jax.random.key(seed + 1), d_prev, head_dim)
  optimizer, step_fn = _joint_step(graphdef, learning_rate, temperature)
  train_state = fresh_state(optimizer, (state, w))
  history = {k: jnp.asarray(v, jnp.float32) for k, v in history.items()}
  rng = np.random.default_rng(seed)
  x = jnp.asarray(features, jnp.float32)
  zp = jnp.asarray(z_prev, jnp.float32)
  for step in range(steps):
    p = pairs[rng.integers(0, len(pairs), batch_size)]
    a = aligned_rows[rng.integers(0, len(aligned_rows), batch_size)]
    batch = (x[p[:, 0]], x[p[:, 1]], x[a], zp[a])
    train_state, values = step_fn(train_state, (batch, history, jnp.float32(lam)), None)
    if log is not None and (step % 100 == 0 or step == steps - 1):
      total, contrastive, align = (float(v) for v in values)
      log(step=step, lam=lam, loss=total, info_nce=contrastive, multi_step=align)
  state, w = train_state.params
  head = nnx.merge(graphdef, state)
  embed = jax.jit(head.__call__)
  out = np.concatenate([np.asarray(embed(x[i : i + 4096])) for i in range(0, x.shape[0], 4096)])
  return out, {k: np.asarray(v, np.float64) for k, v in w.items()}
