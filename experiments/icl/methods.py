"""The incremental methods of the ICL experiment and their convergence protocol.

Every method starts from the encoder pre-trained on the old data X (retraining starts from scratch on X') and
trains until its epoch loss has not reached a new minimum (<= best) for ``patience`` epochs. The reported epoch is
the best one (1-based) and the time the cumulative training-loop time up to it, compilation excluded.

* retrain: NCE-I on X' (in-batch negatives), Adam;
* finetune: NCE-I on ΔX only, Adam;
* replay (a library choice; the paper leaves it open): a fixed random subset of X of size min(|ΔX|, |X|) shuffled
  together with ΔX, NCE-I, Adam;
* distill (a library choice): NCE-I on ΔX + λ · Co2L-style relation distillation against the frozen pre-trained
  encoder, Adam;
* nce2-only (ICL w/o M+LRL): every epoch all old batches with NCE-II, then all new batches with NCE-I over X'
  (mixed negatives), one Adam; epoch loss over both;
* meta (ICL w/o LRL): per new (query) batch, n_inner SGD steps with lr_s on NCE-II from θ, then the query gradient
  at θ' applied to θ (SGD with lr_q as eq. 12, or Adam as the reference code); epoch loss over the queries;
* lrl (ICL w/o M): nce2-only's schedule with plain SGD steps whose rates come from two DDPG agents;
* icl: meta with lr_s and lr_q from the two agents and the outer SGD step of eq. 12.
Unlike the reference code, the learned-rate variants write every update into the encoder.
"""

import math
import time
from typing import NamedTuple

import jax
import numpy as np

from bcjax.contrastive import (AgentConfig, LearningRateAgent, first_order_meta_gradient, inner_step_count,
                               old_negative_count)
from experiments.common import device_copy, shuffled_batches, to_host
from experiments.icl.configs import METHODS, Config
from experiments.icl.data import Cycle
from experiments.icl.train import (Encoder, Timer, adam_update, batch_loss, compiled_value_and_grad, embed_fn,
                                   sgd_update)



class Run(NamedTuple):
  encoder: Encoder  # the best epoch's parameters and statistics (host copies)
  epochs: int  # 1-based best epoch
  train_seconds: float  # cumulative training-loop time up to the best epoch
  compile_seconds: float
  losses: list[float]  # epoch losses
  stopped: str  # "patience", "max-epochs" or "non-finite loss"


class Context(NamedTuple):
  data: object  # GraphData or ImageData: .views, .raw_batches, .labels, .num, .new_model
  old: np.ndarray
  new: np.ndarray
  alpha: float
  cfg: Config


class _Trainer:
  """Shared state of one method's run: parameters, BatchNorm statistics, PRNG streams and the timer."""

  def __init__(self, ctx: Context, encoder: Encoder, key: jax.Array, seed: int):
    self.ctx, self.cfg, self.enc = ctx, ctx.cfg, encoder
    self.params, self.stats = device_copy(encoder.params), device_copy(encoder.stats)
    self.key = key
    self.rng = np.random.default_rng(seed)
    self.timer = Timer()
    self.optimizer, self._adam = adam_update(self.cfg.learning_rate, self.cfg.weight_decay)
    self.opt_state = self.optimizer.init(self.params)

  def next_key(self):
    self.key, sub = jax.random.split(self.key)
    return sub

  def loss(self, kind: str, static_extra=None):
    """``loss(params, stats, (batch, key, extra)) -> (loss, stats)`` of one kind (see ``train.loss_fn``)."""
    return batch_loss(self.enc.train_def, kind, self.cfg.temperature, static_extra)

  def value_and_grad(self, loss):
    """The jitted, timed ``(params, stats, batch) -> ((loss, stats), grads)`` of ``loss``."""
    fn = compiled_value_and_grad(loss)
    return lambda params, stats, batch: self.timer.call(fn, params, stats, batch)

  def grad(self, kind: str, batch, extra=0.0):
    """Loss and gradient at θ of one batch (a fresh key); the BatchNorm statistics move on."""
    return self.grad_prepared(kind, (batch, self.next_key(), extra))

  def grad_prepared(self, kind: str, prepared):
    """The same for a batch prepared as ``(views, key, extra)``."""
    loss = self.loss(kind, prepared[2] if kind == "mixed" else None)
    (value, self.stats), grads = self.value_and_grad(loss)(self.params, self.stats, prepared)
    return float(value), grads

  def adam(self, grads):
    self.params, self.opt_state = self.timer.call(self._adam, self.params, self.opt_state, grads)

  def sgd(self, grads, lr: float, params=None):
    return self.timer.call(sgd_update, self.params if params is None else params, grads, np.float32(lr))

  def views(self, index, extra=None, extra_graphs: int = 0):
    batch, others = self.ctx.data.views(index, self.cfg.batch_size, self.rng, extra, extra_graphs, self.timer)
    return batch if extra is None else (batch, others)


