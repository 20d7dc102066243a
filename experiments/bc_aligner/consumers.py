"""Version-0 consumer models C_0 of the five unintended tasks, trained once on Fix-M0's embeddings and scored on
every method's published version-0-space embeddings (the reference's ``train_model.py`` / ``eval_model.py``).

Consumer MLP (the reference's ``recsys/models/mlp.py``, quirk kept: no ReLU after the second BatchNorm):
Linear(in, h) → BN → ReLU → Dropout → Linear(h, h) → BN → Dropout → Linear(h, 1), a logit trained with
binary cross-entropy, Adam 1e-3, batch 2048; the early-stop set's ROC-AUC is computed every epoch and the state with
the strictly highest AUC kept. Protocol: grid over hidden × dropout with seed 0, then the best configuration
retrained with seeds 0..S-1. Edge and item tasks fit on step 0 and early-stop on step 0's evaluation set (reported
on steps 1-4); the activity tasks early-stop on step 1 (reported on steps 2-4).
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from bcjax._buckets import pad_to_bucket
from bcjax._device import device_array
from bcjax.data import TASKS, TaskExamples, VersionSplit, item_rating_threshold, task_examples
from bcjax.metrics import negative_flip_rate, roc_auc, roc_auc_interval
from bcjax.models import torch_linear_init
from experiments.bc_aligner.configs import Config
from experiments.common import adam, split_train_eval, to_host
from experiments.train_step import TrainState, donating_jit, fresh_state, make_train_step, optax_descent

FIT_STEP = {t: 0 for t in TASKS}
STOP_STEP = {**{t: 0 for t in TASKS}, "user-activity": 1, "user-positive-activity": 1}


def reported_steps(task: str, num_versions: int) -> list[int]:
  return list(range(STOP_STEP[task] + 1, num_versions))


class ConsumerMLP(nnx.Module):
  """The reference's 2-layer consumer; ``__call__(x, mask, key)`` applies dropout when ``key`` is given."""

  def __init__(self, in_dim: int, hidden: int, dropout: float, *, rngs: nnx.Rngs):
    def linear(a, b):
      return nnx.Linear(a, b, kernel_init=torch_linear_init(a), bias_init=torch_linear_init(a), rngs=rngs)

    self.dropout = dropout
    self.l1, self.l2, self.l3 = linear(in_dim, hidden), linear(hidden, hidden), linear(hidden, 1)
    self.bn1 = nnx.BatchNorm(hidden, momentum=0.9, epsilon=1e-5, rngs=rngs)
    self.bn2 = nnx.BatchNorm(hidden, momentum=0.9, epsilon=1e-5, rngs=rngs)

  def _drop(self, h, key):
    if key is None or self.dropout == 0.0:
      return h
    keep = jax.random.bernoulli(key, 1.0 - self.dropout, h.shape)
    return jnp.where(keep, h / (1.0 - self.dropout), 0.0)

  def _before_norm(self, layer: nnx.Linear, norm: nnx.BatchNorm, x):
    """``layer(x)`` feeding ``norm``. In training mode BatchNorm subtracts the batch mean, so the bias's exact
    gradient is zero; the computed one is rounding noise that Adam would turn into full-size steps, and the bias
    would drift with the summation order (another CPU, another device count). It is held at its value, as exact
    arithmetic holds it (the same rule as :class:`bcjax.models.BipartiteSAGE`'s)."""
    bias = layer.bias[...]
    if not norm.use_running_average:
      bias = jax.lax.stop_gradient(bias)
    return x @ layer.kernel[...] + bias

  def __call__(self, x, mask=None, key=None):
    k1, k2 = (None, None) if key is None else jax.random.split(key)
    m = None if mask is None else mask[:, None]
    h = self._drop(jax.nn.relu(self.bn1(self._before_norm(self.l1, self.bn1, x), mask=m)), k1)
    h = self._drop(self.bn2(self._before_norm(self.l2, self.bn2, h), mask=m), k2)
    return self.l3(h)[:, 0]


