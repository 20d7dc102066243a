"""The incremental methods of the ICL experiment and their convergence protocol.

Every method starts from the encoder pre-trained on the old data X (retraining starts from scratch on X') and
trains until the run's convergence rule stops it (:mod:`experiments.icl.convergence`: the smoothed, noise-aware
rule by default, the paper's with ``--convergence paper``). The reported epoch is the best one (1-based) and the
time the cumulative training-loop time up to it, compilation excluded.

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
from jax.sharding import NamedSharding

from bcjax.contrastive import AgentConfig, inner_step_count, old_negative_count
from bcjax.parallel import shard_blocks
from experiments.common import shuffled_batches, to_host
from experiments.icl.configs import METHODS, Config
from experiments.icl.convergence import Rule, Tracker, curve_status
from experiments.icl.data import Cycle, common_budget, stack_batches
from experiments.icl.steps import MetaRule, adam_step, agent_step, init_state, meta_step
from experiments.icl.train import Encoder, Timer


class Run(NamedTuple):
  encoder: Encoder  # the best epoch's parameters and statistics (host copies)
  epochs: int  # 1-based best epoch
  train_seconds: float  # cumulative training-loop time up to the best epoch
  compile_seconds: float
  losses: list[float]  # epoch losses
  stopped: str  # why it stopped: "patience", "max-epochs" or "non-finite loss"
  seconds: list[float] | None = None  # cumulative training-loop time at the end of each epoch
  quality: list[float] | None = None  # the probe's accuracy (%) after each epoch, when a probe was given
  curve: str = "improved"  # the loss curve's status (convergence.curve_status), "non-finite" for a broken run
  heldout: list[float] | None = None  # the held-out NCE-I loss after each epoch, when a held-out measure was given


class Context(NamedTuple):
  data: object  # GraphData or ImageData: .views, .raw_batches, .labels, .num, .new_model
  old: np.ndarray
  new: np.ndarray
  alpha: float
  cfg: Config
  mesh: jax.sharding.Mesh | None = None  # --devices: every step data-parallel over it


def agent_config(cfg: Config) -> AgentConfig:
  return AgentConfig(actor_hidden=cfg.agent_hidden, actor_layer_norm=cfg.agent_layer_norm)


class _Trainer:
  """One method's run: the donated train state (θ, Adam; BatchNorm statistics and the agents as its ``extra``), PRNG
  streams, the timer and the epoch's losses, kept on the device until the epoch ends."""

  def __init__(
    self,
    ctx: Context,
    encoder: Encoder,
    key: jax.Array,
    seed: int,
    agent: AgentConfig | None = None,
    initial_loss: float | None = None,
  ):
    self.ctx, self.cfg, self.enc = ctx, ctx.cfg, encoder
    self.key, k_agents = jax.random.split(key)
    self.state = init_state(
      encoder.params, encoder.stats, self.cfg.learning_rate, self.cfg.weight_decay, agent, k_agents, initial_loss
    )
    self.mesh = ctx.mesh
    self.devices = 1 if ctx.mesh is None else ctx.mesh.devices.size
    if ctx.mesh is not None:  # replicated on every device; the steps keep it so
      self.state = jax.device_put(self.state, NamedSharding(ctx.mesh, jax.P()))
    self.rng = np.random.default_rng(seed)
    self.timer = Timer()
    self.pending = []  # the epoch's per-batch losses (device scalars)

  @property
  def params(self):
    return self.state.params

  @property
  def stats(self):
    return self.state.extra[0]

  def next_key(self):
    self.key, sub = jax.random.split(self.key)
    return sub

  def run(self, step, batch):
    """One fused step on ``batch`` with the next key: the state moves on and its loss joins the epoch's (no host
    synchronisation)."""
    self.state, metrics = self.timer.dispatch(step, self.state, batch, self.next_key())
    self.pending.append(metrics["loss"])

  def epoch_loss(self) -> float:
    """The mean of the epoch's losses: the epoch's one host synchronisation."""
    losses = np.asarray(jax.device_get(self.pending), np.float64)
    self.pending = []
    return float(np.mean(losses))

  def adam_step(self, kind: str, static_extra=None, teacher: Encoder | None = None):
    c = self.cfg
    return adam_step(
      self.enc.train_def,
      kind,
      c.temperature,
      c.learning_rate,
      c.weight_decay,
      static_extra,
      None if teacher is None else teacher.eval_def,
      self.mesh,
    )

  def views(self, index, extra=None, extra_graphs: int = 0, place: bool = True):
    """A batch of views (with negatives ``extra`` in ``extra_graphs`` slots); on a mesh in device blocks, placed
    on it unless ``place`` is False (batches that are stacked first)."""
    batch, others = self.ctx.data.views(
      index, self.cfg.batch_size, self.rng, extra, extra_graphs, self.timer, self.devices
    )
    batch = batch if extra is None else (batch, others)
    return self.place(batch) if place else batch

  def place(self, batch, axis: int = 0):
    """A host batch of device blocks (on ``axis``) split over the mesh; unchanged without one."""
    return batch if self.mesh is None else shard_blocks(self.mesh, batch, axis=axis)