def _nce_i_epoch(t: _Trainer, indices: np.ndarray, teacher: Encoder | None = None) -> float:
  """NCE-I over ``indices`` with Adam; with a frozen ``teacher`` the distillation term is added."""
  losses = []
  for index in shuffled_batches(len(indices), t.cfg.batch_size, t.rng):
    batch = t.views(indices[index])
    if teacher is not None:
      old = embed_fn(teacher.eval_def)
      batch = (batch, t.timer.call(old, teacher.params, teacher.stats, batch.anchor))
      loss, grads = t.grad("distill", batch, t.cfg.distill_weight)
    else:
      loss, grads = t.grad("nce-i", batch)
    t.adam(grads)
    losses.append(loss)
  return float(np.mean(losses))


class _Incremental:
  """The cycling negative iterators and agents of the NCE-II based methods."""

  def __init__(self, t: _Trainer, ctx: Context, initial_loss: float, key: jax.Array, learned: bool):
    b = ctx.cfg.batch_size
    self.old_num = old_negative_count(ctx.alpha, b)
    self.new_num = b - 1 - self.old_num
    self.new_cycle = Cycle(ctx.new, b - 1, t.rng)  # B − 1 new negatives per old anchor
    self.old_cycle = Cycle(ctx.old, self.old_num, t.rng)  # old_num old negatives per new anchor
    self.support_cycle = Cycle(ctx.old, b, t.rng)
    old_batches, new_batches = math.ceil(len(ctx.old) / b), math.ceil(len(ctx.new) / b)
    self.n_inner = inner_step_count(ctx.alpha, rule=ctx.cfg.inner_rule, old_batches=old_batches,
                                    new_batches=new_batches)
    self.agent_s = self.agent_q = None
    if learned:
      k_s, k_q = jax.random.split(key)
      agent = AgentConfig(actor_hidden=ctx.cfg.agent_hidden, actor_layer_norm=ctx.cfg.agent_layer_norm)
      self.agent_s = LearningRateAgent(agent, k_s, initial_loss)
      self.agent_q = LearningRateAgent(agent, k_q, initial_loss)

  def support_batch(self, t: _Trainer, index):
    """An NCE-II batch of old anchors with B − 1 new negatives each: ``(views, key, α)``."""
    batch = t.views(index, self.new_cycle.next(), t.cfg.batch_size - 1)
    return batch, t.next_key(), np.float32(t.ctx.alpha)

  def query_batch(self, t: _Trainer, index):
    """A mixed NCE-I batch of new anchors with old_num old negatives each: ``(views, key, new_num)``."""
    batch = t.views(index, self.old_cycle.next(), self.old_num)
    return batch, t.next_key(), self.new_num

  def support(self, t: _Trainer, index):
    return t.grad_prepared("nce-ii", self.support_batch(t, index))

  def query(self, t: _Trainer, index):
    return t.grad_prepared("mixed", self.query_batch(t, index))


def _two_phase_epoch(t: _Trainer, inc: _Incremental, learned: bool) -> float:
  """All old batches (NCE-II) then all new batches (mixed NCE-I): Adam, or SGD with the agents' rates."""
  losses = []
  phases = ((t.ctx.old, inc.support, inc.agent_s), (t.ctx.new, inc.query, inc.agent_q))
  for indices, step, agent in phases:
    for index in shuffled_batches(len(indices), t.cfg.batch_size, t.rng):
      loss, grads = step(t, indices[index])
      if learned:
        t.params = t.sgd(grads, agent(loss))
      else:
        t.adam(grads)
      losses.append(loss)
  return float(np.mean(losses))


