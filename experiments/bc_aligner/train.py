r"""Training of the embedding models M_k (BPR, optionally with BC-Aligner's alignment loss) and of post-hoc B_k.

Joint objective of version k (section 3.2 of the paper, in the reference code's normalisation):

.. math::
  L = \frac1B \sum_b \mathrm{softplus}(z_u \cdot z_{n} - z_u \cdot z_{p})
      + 0.01 \cdot \frac{1}{2B}(\lVert Z_u\rVert_F^2 + \lVert Z_p\rVert_F^2 + \lVert Z_n\rVert_F^2)
      + \lambda \sum_{g \in \{u, p, n\}} L_{\rm align}(g),

where every step runs the full-graph forward (BatchNorm over all nodes) and gathers the batch's rows.
:math:`L_{\rm align}` is the per-coordinate single-step loss (eq. 7), the multi-step loss (eq. 10) over the frozen
:math:`W_1..W_{k-1}`, or, without a transformation, the MSE between :math:`z_{k-1}` and the first
:math:`d_{k-1}` coordinates of :math:`z_k`. Checkpoints are chosen by the strictly highest val Recall@50.
"""

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from bcjax._device import device_array
from bcjax._reduce import row_mean
from bcjax.alignment import BackwardTransform, PosthocFit, fit_posthoc, init_backward
from bcjax.metrics import evaluate_retrieval
from bcjax.models import BipartiteInputs, BipartiteSAGE
from bcjax.parallel import DATA_AXIS, replicate, split_rows
from experiments.bc_aligner.configs import INTENDED_K, KS, Config
from experiments.bc_aligner.data import Batch, BPRSampler, VersionData
from experiments.bc_methods import POSTHOC_LOSS, alignment_loss
from experiments.common import adam, restore_module_state, split_train_eval, state_tree, to_host
from experiments.harness import Checkpoint
from experiments.train_step import fresh_state, make_train_step, optax_descent


class Model(NamedTuple):
  """A model split for pure functions: graph definitions for training and evaluation mode plus its state."""

  train_def: nnx.GraphDef
  eval_def: nnx.GraphDef
  params: nnx.State
  batch_stats: nnx.State
  dim: int


def new_model(attribute_sizes: tuple[int, ...], layers: int, dim: int, key: jax.Array) -> Model:
  """A freshly initialised model: its parameters drawn in one compiled program (eagerly, each parameter's draw was a
  few small compiled programs of its own)."""
  params, stats = _initial_state(BipartiteSAGE, tuple(attribute_sizes), layers, dim, key)
  return model_like(attribute_sizes, layers, dim)._replace(params=params, batch_stats=stats)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _initial_state(module: type, attribute_sizes: tuple[int, ...], layers: int, dim: int, key: jax.Array):
  model = module(attribute_sizes, dim, layers, rngs=nnx.Rngs(params=key))
  _, params, stats = nnx.split(model, nnx.Param, nnx.BatchStat)
  return params, stats


def model_like(attribute_sizes: tuple[int, ...], layers: int, dim: int) -> Model:
  """The :class:`Model` that :func:`new_model` builds, abstractly (shapes only, nothing initialised): the graph
  definitions a checkpointed model's state is restored into. Its states are fresh containers on every call (a
  restore fills them in place); the module is traced once per architecture."""
  model = _abstract_model(BipartiteSAGE, tuple(attribute_sizes), layers, dim)
  fresh = lambda state: jax.tree.map(lambda leaf: leaf, state)
  return model._replace(params=fresh(model.params), batch_stats=fresh(model.batch_stats))


@functools.cache
def _abstract_model(module: type, attribute_sizes: tuple[int, ...], layers: int, dim: int) -> Model:
  model = nnx.eval_shape(lambda: module(attribute_sizes, dim, layers, rngs=nnx.Rngs(params=0)))
  return Model(*split_train_eval(model), dim)


class AlignTarget(NamedTuple):
  """Fixed alignment data of version k: :math:`z_{k-1}` on the version-k graph [N, d_(k-1)] and the frozen
  :math:`W_1, \\dots, W_{k-1}`."""

  z_prev: jax.Array
  history: tuple[jax.Array, ...]


class StepInputs(NamedTuple):
  graph: BipartiteInputs
  batch: Batch
  target: AlignTarget | None
  lr_scale: jax.Array | float = 1.0  # this epoch's learning rate over cfg.learning_rate (a traced scalar)


