"""Pieces of the ICL experiment's steps: the encoder split for pure functions, the losses on graph or image views
(each view set in its own forward call, as the reference, so BatchNorm sees per-call batch statistics), the
embedding function and a timer that keeps compilation out of the training time."""

import functools
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jraph
from flax import nnx

from bcjax import _reduce
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


def _encode(train_def, params, stats, graphs, key, axis_name=None):
  if axis_name is not None:  # every device's rows draw their own dropout
    key = jax.random.fold_in(key, jax.lax.axis_index(axis_name))
  model = nnx.merge(train_def, params, stats, copy=True)
  z = model(graphs, key)
  return z, nnx.state(model, nnx.BatchStat)


def _gathered(x: jax.Array, axis_name: str | None) -> jax.Array:
  return x if axis_name is None else jax.lax.all_gather(x, axis_name, tiled=True)


def _relation_kl(
  z_new: jax.Array, z_old: jax.Array, mask: jax.Array, temperature: float, axis_name: str | None = None
) -> jax.Array:
  r"""Co2L-style instance-relation distillation: :math:`\mathrm{KL}(p^{old}_i \Vert p^{new}_i)` between the softmax
  over the other batch samples of the cosine similarities / τ under the frozen old and the current encoder, averaged
  over the real anchors (of every device under ``axis_name``: the other samples are those of the whole batch)."""
  rows = z_new.shape[0]
  own = (0 if axis_name is None else jax.lax.axis_index(axis_name) * rows) + jnp.arange(rows)
  every = _gathered(mask, axis_name)

  def log_p(z):
    z = z / jnp.maximum(jnp.linalg.norm(z, axis=-1, keepdims=True), 1e-12)
    logits = z @ _gathered(z, axis_name).T / temperature
    valid = every[None, :] & (jnp.arange(every.shape[0])[None, :] != own[:, None])
    logits = jnp.where(valid, logits, -jnp.inf)
    return jax.nn.log_softmax(logits, axis=-1), valid

  lp_new, valid = log_p(z_new)
  lp_old, _ = log_p(jax.lax.stop_gradient(z_old))
  kl = jnp.sum(jnp.where(valid, jnp.exp(lp_old) * (lp_old - lp_new), 0.0), axis=-1)
  total, count = jnp.sum(jnp.where(mask, kl, 0.0)), jnp.sum(mask)
  if axis_name is not None:
    total, count = _reduce.psum_each((total, count), axis_name)
  return total / jnp.maximum(count, 1)


def _positions(views, axis_name: str | None):
  """Each row's position in the whole batch: a device's block of a graph batch holds its samples and one padding
  graph (:func:`experiments.icl.data.graph_views`), an image block only samples."""
  if axis_name is None:
    return None
  rows = views.mask.shape[0]
  samples = rows - 1 if isinstance(views.anchor, jraph.GraphsTuple) else rows
  return jax.lax.axis_index(axis_name) * samples + jnp.arange(rows)


@functools.cache
def loss_fn(train_def: nnx.GraphDef, kind: str, temperature: float, axis_name: str | None = None) -> Callable:
  """``loss(params, stats, batch, key, extra) -> (loss, stats)`` for one kind:

  * ``nce-i``: batch = Views; NCE-I with in-batch negatives (pre-training, retraining, fine-tuning, replay);
  * ``nce-ii``: batch = (Views of old graphs, Negatives of new graphs), extra = α; NCE-II (eq. 8);
  * ``mixed``: batch = (Views of new graphs, Negatives of old graphs), extra = new_num; NCE-I over X';
  * ``distill``: batch = (Views, old embeddings of the anchors), extra = λ; NCE-I + λ · relation KL.

  With ``axis_name`` (inside ``jax.shard_map``) the batch's rows are split over that mesh axis and every loss is
  that of the whole batch: global InfoNCE denominators and negative sets, and the model's BatchNorm statistics (an
  encoder built with the same ``axis_name``).
  """

  def loss(params, stats, batch, key, extra):
    k1, k2, k3 = jax.random.split(key, 3)
    views = batch[0] if kind != "nce-i" else batch
    z_a, stats = _encode(train_def, params, stats, views.anchor, k1, axis_name)
    z_p, stats = _encode(train_def, params, stats, views.positive, k2, axis_name)
    if kind == "nce-i":
      return info_nce(z_a, z_p, where=views.mask, temperature=temperature, axis_name=axis_name), stats
    if kind == "distill":
      value = info_nce(z_a, z_p, where=views.mask, temperature=temperature, axis_name=axis_name)
      return value + extra * _relation_kl(z_a, batch[1], views.mask, 0.2, axis_name), stats
    other = batch[1]
    z_o, stats = _encode(train_def, params, stats, other.inputs, k3, axis_name)
    if kind == "nce-ii":
      return nce_ii(
        z_a,
        z_p,
        z_o,
        extra,
        new_negatives_where=other.mask,
        where=views.mask,
        temperature=temperature,
        axis_name=axis_name,
      ), stats
    if kind == "mixed":
      return mixed_info_nce(
        z_a,
        z_p,
        z_o,
        extra,
        old_negatives_where=other.mask,
        where=views.mask,
        temperature=temperature,
        positions=_positions(views, axis_name),
        axis_name=axis_name,
      ), stats
    raise ValueError(f"loss kind must be one of {KINDS}, got {kind!r}")

  return loss


@functools.cache
def batch_loss(
  train_def: nnx.GraphDef, kind: str, temperature: float, static_extra=None, axis_name: str | None = None
) -> Callable:
  """``loss(params, stats, (batch, key, extra)) -> (loss, stats)``: :func:`loss_fn` in the shape of
  :func:`bcjax.first_order_meta_gradient`'s losses. ``static_extra`` replaces ``extra`` when it sets a shape (mixed:
  new_num), so it is a compile-time constant."""
  loss = loss_fn(train_def, kind, temperature, axis_name)

  def run(params, stats, batch):
    views, key, extra = batch
    return loss(params, stats, views, key, extra if static_extra is None else static_extra)

  return run


@functools.cache
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