def plan_tasks(splits: list[VersionSplit], std: str = "unbiased") -> tuple[float | None, dict[str, str]]:
  """Checks, before any training, that every set each consumer task uses (its fit set, its early-stop set and the
  evaluation set of every reported step) has examples of both classes: ROC-AUC is undefined otherwise. Returns
  ``(tau, left_out)``: the item-rating threshold (None when no item has 10 train edges at step 0) and
  ``{task: reason}`` for the tasks that cannot be run on this data."""
  left_out = {}
  try:
    tau = item_rating_threshold(splits[0])
  except ValueError as e:
    tau = None
    left_out["binary-item-rating-avg"] = f"no threshold tau: {e}"
  for task in TASKS:
    if task in left_out:
      continue
    sets = [
      (f"fit set (version {FIT_STEP[task]})", task_examples(task, splits[FIT_STEP[task]], fit=True, tau=tau, std=std)),
      (f"early-stop set (version {STOP_STEP[task]})", task_examples(task, splits[STOP_STEP[task]], tau=tau, std=std)),
    ]
    sets += [
      (f"evaluation set (version {s})", task_examples(task, splits[s], tau=tau, std=std))
      for s in reported_steps(task, len(splits))
    ]
    for what, examples in sets:
      positives = int(np.sum(examples.label))
      if len(examples.label) == 0:
        left_out[task] = f"its {what} has no examples"
      elif positives in (0, len(examples.label)):
        left_out[task] = (
          f"its {what} has one class only ({len(examples.label)} examples, {positives} positive): ROC-AUC is undefined"
        )
      if task in left_out:
        break
  return tau, left_out


def consumer_inputs(examples: TaskExamples, z: np.ndarray, num_users: int) -> np.ndarray:
  """Rows of the task's input: z_user, z_item or their concatenation (node layout users first)."""
  parts = []
  if examples.user is not None:
    parts.append(z[examples.user])
  if examples.item is not None:
    parts.append(z[num_users + examples.item])
  return np.concatenate(parts, axis=1).astype(np.float32)


@functools.cache
def _make_epoch(train_def: nnx.GraphDef, learning_rate: float):
  """(Adam, jitted ``epoch(state, x, y, rows [S, B], mask [S, B], key) -> state``): one pass of shuffled batches, a
  scan over the train step (:func:`experiments.train_step.make_train_step`, its ``extra`` the BatchNorm statistics).
  """
  optimizer = adam(learning_rate)

  def loss_fn(params, stats, batch):
    xb, yb, mb, key = batch
    model = nnx.merge(train_def, params, stats, copy=True)
    logits = model(xb, mb, key)
    w = mb.astype(logits.dtype)
    loss = jnp.sum(optax.sigmoid_binary_cross_entropy(logits, yb) * w) / jnp.maximum(jnp.sum(w), 1.0)
    return loss, (nnx.state(model, nnx.BatchStat), {"loss": loss})

  step = make_train_step(jax.grad(loss_fn, has_aux=True), optax_descent(optimizer), jit=False)

  @donating_jit
  def epoch(state: TrainState, x, y, rows, mask, key):
    def body(state, batch):
      idx, m, k = batch
      return step(state, (x[idx], y[idx], m, k), k)[0], None

    keys = jax.random.split(key, rows.shape[0])
    state, _ = jax.lax.scan(body, state, (rows, mask, keys))
    return state

  return optimizer, epoch


@functools.partial(jax.jit, static_argnums=(0,))
def _logits(eval_def, params, stats, x):
  return nnx.merge(eval_def, params, stats)(x)


class Consumer(NamedTuple):
  eval_def: nnx.GraphDef
  params: nnx.State
  stats: nnx.State
  stop_auc: float