def lr_schedule(schedule: str, epochs: int) -> optax.Schedule:
  r"""The factor on the learning rate as an optax schedule of the 0-based epoch: ``constant`` (the reference) or
  ``cosine``, :math:`\tfrac12(1 + \cos(\pi e / E))` for e = 0..E-1 (:func:`optax.cosine_decay_schedule`), from 1
  in the first epoch down towards 0 in the last, so a short schedule ends in a settled model instead of wherever a
  large constant step leaves it."""
  if schedule == "constant":
    return optax.constant_schedule(1.0)
  if schedule == "cosine":
    return optax.cosine_decay_schedule(1.0, epochs)
  raise ValueError(f"lr_scale: `schedule` must be 'constant' or 'cosine', got {schedule!r}")


def lr_scale(schedule: str, epoch: int, epochs: int) -> float:
  """:func:`lr_schedule`'s factor in ``epoch`` (1-based) of ``epochs``, evaluated in float64 and rounded once to
  the train step's float32, as the hand-written factor it replaced was: the same updates bit for bit."""
  with jax.enable_x64(True):
    return float(lr_schedule(schedule, epochs)(epoch - 1))


@functools.cache
def bc_train_step(
  train_def: nnx.GraphDef,
  kind: str | None,
  learning_rate: float,
  weight_decay: float,
  lam: float,
  mesh: jax.sharding.Mesh | None = None,
  transform: BackwardTransform | None = None,
) -> Callable:
  """Returns the jitted ``train_step(state, inputs: StepInputs, rng) -> (state, metrics)``
  (:func:`experiments.train_step.make_train_step`; ``state`` is donated, its ``extra`` the BatchNorm statistics, and
  Adam's update is scaled by ``inputs.lr_scale``). ``kind`` None trains BPR only (no alignment target).
  ``transform``: the kind of B_k (None: the linear W_k).

  With ``mesh`` the batch's rows (users, positives, negatives, mask) are split over the mesh inside
  ``jax.shard_map`` and the BPR, regulariser and alignment means are global (``axis_name``). The full-graph
  forward stays whole on every device, so BatchNorm's statistics are those of all nodes, as on one device; what the
  devices split is the batch's gathers, losses and their gradients.
  """
  optimizer = adam(learning_rate)
  axis = None if mesh is None else DATA_AXIS

  def loss_fn(params, batch_stats, inputs: StepInputs):
    model = nnx.merge(train_def, params["model"], batch_stats, copy=True)
    h = model(inputs.graph)
    new_stats = nnx.state(model, nnx.BatchStat)
    b = inputs.batch
    z_u, z_p, z_n = h[b.user], h[b.pos], h[b.neg]
    bpr = row_mean(jax.nn.softplus(jnp.sum(z_u * z_n, -1) - jnp.sum(z_u * z_p, -1)), b.mask, axis)
    reg = 0.5 * row_mean(jnp.sum(z_u * z_u + z_p * z_p + z_n * z_n, -1), b.mask, axis)
    loss = bpr + weight_decay * reg
    metrics = {"bpr": bpr}
    if kind is not None:
      target = inputs.target
      history = jax.lax.stop_gradient(tuple(target.history))
      align = sum(
        alignment_loss(
          kind,
          h[rows],
          target.z_prev[rows],
          params.get("w"),
          history,
          per_dim=True,
          where=b.mask,
          axis_name=axis,
          transform=transform,
        )
        for rows in (b.user, b.pos, b.neg)
      )
      loss = loss + lam * align
      metrics["align"] = align
    metrics["loss"] = loss
    return loss, (new_stats, metrics)

  # everything replicated but the batch rows
  batch_spec = Batch(*(jax.P(DATA_AXIS),) * len(Batch._fields))
  return make_train_step(
    jax.grad(loss_fn, has_aux=True),
    optax_descent(optimizer, scale=lambda inputs: inputs.lr_scale),
    mesh=mesh,
    input_specs=StepInputs(jax.P(), batch_spec, jax.P(), jax.P()),
  )


@functools.partial(jax.jit, static_argnums=(0,))
def embed(eval_def: nnx.GraphDef, params, batch_stats, inputs: BipartiteInputs) -> jax.Array:
  """Eval-mode (running BatchNorm statistics) node embeddings [N, d]."""
  return nnx.merge(eval_def, params, batch_stats)(inputs)


