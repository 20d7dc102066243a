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


class Head(nnx.Module):
  """The new model C over fixed sentence features: a residual two-layer projection, L2-normalised."""

  def __init__(self, d_in: int, d_out: int, *, rngs: nnx.Rngs):
    self.inner = nnx.Linear(d_in, d_out, rngs=rngs)
    self.outer = nnx.Linear(d_out, d_out, rngs=rngs)

  def __call__(self, x):
    h = self.inner(x)
    z = h + self.outer(jax.nn.gelu(h))
    return z / jnp.maximum(jnp.linalg.norm(z, axis=-1, keepdims=True), 1e-12)


@functools.partial(jax.jit, static_argnames=("graphdef", "optimizer", "temperature"), donate_argnums=(0, 1, 2))
def _step(state, w, opt_state, batch, history, lam, *, graphdef, optimizer, temperature):
  x1, x2, xa, za = batch

  def loss(params):
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
    return contrastive + lam * align, (contrastive, align)

  (value, (contrastive, align)), grads = jax.value_and_grad(loss, has_aux=True)((state, w))
  updates, opt_state = optimizer.update(grads, opt_state, (state, w))
  state, w = optax.apply_updates((state, w), updates)
  return state, w, opt_state, jnp.stack([value, contrastive, align])


@functools.lru_cache(maxsize=4)
def _adam(learning_rate: float):
  return optax.adam(learning_rate)


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
  optimizer = _adam(learning_rate)
  opt_state = optimizer.init((state, w))
  history = {k: jnp.asarray(v, jnp.float32) for k, v in history.items()}
  rng = np.random.default_rng(seed)
  x = jnp.asarray(features, jnp.float32)
  zp = jnp.asarray(z_prev, jnp.float32)
  for step in range(steps):
    p = pairs[rng.integers(0, len(pairs), batch_size)]
    a = aligned_rows[rng.integers(0, len(aligned_rows), batch_size)]
    batch = (x[p[:, 0]], x[p[:, 1]], x[a], zp[a])
    state, w, opt_state, values = _step(
      state,
      w,
      opt_state,
      batch,
      history,
      jnp.float32(lam),
      graphdef=graphdef,
      optimizer=optimizer,
      temperature=temperature,
    )
    if log is not None and (step % 100 == 0 or step == steps - 1):
      total, contrastive, align = (float(v) for v in values)
      log(step=step, lam=lam, loss=total, info_nce=contrastive, multi_step=align)
  head = nnx.merge(graphdef, state)
  embed = jax.jit(head.__call__)
  out = np.concatenate([np.asarray(embed(x[i : i + 4096])) for i in range(0, x.shape[0], 4096)])
  return out, {k: np.asarray(v, np.float64) for k, v in w.items()}
