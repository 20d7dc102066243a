"""Pieces of the ICL experiment's steps: the encoder split for pure functions, the losses on graph or image views
(each view set in its own forward call, as the reference, so BatchNorm sees per-call batch statistics), the
embedding function and a timer that keeps compilation out of the training time."""

import functools
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from bcjax.contrastive import info_nce, mixed_info_nce, nce_ii
from experiments.common import split_train_eval

KINDS = ("nce-i", "nce-ii", "mixed", "distill")


class Encoder(NamedTuple):
  train_def: nnx.GraphDef
  eval_def: nnx.GraphDef
  params: nnx.State
  stats: nnx.State


def split_encoder(model: nnx.Module) -> Encoder:
  """The train- and eval-mode graph definitions of ``model`` and its parameters and batch statistics."""
  return Encoder(*split_train_eval(model))


def _encode(train_def, params, stats, graphs, key):
  model = nnx.merge(train_def, params, stats, copy=True)
  z = model(graphs, key)
  return z, nnx.state(model, nnx.BatchStat)


def _relation_kl(z_new: jax.Array, z_old: jax.Array, mask: jax.Array, temperature: float) -> jax.Array:
  r"""Co2L-style instance-relation distillation: :math:`\mathrm{KL}(p^{old}_i \Vert p^{new}_i)` between the softmax
  over the other batch samples of the cosine similarities / τ under the frozen old and the current encoder, averaged
  over the real anchors."""
  def log_p(z):
    z = z / jnp.maximum(jnp.linalg.norm(z, axis=-1, keepdims=True), 1e-12)
    logits = z @ z.T / temperature
    valid = mask[None, :] & ~jnp.eye(z.shape[0], dtype=bool)
    logits = jnp.where(valid, logits, -jnp.inf)
    return jax.nn.log_softmax(logits, axis=-1), valid
  lp_new, valid = log_p(z_new)
  lp_old, _ = log_p(jax.lax.stop_gradient(z_old))
  kl = jnp.sum(jnp.where(valid, jnp.exp(lp_old) * (lp_old - lp_new), 0.0), axis=-1)
  return jnp.sum(jnp.where(mask, kl, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


@functools.lru_cache(maxsize=None)
def loss_fn(train_def: nnx.GraphDef, kind: str, temperature: float) -> Callable:
  """``loss(params, stats, batch, key, extra) -> (loss, stats)`` for one kind:

  * ``nce-i``: batch = Views; NCE-I with in-batch negatives (pre-training, retraining, fine-tuning, replay);
  * ``nce-ii``: batch = (Views of old graphs, Negatives of new graphs), extra = α; NCE-II (eq. 8);
  * ``mixed``: batch = (Views of new graphs, Negatives of old graphs), extra = new_num; NCE-I over X';
  * ``distill``: batch = (Views, old embeddings of the anchors), extra = λ; NCE-I + λ · relation KL.
  """
  def loss(params, stats, batch, key, extra):
    k1, k2, k3 = jax.random.split(key, 3)
    views = batch[0] if kind != "nce-i" else batch
    z_a, stats = _encode(train_def, params, stats, views.anchor, k1)
    z_p, stats = _encode(train_def, params, stats, views.positive, k2)
    if kind == "nce-i":
      return info_nce(z_a, z_p, where=views.mask, temperature=temperature), stats
    if kind == "distill":
      value = info_nce(z_a, z_p, where=views.mask, temperature=temperature)
      return value + extra * _relation_kl(z_a, batch[1], views.mask, 0.2), stats
    other = batch[1]
    z_o, stats = _encode(train_def, params, stats, other.inputs, k3)
    if kind == "nce-ii":
      return nce_ii(z_a, z_p, z_o, extra, new_negatives_where=other.mask, where=views.mask,
                    temperature=temperature), stats
    if kind == "mixed":
      return mixed_info_nce(z_a, z_p, z_o, extra, old_negatives_where=other.mask, where=views.mask,
                            temperature=temperature), stats
    raise ValueError(f"loss kind must be one of {KINDS}, got {kind!r}")
  return loss


@functools.lru_cache(maxsize=None)
def batch_loss(train_def: nnx.GraphDef, kind: str, temperature: float, static_extra=None) -> Callable:
  """``loss(params, stats, (batch, key, extra)) -> (loss, stats)``: :func:`loss_fn` in the shape of
  :func:`bcjax.first_order_meta_gradient`'s losses. ``static_extra`` replaces ``extra`` when it sets a shape (mixed:
  new_num), so it is a compile-time constant."""
  loss = loss_fn(train_def, kind, temperature)

  def run(params, stats, batch):
    views, key, extra = batch
    return loss(params, stats, views, key, extra if static_extra is None else static_extra)
  return run


@functools.lru_cache(maxsize=None)
def embed_fn(eval_def: nnx.GraphDef) -> Callable:
  return jax.jit(lambda params, stats, graphs: nnx.merge(eval_def, params, stats)(graphs))


class Timer:
  """Books the compilation of jitted calls: a call during which the function's compilation cache grew spent its
  dispatch (tracing and compiling; the computation itself runs asynchronously) as compile time. The callers
  subtract it from the wall time of their epochs."""

  def __init__(self):
    self.compile_seconds = 0.0

  def dispatch(self, fn, *args):
    """``fn(*args)`` without waiting for the result."""
    before = fn._cache_size()
    start = time.perf_counter()
    out = fn(*args)
    if fn._cache_size() > before:
      self.compile_seconds += time.perf_counter() - start
    return out