def _val_retrieval(z, vd: VersionData, ks: tuple[int, ...], per_query: bool = False) -> dict:
  """The reference's RecallEvaluator: users with a val edge rank all items up to t_(k+1) except their train items;
  the denominator counts their distinct val items."""
  s = vd.split
  # the real nodes' rows (the inputs are padded), split into users and items on the host: no compiled slice per shape
  z = np.asarray(z)[: vd.num_nodes]
  return evaluate_retrieval(
    z[: s.num_users],
    z[s.num_users :],
    (s.val_user, s.val_item),
    exclude=(s.train_user, s.train_item),
    ks=ks,
    rank_excluded_relevant=False,
    per_query=per_query,
  )


def recall(z: jax.Array, vd: VersionData, ks: Sequence[int] = KS) -> dict[str, float]:
  """Exact val Recall@K for each K of ``ks`` and the intended metric's K (:func:`_val_retrieval`), ascending."""
  cutoffs = tuple(sorted({*ks, INTENDED_K}))
  res = _val_retrieval(z, vd, cutoffs)
  return {f"recall@{k}": res[f"recall@{k}"] for k in cutoffs}


def user_recall50(z: np.ndarray, vd: VersionData) -> tuple[np.ndarray, np.ndarray]:
  """(val users, ascending; each one's Recall@50) under :func:`recall`'s rules: the per-user values whose mean is
  the version's val Recall@50, for paired comparisons of two methods on the same val users."""
  res = _val_retrieval(z, vd, (INTENDED_K,), per_query=True)
  return res["query_ids"], res["per_query"][f"recall@{INTENDED_K}"]


class Trained(NamedTuple):
  model: Model  # host copy of the selected checkpoint
  w: np.ndarray | dict | None  # W_k (with a transform: its parameters) from the same epoch
  recall: dict[str, float]
  epoch: int
  z: np.ndarray  # eval-mode embeddings of the selected checkpoint on the version's graph [N, d]


def trained_checkpoint(like: Callable[[], Model]) -> Checkpoint:
  """How a :class:`Trained` stage is checkpointed: the model's parameters and batch statistics, W_k, the recalls, the
  epoch and z, with the graph definitions rebuilt on restore by ``like`` (:func:`model_like` from the run's
  config)."""

  def save(trained: Trained) -> dict:
    tree = {
      "params": state_tree(trained.model.params),
      "batch_stats": state_tree(trained.model.batch_stats),
      "recall": dict(trained.recall),
      "epoch": trained.epoch,
      "z": np.asarray(trained.z),
    }
    if trained.w is not None:
      tree["w"] = to_host(trained.w)
    return tree

  def restore(tree: dict) -> Trained:
    model = like()
    params = restore_module_state(model.params, tree["params"], "the model's parameters")
    stats = restore_module_state(model.batch_stats, tree.get("batch_stats", {}), "the model's batch statistics")
    return Trained(
      model._replace(params=params, batch_stats=stats),
      tree.get("w"),
      {name: float(v) for name, v in tree["recall"].items()},
      int(tree["epoch"]),
      np.asarray(tree["z"]),
    )

  return Checkpoint(save, restore)


# A post-hoc fit's stage, (B_k's parameters, its single-step error), holds nothing but arrays and a number.
POSTHOC_CHECKPOINT = Checkpoint(
  lambda fit: {"w": to_host(fit[0]), "single_step_error": float(fit[1])},
  lambda tree: (tree["w"], float(tree["single_step_error"])),
)