def _meta_epoch(t: _Trainer, inc: _Incremental, learned: bool) -> float:
  """Per query batch: :func:`bcjax.first_order_meta_gradient` (n_inner support SGD steps from θ, with the agent's
  rates or lr_s, and the query gradient at θ'), then the outer step on θ."""
  support_loss, query_loss = t.loss("nce-ii"), t.loss("mixed", inc.new_num)

  def inner_update(params, grads, lr):
    # the jitted SGD step donates its input: θ itself must survive the inner loop
    return t.timer.call(sgd_update, device_copy(params) if params is t.params else params, grads, np.float32(lr))

  losses = []
  for index in shuffled_batches(len(t.ctx.new), t.cfg.batch_size, t.rng):
    supports = [inc.support_batch(t, inc.support_cycle.next()) for _ in range(inc.n_inner)]
    query = inc.query_batch(t, t.ctx.new[index])
    rates = (lambda step, loss: inc.agent_s(float(loss))) if learned else t.cfg.inner_learning_rate
    meta = first_order_meta_gradient(support_loss, query_loss, t.params, t.stats, supports, query, rates,
                                     value_and_grad=t.value_and_grad, update=inner_update)
    t.stats, loss, grads = meta.aux, float(meta.query_loss), meta.grads
    if learned:
      t.params = t.sgd(grads, inc.agent_q(loss))
    elif t.cfg.meta_outer == "adam":
      t.adam(grads)
    else:
      t.params = t.sgd(grads, t.cfg.outer_learning_rate)
    losses.append(loss)
  return float(np.mean(losses))


def train_method(method: str, ctx: Context, pretrained: Encoder, fresh: Encoder, initial_loss: float,
                 key: jax.Array, seed: int, log=None) -> Run:
  """Trains one method to convergence (see the module docstring)."""
  if method not in METHODS:
    raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
  cfg = ctx.cfg
  k_train, k_agents = jax.random.split(key)
  t = _Trainer(ctx, fresh if method == "retrain" else pretrained, k_train, seed)
  inc = None
  if method in ("nce2-only", "meta", "lrl", "icl"):
    inc = _Incremental(t, ctx, initial_loss, k_agents, learned=method in ("lrl", "icl"))
  replay = None
  if method == "replay":
    kept = t.rng.choice(ctx.old, min(len(ctx.new), len(ctx.old)), replace=False)
    replay = np.concatenate([ctx.new, kept])
  everything = np.concatenate([ctx.old, ctx.new])

  def epoch():
    if method == "retrain":
      return _nce_i_epoch(t, everything)
    if method == "finetune":
      return _nce_i_epoch(t, ctx.new)
    if method == "replay":
      return _nce_i_epoch(t, replay)
    if method == "distill":
      return _nce_i_epoch(t, ctx.new, teacher=pretrained)
    if method in ("nce2-only", "lrl"):
      return _two_phase_epoch(t, inc, learned=method == "lrl")
    return _meta_epoch(t, inc, learned=method == "icl")

  return converge(t, epoch, cfg.patience, cfg.max_epochs, method, log)


def converge(t: _Trainer, epoch, patience: int, max_epochs: int, name: str, log=None) -> Run:
  best, best_epoch, best_state, elapsed, at_best, wait = math.inf, -1, None, 0.0, 0.0, 0
  losses, stopped = [], "max-epochs"
  for e in range(max_epochs):
    compiled_before = t.timer.compile_seconds
    start = time.perf_counter()
    loss = epoch()
    elapsed += time.perf_counter() - start - (t.timer.compile_seconds - compiled_before)
    losses.append(loss)
    if log is not None:
      log(method=name, epoch=e + 1, loss=loss, train_seconds=elapsed)
    if not np.isfinite(loss):
      stopped = "non-finite loss"
      break
    if loss <= best:
      best, best_epoch, at_best, wait = loss, e, elapsed, 0
      best_state = (to_host(t.params), to_host(t.stats))
    else:
      wait += 1
      if wait >= patience:
        stopped = "patience"
        break
  if best_state is None:
    raise FloatingPointError(f"{name}: the first epoch's loss is not finite ({losses[0]}); lower the learning rate")
  return Run(t.enc._replace(params=best_state[0], stats=best_state[1]), best_epoch + 1, at_best,
             t.timer.compile_seconds, losses, stopped)


def pretrain(ctx: Context, fresh: Encoder, key: jax.Array, seed: int, log=None) -> tuple[Run, float]:
  """NCE-I on the old data X; returns the run and the last mini-batch loss (the agents' first observation)."""
  t = _Trainer(ctx, fresh, key, seed)
  last = []

  def epoch():
    losses = []
    for index in shuffled_batches(len(ctx.old), t.cfg.batch_size, t.rng):
      loss, grads = t.grad("nce-i", t.views(ctx.old[index]))
      t.adam(grads)
      losses.append(loss)
    last.append(losses[-1])
    return float(np.mean(losses))
  run = converge(t, epoch, ctx.cfg.patience, ctx.cfg.max_epochs, "pretrain", log)
  return run, last[-1]