def _nce_i_epoch(t: _Trainer, indices: np.ndarray, teacher: Encoder | None = None) -> float:
  """NCE-I over ``indices`` with Adam; with a frozen ``teacher`` the distillation term is added."""
  if teacher is None:
    step, frozen, extra = t.adam_step("nce-i"), None, 0.0
  else:
    step, frozen, extra = t.adam_step("distill", teacher=teacher), (teacher.params, teacher.stats), t.cfg.distill_weight
  for index in shuffled_batches(len(indices), t.cfg.batch_size, t.rng):
    t.run(step, (t.views(indices[index]), np.float32(extra), frozen))
  return t.epoch_loss()


class _Incremental:
  """The cycling negative iterators and the batch builders of the NCE-II based methods."""

  def __init__(self, t: _Trainer, ctx: Context):
    b = ctx.cfg.batch_size
    self.old_num = old_negative_count(ctx.alpha, b)
    self.new_num = b - 1 - self.old_num
    self.new_cycle = Cycle(ctx.new, b - 1, t.rng)  # B − 1 new negatives per old anchor
    self.old_cycle = Cycle(ctx.old, self.old_num, t.rng)  # old_num old negatives per new anchor
    self.support_cycle = Cycle(ctx.old, b, t.rng)
    old_batches, new_batches = math.ceil(len(ctx.old) / b), math.ceil(len(ctx.new) / b)
    self.n_inner = inner_step_count(
      ctx.alpha, rule=ctx.cfg.inner_rule, old_batches=old_batches, new_batches=new_batches
    )

  def support_views(self, t: _Trainer, index, place: bool = True):
    """An NCE-II batch: old anchors with B − 1 new negatives each."""
    return t.views(index, self.new_cycle.next(), t.cfg.batch_size - 1, place)

  def query_views(self, t: _Trainer, index, place: bool = True):
    """A mixed NCE-I batch: new anchors with old_num old negatives each."""
    return t.views(index, self.old_cycle.next(), self.old_num, place)


def _two_phase_epoch(t: _Trainer, inc: _Incremental, learned: bool) -> float:
  """All old batches (NCE-II) then all new batches (mixed NCE-I): Adam, or SGD with the agents' rates."""
  c = t.cfg
  alpha = np.float32(t.ctx.alpha)
  for which, (indices, views, kind, extra) in enumerate(
    ((t.ctx.old, inc.support_views, "nce-ii", None), (t.ctx.new, inc.query_views, "mixed", inc.new_num))
  ):
    if learned:
      step = agent_step(t.enc.train_def, kind, c.temperature, agent_config(c), which, extra, t.mesh)
    else:
      step = t.adam_step(kind, extra)
    for index in shuffled_batches(len(indices), c.batch_size, t.rng):
      batch = views(t, indices[index])
      t.run(step, (batch, alpha) if learned else (batch, alpha, None))
  return t.epoch_loss()


def _meta_epoch(t: _Trainer, inc: _Incremental, learned: bool) -> float:
  """Per query batch one fused :func:`experiments.icl.steps.meta_step`: n_inner support SGD steps from θ (the
  agent's rates or lr_s), the query gradient at θ' and the outer step on θ."""
  c = t.cfg
  rule = MetaRule(
    agent_config(c) if learned else None,
    c.inner_learning_rate,
    "sgd" if learned else c.meta_outer,
    c.outer_learning_rate,
    c.learning_rate,
    c.weight_decay,
    unroll=t.ctx.data.kind == "images",
  )
  step = meta_step(t.enc.train_def, c.temperature, inc.new_num, rule, t.mesh)
  alpha = np.float32(t.ctx.alpha)
  for index in shuffled_batches(len(t.ctx.new), c.batch_size, t.rng):
    supports = [inc.support_views(t, inc.support_cycle.next(), place=False) for _ in range(inc.n_inner)]
    *supports, query = common_budget(supports + [inc.query_views(t, t.ctx.new[index], place=False)])
    t.run(step, (t.place(stack_batches(supports), axis=1), t.place(query), alpha))
  return t.epoch_loss()


