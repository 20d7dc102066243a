"""The residual MLP kind: warm-started from the affine map, trained with Adam on streamed minibatches."""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bcjax._device import device_array
from bcjax._unit import unit_rows
from bcjax.alignment import mlp_transform
from bcjax.upgrade import _files


class MlpFit(NamedTuple):
  """:func:`train_mlp`'s result.

  The best epoch's ``params`` (float64), its ``hidden`` width, the ``epochs`` it took to reach them and its
  validation mean squared error ``val_mse``.
  """

  params: dict
  hidden: int
  epochs: int
  val_mse: float


@functools.lru_cache(maxsize=8)
def _mlp_steps(hidden: int, learning_rate: float):
  transform, optimizer = mlp_transform(hidden=hidden), optax.adam(learning_rate)

  def loss(params, zn, zp, weight):
    residual = transform.apply(params, zn) - zp
    return jnp.sum(weight * jnp.sum(residual * residual, axis=1)) / jnp.maximum(jnp.sum(weight), 1.0)

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state, zn, zp, weight):
    value, grad = jax.value_and_grad(loss)(params, zn, zp, weight)
    updates, opt_state = optimizer.update(grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value

  return transform, optimizer, step, jax.jit(loss)


def _padded(zn: np.ndarray, zp: np.ndarray, size: int):
  """A batch padded to ``size`` rows with weight 0, so every step has one shape (one compile)."""
  pad = size - zn.shape[0]
  weight = np.concatenate([np.ones(zn.shape[0], np.float32), np.zeros(pad, np.float32)])
  return (np.pad(zn, ((0, pad), (0, 0))), np.pad(zp, ((0, pad), (0, 0))), weight)


def _read_pairs(z_new, z_prev, rows, normalize) -> tuple[np.ndarray, np.ndarray]:
  zn, zp = _files.read_rows(z_new, rows, np.float32), _files.read_rows(z_prev, rows, np.float32)
  return (unit_rows(zn), unit_rows(zp)) if normalize else (zn, zp)


def train_mlp(
  z_new,
  z_prev,
  train_rows: np.ndarray,
  val_pairs: tuple[np.ndarray, np.ndarray],
  init: tuple,
  *,
  hidden: int,
  key: jax.Array,
  normalize: bool,
  max_epochs: int = 40,
  patience: int = 4,
  batch_size: int = 256,
  learning_rate: float = 1e-3,
) -> "MlpFit":
  """Trains the residual MLP from the affine map ``init`` = (W, b).

  Trains the residual MLP from the affine map ``init`` = (W, b) on minibatches of ``train_rows`` read from the
  (memory-mapped) pairs, keeping the parameters of the epoch with the lowest validation error; stops after ``patience``
  epochs without improvement. Returns an :class:`MlpFit` (the parameters in float64).
  """
  transform, optimizer, step, loss = _mlp_steps(hidden, learning_rate)
  w0, b0 = init
  params = transform.init(key, w0.shape[0], w0.shape[1], jnp.float32)
  params = dict(params, s=device_array(w0, np.float32), b2=device_array(b0, np.float32))
  opt_state = optimizer.init(params)
  val_new, val_prev = (device_array(a, np.float32) for a in val_pairs)
  val_weight = device_array(np.ones(val_new.shape[0], np.float32))
  best = (float(loss(params, val_new, val_prev, val_weight)), jax.tree.map(np.asarray, params), 0)
  rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 2**31 - 1)))
  # At least ~32 steps an epoch, so a small training set still takes steps enough between validations.
  size = int(min(batch_size, max(32, len(train_rows) // 32), len(train_rows)))
  for epoch in range(1, max_epochs + 1):
    order = rng.permutation(train_rows)
    for start in range(0, len(order), size):
      rows = np.sort(order[start : start + size])
      zn, zp, weight = _padded(*_read_pairs(z_new, z_prev, rows, normalize), size)
      params, opt_state, _ = step(params, opt_state, zn, zp, weight)
    error = float(loss(params, val_new, val_prev, val_weight))
    if error < best[0]:
      best = (error, jax.tree.map(np.asarray, params), epoch)
    elif epoch - best[2] >= patience:
      break
  return MlpFit({n: a.astype(np.float64) for n, a in best[1].items()}, hidden, best[2], best[0])