def train_consumer(x_fit, y_fit, x_stop, y_stop, hidden: int, dropout: float, seed: int, cfg: Config) -> Consumer:
  """Trains one consumer; keeps the epoch with the strictly highest early-stop ROC-AUC."""
  model = ConsumerMLP(x_fit.shape[1], hidden, dropout, rngs=nnx.Rngs(params=seed))
  train_def, eval_def, params, stats = split_train_eval(model)
  optimizer, epoch = _make_epoch(train_def, cfg.learning_rate)
  state = fresh_state(optimizer, params, stats)
  # rows padded to a power of two: the epochs gather only real rows, and the compiles stay one per octave of sizes
  x, y = pad_to_bucket((x_fit, np.asarray(y_fit, np.float32)), (0.0, 0.0))
  y_stop = np.asarray(y_stop)
  n, b = len(y_fit), min(cfg.consumer_batch_size, len(y_fit))
  steps = -(-n // b)
  rng = np.random.default_rng(seed)
  key = jax.random.key(seed)
  best = None
  for _ in range(cfg.consumer_epochs):
    perm = np.concatenate([rng.permutation(n), np.zeros(steps * b - n, np.int64)])
    mask = np.arange(steps * b) < n
    key, sub = jax.random.split(key)
    state = epoch(state, x, y, device_array(perm.reshape(steps, b)), device_array(mask.reshape(steps, b)), sub)
    auc = float(roc_auc(_predict_padded(eval_def, state.params, state.extra, x_stop), y_stop))
    if best is None or auc > best.stop_auc:
      best = Consumer(eval_def, to_host(state.params), to_host(state.extra), auc)
  return best


def _predict_padded(eval_def, params, stats, x) -> np.ndarray:
  """Eval-mode logits [n] on the host, computed on rows padded to a power of two (each row's logit depends on that
  row alone in eval mode, so the padding changes nothing but the number of compiles: one per octave of evaluation
  sizes)."""
  n = np.shape(x)[0]
  (padded,) = pad_to_bucket((x,), (0.0,))
  return np.asarray(_logits(eval_def, params, stats, padded))[:n]


def predict(consumer: Consumer, x: np.ndarray) -> np.ndarray:
  """The consumer's eval-mode logits [n]."""
  return _predict_padded(consumer.eval_def, consumer.params, consumer.stats, x)


def score(consumer: Consumer, x: np.ndarray, y: np.ndarray) -> float:
  return float(roc_auc(predict(consumer, x), np.asarray(y)))


def flip_rate(consumer: Consumer, x_old: np.ndarray, x_new: np.ndarray, y: np.ndarray) -> float:
  """The negative-flip rate (:func:`bcjax.metrics.negative_flip_rate`) of the consumer's class predictions (logit >
  0) on the published embeddings ``x_new`` against those on the version-0 embeddings ``x_old`` of the same
  examples."""
  old, new = (np.asarray(predict(consumer, x)) > 0 for x in (x_old, x_new))
  return float(negative_flip_rate(np.asarray(y).astype(bool), old, new))


def unintended_aucs(
  splits: list[VersionSplit],
  reference: list[np.ndarray],
  published: dict[str, list[np.ndarray]],
  tau: float | None,
  cfg: Config,
  log: Callable[..., None],
  progress=None,
  tasks: tuple[str, ...] = TASKS,
  stage: Callable | None = None,
) -> dict:
  """Trains the consumers of ``tasks`` (those :func:`plan_tasks` kept) on ``reference`` (Fix-M0's embeddings per
  step) and scores every method; each task is one ``stage(name, compute)`` of the run when ``stage`` is given.

  Returns ``{task: {"config": {...}, "stop_auc": [...], "auc": {method: [[AUC per reported step] per seed]},
  "negative_flips": {method: [[rate per reported step] per seed]}}}``: a negative flip is an example the consumer
  classifies right on Fix-M0's (true version-0) embeddings and wrong on the method's published ones.
  """
  stage = stage or (lambda name, compute: compute())
  return {
    task: stage(
      f"consumers/{task}", lambda task=task: _task_aucs(task, splits, reference, published, tau, cfg, log, progress)
    )
    for task in tasks
  }


def _task_aucs(task: str, splits, reference, published, tau, cfg: Config, log, progress) -> dict:
  fit_s, stop_s = FIT_STEP[task], STOP_STEP[task]
  fit = task_examples(task, splits[fit_s], fit=True, tau=tau, std=cfg.item_std)
  stop = task_examples(task, splits[stop_s], tau=tau, std=cfg.item_std)
  x_fit = consumer_inputs(fit, reference[fit_s], splits[fit_s].num_users)
  x_stop = consumer_inputs(stop, reference[stop_s], splits[stop_s].num_users)
  grid = [(h, p) for h in cfg.consumer_hidden for p in cfg.consumer_dropout]
  tried = []
  for h, p in grid:
    tried.append(train_consumer(x_fit, fit.label, x_stop, stop.label, h, p, 0, cfg).stop_auc)
    log(task=task, hidden=h, dropout=p, grid_stop_auc=tried[-1])
    if progress is not None:
      progress.update(1)
  h, p = grid[int(np.argmax(tried))]
  consumers = []
  for seed in range(cfg.consumer_seeds):
    consumers.append(train_consumer(x_fit, fit.label, x_stop, stop.label, h, p, seed, cfg))
    if progress is not None:
      progress.update(1)
  steps = reported_steps(task, len(splits))
  evals = [task_examples(task, splits[s], tau=tau, std=cfg.item_std) for s in steps]
  aucs, flips = {}, {}
  x_ref = [consumer_inputs(ex, reference[s], splits[s].num_users) for ex, s in zip(evals, steps)]
  for method, embeddings in published.items():
    xs = [consumer_inputs(ex, embeddings[s], splits[s].num_users) for ex, s in zip(evals, steps)]
    aucs[method] = [[score(c, x, ex.label) for x, ex in zip(xs, evals)] for c in consumers]
    flips[method] = [[flip_rate(c, x0, x, ex.label) for x0, x, ex in zip(x_ref, xs, evals)] for c in consumers]
  chance = reference_check(consumers, x_ref, [ex.label for ex in evals])
  log(
    task=task,
    hidden=h,
    dropout=p,
    **chance,
    stop_auc=[c.stop_auc for c in consumers],
    mean_auc={m: float(np.mean(a)) for m, a in aucs.items()},
    mean_negative_flips={m: float(np.mean(f)) for m, f in flips.items()},
  )
  return {
    "config": {"hidden": h, "dropout": p},
    "steps": steps,
    "stop_auc": [c.stop_auc for c in consumers],
    **chance,
    "auc": aucs,
    "negative_flips": flips,
  }


def reference_check(consumers: list[Consumer], xs: list[np.ndarray], labels: list[np.ndarray]) -> dict:
  """Whether the task's version-0 consumers mean something on its evaluation sets, before any method is compared
  on them: the AUC of their seed-averaged logits on true version-0 embeddings, pooled over the reported steps, with
  DeLong's 95 % interval over the examples (:func:`bcjax.metrics.roc_auc_interval`), and the share of examples
  each seed's consumer classifies positive (0 or 1: it predicts one class, so a flip can only leave that class; the
  mean over seeds alone would hide one seed at 0 and another at 1)."""
  by_seed = [[np.asarray(predict(c, x)) for x in xs] for c in consumers]  # [seed][step] logits, predicted once
  logits = [np.mean(step, axis=0) for step in zip(*by_seed)]
  interval = roc_auc_interval(np.concatenate(logits), np.concatenate(labels).astype(bool))
  shares = [float(np.mean(np.concatenate(steps) > 0)) for steps in by_seed]
  return {
    "reference_auc": float(interval.auc),
    "reference_auc_ci95": [float(interval.low), float(interval.high)],
    "predicted_positive_share": float(np.mean(shares)),
    "predicted_positive_share_by_seed": shares,
  }


def above_chance(consumers: dict) -> tuple[dict, dict[str, str]]:
  """``(kept, at_chance)``: the consumer tasks whose version-0 consumers are clearly above chance (the lower end of
  their reference AUC's interval above 0.5), and ``{task: reason}`` for the others. Stages saved before the check
  existed carry no interval and are kept."""
  kept, at_chance = {}, {}
  for task, c in consumers.items():
    low, high = c.get("reference_auc_ci95", (1.0, 1.0))
    if low > 0.5:
      kept[task] = c
    else:
      at_chance[task] = (
        f"its version-0 consumers score AUC {c['reference_auc']:.3f} on true version-0 embeddings, 95 % interval "
        f"[{low:.3f}, {high:.3f}] over its evaluation examples: not clearly above chance (0.5)"
      )
  return kept, at_chance