def train_model(
  vd: VersionData,
  model: Model,
  cfg: Config,
  key: jax.Array,
  *,
  epochs: int,
  select_after: int,
  kind: str | None = None,
  target: AlignTarget | None = None,
  log: Callable | None = None,
  progress=None,
  mesh: jax.sharding.Mesh | None = None,
  transform: BackwardTransform | None = None,
) -> Trained:
  """Trains ``model`` (fresh Adam at ``cfg.learning_rate`` times ``lr_scale(cfg.lr_schedule, epoch, epochs)``) for
  ``epochs`` and keeps the checkpoint with the strictly highest val Recall@50 among the evaluations at epochs >
  ``select_after`` (all of them when there are none such)."""
  if (kind is None) != (target is None):
    raise ValueError("train_model: `kind` and `target` go together")
  key, w_key, np_key = jax.random.split(key, 3)
  if target is not None:
    # z_(k-1) padded to the inputs' rows (only real rows are gathered), and the history only where the loss reads
    # it: versions of one shape then share the compiled step
    rows = int(vd.inputs.is_user.shape[0])
    z_prev = np.asarray(target.z_prev)
    z_prev = np.concatenate([z_prev, np.zeros((rows - len(z_prev), z_prev.shape[1]), z_prev.dtype)])
    target = AlignTarget(device_array(z_prev), tuple(target.history) if kind == "linear-mloss" else ())
    if kind == "linear-mloss" and not target.history:
      kind = "linear-sloss"  # at k = 1 the multi-step loss is the single-step loss (eq. 10 has its first term only)
  params = {"model": model.params}
  if kind is not None and kind != "notrans":
    params["w"] = init_map(transform, w_key, target.z_prev.shape[1], model.dim)
  state = fresh_state(adam(cfg.learning_rate), params, model.batch_stats)
  if mesh is not None:  # placed as the step's outputs are, so the step compiles once, not again after its first call
    state = replicate(mesh, state)
  step = bc_train_step(
    model.train_def,
    kind,
    cfg.learning_rate,
    cfg.weight_decay,
    cfg.lam,
    mesh,
    None if kind in (None, "notrans") else transform,
  )
  sampler = BPRSampler(vd.split, cfg.batch_size)
  rng = np.random.default_rng(np.asarray(jax.random.key_data(np_key)).ravel())
  best, best_score = None, -1.0
  eval_epochs = {e for e in range(cfg.eval_every, epochs + 1, cfg.eval_every)} | {epochs}
  if not any(e > select_after for e in eval_epochs):
    select_after = 0
  for epoch in range(1, epochs + 1):
    scale = jnp.asarray(lr_scale(cfg.lr_schedule, epoch, epochs), jnp.float32)
    for batch in sampler.epoch(rng):
      key, sub = jax.random.split(key)
      state, metrics = step(state, StepInputs(vd.inputs, batch, target, scale), sub)
    if progress is not None:
      progress.update(1)
    if epoch in eval_epochs:
      z = embed(model.eval_def, state.params["model"], state.extra, vd.inputs)
      rec = recall(z, vd, cfg.ks)
      if log is not None:
        log(epoch=epoch, **{k: float(v) for k, v in metrics.items()}, **rec)
      if epoch > select_after and rec[f"recall@{INTENDED_K}"] > best_score:
        best_score = rec[f"recall@{INTENDED_K}"]
        best = Trained(
          model._replace(params=to_host(state.params["model"]), batch_stats=to_host(state.extra)),
          None if "w" not in state.params else to_host(state.params["w"]),
          rec,
          epoch,
          np.asarray(z)[: vd.num_nodes],
        )
  return best


def apply_model(model: Model, vd: VersionData) -> np.ndarray:
  """Eval-mode embeddings of the version's real nodes [N, d] (the padding rows of its inputs dropped)."""
  return np.asarray(embed(model.eval_def, model.params, model.batch_stats, vd.inputs))[: vd.num_nodes]


def init_map(transform: BackwardTransform | None, key: jax.Array, d_prev: int, d_new: int):
  """A fresh B_k: the linear W_k (:func:`bcjax.init_backward`) or ``transform``'s initial parameters."""
  return init_backward(key, d_prev, d_new) if transform is None else transform.init(key, d_prev, d_new)


@functools.partial(jax.jit, static_argnames=("num_users", "transform"))
def single_step_error(
  z_new: jax.Array, z_prev: jax.Array, w, num_users: int, transform: BackwardTransform | None = None
) -> jax.Array:
  """The post-hoc selection criterion: ½(MSE over all users + MSE over all items) of :math:`B_k(z_k) - z_{k-1}`."""
  sq = ((z_new @ w.T if transform is None else transform.apply(w, z_new)) - z_prev) ** 2
  return 0.5 * (jnp.mean(sq[:num_users]) + jnp.mean(sq[num_users:]))


class NodeWeights(NamedTuple):
  """A batch's rows folded into distinct nodes: ``node`` [R] with multiplicity ``count`` [R] (0 on padding), host
  arrays (an epoch's batches are stacked on the host and sent to the device at once)."""

  node: jax.Array
  count: jax.Array


def fold_batch(batch: Batch, num_nodes: int, multiple: int = 1) -> NodeWeights:
  """The post-hoc loss only reads fixed embeddings, so a node drawn c times in a batch is one row of weight c.

  ``R = min(num_nodes, 3B)``, rounded up to a multiple of ``multiple`` (the devices that split the rows), keeps the
  shape fixed: every node when the graph is small (fewer rows than the batch's 3B), otherwise the batch's distinct
  nodes; padded with count 0.
  """
  mask = np.asarray(batch.mask)
  rows = np.concatenate([np.asarray(r)[mask] for r in (batch.user, batch.pos, batch.neg)])
  size = min(num_nodes, 3 * len(mask))
  if size == num_nodes:
    node, count = np.arange(num_nodes), np.bincount(rows, minlength=num_nodes)
  else:
    node, count = np.unique(rows, return_counts=True)
  pad = size + (-size % multiple) - len(node)
  return NodeWeights(
    np.concatenate([node, np.zeros(pad, node.dtype)]).astype(np.int32),
    np.concatenate([count, np.zeros(pad, count.dtype)]).astype(np.float32),
  )