def train_method(
  method: str,
  ctx: Context,
  pretrained: Encoder,
  fresh: Encoder,
  initial_loss: float,
  key: jax.Array,
  seed: int,
  log=None,
  probe=None,
  heldout=None,
) -> Run:
  """Trains one method to convergence (see the module docstring); ``probe(encoder) -> accuracy`` and
  ``heldout(encoder) -> loss`` (:func:`experiments.icl.evaluate.heldout_loss`) score it after every epoch."""
  if method not in METHODS:
    raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
  cfg = ctx.cfg
  agent = agent_config(cfg) if method in ("lrl", "icl") else None
  t = _Trainer(ctx, fresh if method == "retrain" else pretrained, key, seed, agent, initial_loss)
  inc = _Incremental(t, ctx) if method in ("nce2-only", "meta", "lrl", "icl") else None
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

  return converge(t, epoch, rule_of(cfg), cfg.max_epochs, method, log, probe, heldout)


def rule_of(cfg: Config) -> Rule:
  return Rule(cfg.convergence, cfg.patience, cfg.min_epochs, cfg.smoothing)


def converge(t: _Trainer, epoch, rule: Rule, max_epochs: int, name: str, log=None, probe=None, heldout=None) -> Run:
  """Runs ``epoch()`` until ``rule`` says converged (see :mod:`experiments.icl.convergence`) or ``max_epochs``;
  keeps the parameters of the best epoch. ``probe(encoder) -> accuracy`` and ``heldout(encoder) -> loss`` score the
  encoder after every epoch with a finite loss, outside the timed loop. The whole loss curve is then judged by
  :func:`~experiments.icl.convergence.curve_status` (``improved``, ``did not improve`` or ``diverged``, against its
  own noise)."""
  tracker = Tracker(rule)
  best_epoch, best_state, elapsed, at_best = -1, None, 0.0, 0.0
  losses, stopped, seconds, quality, held = [], "max-epochs", [], [], []
  for e in range(max_epochs):
    compiled_before = t.timer.compile_seconds
    start = time.perf_counter()
    loss = epoch()
    elapsed += time.perf_counter() - start - (t.timer.compile_seconds - compiled_before)
    losses.append(loss)
    seconds.append(elapsed)
    extra = {}
    if (probe is not None or heldout is not None) and np.isfinite(loss):
      now = t.enc._replace(params=to_host(t.params), stats=to_host(t.stats))
      if probe is not None:
        quality.append(probe(now))
        extra["probe_accuracy"] = quality[-1]
      if heldout is not None:
        held.append(heldout(now))
        extra["heldout_loss"] = held[-1]
    if log is not None:
      log(method=name, epoch=e + 1, loss=loss, train_seconds=elapsed, **extra)
    if not np.isfinite(loss):
      stopped = "non-finite loss"
      break
    improved, stop = tracker.update(loss)
    if improved:
      best_epoch, at_best = e, elapsed
      best_state = (to_host(t.params), to_host(t.stats))
    if stop:
      stopped = "patience"
      break
  if best_state is None:
    raise FloatingPointError(f"{name}: the first epoch's loss is not finite ({losses[0]}); lower the learning rate")
  finite = [x for x in losses if np.isfinite(x)]
  curve = "non-finite" if stopped == "non-finite loss" else curve_status(finite, rule.smoothing, rule.patience)
  return Run(
    t.enc._replace(params=best_state[0], stats=best_state[1]),
    best_epoch + 1,
    at_best,
    t.timer.compile_seconds,
    losses,
    stopped,
    seconds,
    quality if probe is not None else None,
    curve,
    held if heldout is not None else None,
  )


def pretrain(ctx: Context, fresh: Encoder, key: jax.Array, seed: int, log=None) -> tuple[Run, float]:
  """NCE-I on the old data X; returns the run and the last mini-batch loss (the agents' first observation)."""
  t = _Trainer(ctx, fresh, key, seed)
  last = []
  step = t.adam_step("nce-i")

  def epoch():
    for index in shuffled_batches(len(ctx.old), t.cfg.batch_size, t.rng):
      t.run(step, (t.views(ctx.old[index]), np.float32(0.0), None))
    last.append(t.pending[-1])
    return t.epoch_loss()

  run = converge(t, epoch, rule_of(ctx.cfg), ctx.cfg.max_epochs, "pretrain", log)
  return run, float(last[-1])