@functools.partial(jax.jit, static_argnums=(0,))
def _fresh_fit(optimizer: optax.GradientTransformation, w0) -> PosthocFit:
  """The post-hoc fit's start, ``w0`` and the optimiser's initial state, in one compiled program."""
  return PosthocFit(w0, None, optimizer.init(w0))


@functools.cache
def _sharded_posthoc(
  mesh: jax.sharding.Mesh, loss: str, optimizer: optax.GradientTransformation, transform: BackwardTransform | None
) -> Callable:
  """``fit(z_new, z_prev, history, batches, init) -> PosthocFit`` with every step's rows split over the mesh."""

  def fit(z_new, z_prev, history, batches, init):
    return fit_posthoc(
      z_new,
      z_prev,
      history,
      loss=loss,
      per_dim=True,
      optimizer=optimizer,
      batches=batches,
      init=init,
      axis_name=DATA_AXIS,
      transform=transform,
      history_transforms=transform,
    )

  columns = jax.P(None, DATA_AXIS)
  return jax.jit(
    jax.shard_map(fit, mesh=mesh, in_specs=(jax.P(), jax.P(), jax.P(), (columns, columns), jax.P()), out_specs=jax.P())
  )


def train_posthoc(
  vd: VersionData,
  z_new: np.ndarray,
  target: AlignTarget,
  kind: str,
  cfg: Config,
  key: jax.Array,
  log: Callable | None = None,
  mesh: jax.sharding.Mesh | None = None,
  transform: BackwardTransform | None = None,
) -> tuple[np.ndarray | dict, float]:
  """Fits B_k alone with :func:`bcjax.fit_posthoc` on the reference's batches (``posthoc_epochs`` epochs of the
  BPR sampler's user, positive and negative rows, folded into distinct nodes with counts; no λ) and keeps the W_k
  with the lowest full-node single-step error among evaluations at epochs > ``select_after``. With ``mesh`` each
  step's folded rows are split over its devices."""
  w_key, np_key = jax.random.split(key)
  z_new = device_array(z_new)
  optimizer = adam(cfg.learning_rate)
  fit = _fresh_fit(optimizer, init_map(transform, w_key, target.z_prev.shape[1], z_new.shape[1]))
  if mesh is not None:  # as the fit leaves the mesh, so the fit compiles once
    fit = replicate(mesh, fit)
  loss = POSTHOC_LOSS[kind]
  sampler = BPRSampler(vd.split, cfg.batch_size)
  rng = np.random.default_rng(np.asarray(jax.random.key_data(np_key)).ravel())
  eval_epochs = {e for e in range(cfg.eval_every, cfg.posthoc_epochs + 1, cfg.eval_every)} | {cfg.posthoc_epochs}
  select_after = cfg.select_after if any(e > cfg.select_after for e in eval_epochs) else 0
  best, best_err = None, np.inf
  for epoch in range(1, cfg.posthoc_epochs + 1):
    folds = [fold_batch(batch, len(z_new), 1 if mesh is None else mesh.devices.size) for batch in sampler.epoch(rng)]
    batches = (device_array(np.stack([f.node for f in folds])), device_array(np.stack([f.count for f in folds])))
    start = fit._replace(losses=None)  # the fit reads only w and the optimiser state: one pytree, one compile
    if mesh is None:
      fit = fit_posthoc(
        z_new,
        target.z_prev,
        target.history,
        loss=loss,
        per_dim=True,
        optimizer=optimizer,
        batches=batches,
        init=start,
        transform=transform,
        history_transforms=transform,
      )
    else:
      batches = split_rows(mesh, batches, axis=1)
      fit = _sharded_posthoc(mesh, loss, optimizer, transform)(
        z_new, target.z_prev, tuple(target.history), batches, start
      )
    if epoch in eval_epochs:
      err = float(single_step_error(z_new, target.z_prev, fit.w, vd.split.num_users, transform))
      if log is not None:
        log(epoch=epoch, align=float(np.asarray(fit.losses)[-1]), single_step_error=err)
      if epoch > select_after and err < best_err:
        best, best_err = to_host(fit.w), err
  return best, best_err
