r"""Training and evaluation of the error-amplification experiment.

Versions k = 0..K share the same data points; the intended task drifts (``data.make_chain``). M_0 is trained once
and shared. For k >= 1 each method trains M_k (and B_k) on the intended loss plus 0.01 * L2 on the output
embeddings, with the alignment term of eq. (3) for the joint methods; post-hoc methods fit B_k on the Non-BC
models. Evaluation is inductive, on held-out points: the version-0 compatible embedding
:math:`\tilde z_0 = B_1 \circ \dots \circ B_k(z_k)` is read back from a keep-latest registry and compared with
the true :math:`z_0 = M_0(x)` (metric 3 of section 4).
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from tqdm.auto import tqdm

from bcjax._reduce import row_mean
from bcjax.alignment import BackwardLinear, BackwardMap, BackwardTransform, alignment_error, fit_posthoc, notrans
from bcjax.parallel import DATA_AXIS, replicate
from bcjax.versioning import Registry
from experiments import common
from experiments.bc_methods import JOINT, LINEAR, POSTHOC, POSTHOC_LOSS, alignment_loss, transform_name, transform_of
from experiments.error_amplification.configs import Config
from experiments.error_amplification.data import ChainData, make_chain
from experiments.error_amplification.model import Encoder, VersionModel
from experiments.harness import Checkpoint, Run
from experiments.train_step import fresh_state, make_train_step, optax_descent


def _objective(
  model: VersionModel,
  batch: dict,
  method: str,
  history: tuple,
  lam: float,
  l2: float,
  axis_name: str | None = None,
  transform: BackwardTransform | None = None,
):
  """Eq. (3): intended loss + L2 on embeddings + lambda * alignment (the last only for joint methods); with
  ``axis_name`` the batch is split over devices and every mean is global."""
  z, y_hat = model.encoder(batch["x"])
  task = row_mean(jnp.sum((y_hat - batch["y"]) ** 2, axis=-1), axis_name=axis_name)
  loss = task + l2 * row_mean(jnp.sum(z * z, axis=-1), axis_name=axis_name)
  align = jnp.zeros(())
  if method in JOINT:
    w = None if model.backward is None else _params(model.backward)
    align = alignment_loss(JOINT[method], z, batch["z_prev"], w, history, axis_name=axis_name, transform=transform)
  return loss + lam * align, {"task": task, "align": align}


def version_train_step(
  graphdef: nnx.GraphDef,
  optimizer: optax.GradientTransformation,
  method: str,
  history: tuple,
  lam: float,
  l2: float,
  mesh: jax.sharding.Mesh | None = None,
  transform: BackwardTransform | None = None,
) -> Callable:
  """Returns the jitted ``train_step(state, batch, rng) -> (state, metrics)`` of eq. (3)
  (:func:`experiments.train_step.make_train_step`, the state donated); with ``mesh`` the batch rows are split over
  its devices inside ``jax.shard_map`` (parameters replicated). ``transform`` is the kind of B_k (None: the linear
  W_k). The batches are drawn by the caller (the model is deterministic; ``rng`` is unused)."""
  axis = None if mesh is None else DATA_AXIS

  def loss_fn(params, extra, batch):
    loss, aux = _objective(nnx.merge(graphdef, params), batch, method, history, lam, l2, axis, transform)
    return loss, (extra, {"loss": loss, **aux})

  return make_train_step(
    jax.grad(loss_fn, has_aux=True), optax_descent(optimizer), mesh=mesh, input_specs=jax.P(DATA_AXIS)
  )


def version_model(
  cfg: Config, method: str, k: int, transform: BackwardTransform | None, rngs: nnx.Rngs
) -> VersionModel:
  """M_k of ``cfg`` with the B_k that ``method`` trains jointly (none for version 0, Non-BC and NoTrans)."""
  encoder = Encoder(cfg.in_dim, cfg.dims[k], cfg.out_dim, cfg.layers[k], rngs=rngs)
  backward = None
  if method in LINEAR and k:
    backward = (
      BackwardLinear(cfg.dims[k - 1], cfg.dims[k], rngs=rngs)
      if transform is None
      else BackwardMap(transform, cfg.dims[k - 1], cfg.dims[k], rngs=rngs)
    )
  return VersionModel(encoder, backward)


def version_checkpoint(cfg: Config, method: str, k: int, transform: BackwardTransform | None) -> Checkpoint:
  """How a trained version's stage, ``(graphdef, state)``, is checkpointed: the state's arrays only, the graph
  definition rebuilt on restore from ``cfg``, ``method``, ``k`` and ``transform`` with :func:`version_model`."""

  def restore(tree) -> tuple:
    graphdef, like = nnx.split(nnx.eval_shape(lambda: version_model(cfg, method, k, transform, nnx.Rngs(params=0))))
    return graphdef, common.restore_module_state(like, tree, f"{method} M_{k}")

  return Checkpoint(lambda stored: common.state_tree(stored[1]), restore)


# A post-hoc B_k's stage holds its parameters: an array, or a dict of them for a transformation.
POSTHOC_CHECKPOINT = Checkpoint(lambda w: {"w": w}, lambda tree: tree["w"])


def train_version(
  cfg: Config,
  method: str,
  k: int,
  data: ChainData,
  z_prev: jax.Array | None,
  history: tuple,
  log,
  bar,
  mesh: jax.sharding.Mesh | None = None,
  transform: BackwardTransform | None = None,
) -> VersionModel:
  """Trains M_k (and B_k, of ``transform``'s kind, for the joint methods with a transformation) for ``cfg.steps``
  steps."""
  # Every method gets the same initialisation and batch order at version k (common random numbers).
  key = jax.random.fold_in(jax.random.key(cfg.seed), k)
  init_key, batch_key, step_key = jax.random.split(key, 3)
  graphdef, params = nnx.split(version_model(cfg, method, k, transform, nnx.Rngs(params=init_key)))
  optimizer = common.adam(cfg.learning_rate)
  state = fresh_state(optimizer, params)
  if mesh is not None:  # placed as the step leaves it, so the step compiles once
    state = replicate(mesh, state)
  method_k = method if k else "non-bc"
  step_fn = version_train_step(graphdef, optimizer, method_k, history, cfg.lam, cfg.l2, mesh, transform)
  rows = common.endless_batches(batch_key, cfg.n_train, cfg.batch_size)
  for step in range(cfg.steps):
    idx = next(rows)
    batch = {"x": data.x_train[idx], "y": data.y_train[k][idx]}
    if z_prev is not None:
      batch["z_prev"] = z_prev[idx]
    state, metrics = step_fn(state, batch, jax.random.fold_in(step_key, step))
    bar.update(1)
    if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
      log(method=method, version=k, step=step + 1, **{m: float(v) for m, v in metrics.items()})
  return nnx.merge(graphdef, state.params)


def _stored(model: VersionModel):
  graphdef, state = nnx.split(model)
  return graphdef, common.to_host(state)


def _restored(stored) -> VersionModel:
  return nnx.merge(*stored)


def _evaluate(model: VersionModel, x: jax.Array, y: jax.Array) -> tuple[jax.Array, float]:
  z, y_hat = model.encoder(x)
  return z, float(jnp.mean(jnp.sum((y_hat - y) ** 2, axis=-1)))


def train_and_evaluate(cfg: Config, run: Run, mesh: jax.sharding.Mesh | None = None) -> dict:
  """Runs every method of ``cfg.methods`` over all versions, one stage per trained model and per post-hoc fit, and
  returns the results (per method and version: alignment error to version 0, single-step error, intended MSE and
  the composed map's spectral norm). The methods with a transformation learn a B_k of ``cfg.transform``; with
  ``cfg.transform_sweep`` they run again for every other kind listed (stages and registries under
  ``transform=<kind>/``), on the same M_0 and Non-BC models. With ``mesh`` the models' steps are data-parallel (the
  post-hoc fits, which draw their own rows, run on one device)."""
  if len(cfg.layers) != len(cfg.dims) or len(cfg.dims) < 2:
    raise ValueError(f"`dims` {cfg.dims} and `layers` {cfg.layers} must have the same length >= 2")
  num_versions = len(cfg.dims)
  data = make_chain(
    jax.random.fold_in(jax.random.key(cfg.seed), 10_000),
    num_versions=num_versions,
    n_train=cfg.n_train,
    n_test=cfg.n_test,
    in_dim=cfg.in_dim,
    out_dim=cfg.out_dim,
    drift=cfg.drift,
  )
  need_nonbc = any(m in POSTHOC or m == "non-bc" for m in cfg.methods)
  joint = [m for m in cfg.methods if m in JOINT]
  other_kinds = [kind for kind in cfg.transform_sweep if kind != cfg.transform]
  swept = [m for m in cfg.methods if m in LINEAR]
  models_trained = len(joint) + need_nonbc + len(other_kinds) * sum(m in JOINT for m in swept)
  with tqdm(
    total=cfg.steps * (1 + (num_versions - 1) * models_trained),
    desc="training",
    disable=not run.progress,
    unit="step",
    mininterval=1.0,
  ) as bar:
    chain = _Chain(cfg, data, run, bar, mesh)
    results = {m: chain.evaluate(m, _transform(cfg, cfg.transform), "") for m in cfg.methods}
    sweep = {
      kind: {m: chain.evaluate(m, _transform(cfg, kind), f"transform={kind}/") for m in swept} for kind in other_kinds
    }
  out = summarise(cfg, results, chain.mse0, sweep)
  if cfg.transform_sweep:
    kinds = {cfg.transform: results, **sweep}
    out["transform_sweep"] = {
      kind: {
        "transform": transform_name(kind, _hparams(_transform(cfg, kind))),
        "methods": {m: kinds[kind][m] for m in swept},
      }
      for kind in cfg.transform_sweep
    }
  out["transform"] = transform_name(cfg.transform, _hparams(_transform(cfg, cfg.transform)))
  return out


def _transform(cfg: Config, kind: str) -> BackwardTransform | None:
  return transform_of(kind, rank=cfg.transform_rank, hidden=cfg.transform_hidden)


def _hparams(transform: BackwardTransform | None) -> dict:
  return {} if transform is None else dict(transform.hparams)


def _params(backward):
  """B_k's parameters as the losses and the registry take them: W_k, or the kind's dict of arrays."""
  return backward.arrays() if isinstance(backward, BackwardMap) else backward.w[...]


class _Chain:
  """The versions of one run: M_0 and Non-BC's models trained once, each method's models and fits as stages."""

  def __init__(self, cfg: Config, data: ChainData, run: Run, bar, mesh):
    self.cfg, self.data, self.run, self.bar, self.mesh = cfg, data, run, bar, mesh
    self.num_versions = len(cfg.dims)
    self.models: dict[str, list[VersionModel]] = {}
    m0 = self._version("non-bc", 0, None, (), None, "")
    self.z0_train, _ = _evaluate(m0, data.x_train, data.y_train[0])
    self.z0_test, self.mse0 = _evaluate(m0, data.x_test, data.y_test[0])
    self.m0 = m0

  def _version(self, method, k, z_prev, history, transform, prefix) -> VersionModel:
    log = functools.partial(self.run.log, sweep=prefix.rstrip("/")) if prefix else self.run.log
    return _restored(
      self.run.stage(
        f"{prefix}{method}/v{k}",
        lambda: _stored(
          train_version(self.cfg, method, k, self.data, z_prev, history, log, self.bar, self.mesh, transform=transform)
        ),
        version_checkpoint(self.cfg, method, k, transform),
      )
    )

  def trained(self, method: str, transform, prefix: str) -> list[VersionModel]:
    """M_0 ... M_K of a trained method (Non-BC's are shared by every kind)."""
    if method == "non-bc":
      transform, prefix = None, ""
    name = prefix + method
    if name not in self.models:
      models = [self.m0]
      for k in range(1, self.num_versions):
        self.bar.set_description(f"{name} v{k}")
        z_prev, _ = _evaluate(models[k - 1], self.data.x_train, self.data.y_train[k])
        history = tuple(_params(m.backward) for m in models[1:]) if method in LINEAR else ()
        models.append(self._version(method, k, z_prev, history, transform, prefix))
      self.models[name] = models
    return self.models[name]

  def posthoc(self, method: str, transform, prefix: str) -> list:
    """B_1 ... B_K fitted on Non-BC's fixed embeddings (eq. 7 or eq. 10), one stage each."""
    cfg, data = self.cfg, self.data
    nobc = self.trained("non-bc", None, "")
    fitted_maps: list = []
    for k in range(1, self.num_versions):
      z_new, _ = _evaluate(nobc[k], data.x_train, data.y_train[k])
      z_old = self.z0_train if k == 1 else _evaluate(nobc[k - 1], data.x_train, data.y_train[k])[0]

      def fit(z_new=z_new, z_old=z_old, k=k):
        fitted = fit_posthoc(
          z_new,
          z_old,
          fitted_maps,
          key=jax.random.fold_in(jax.random.key(cfg.seed), 100 + k),
          loss=POSTHOC_LOSS[POSTHOC[method]],
          steps=cfg.steps,
          batch_size=cfg.batch_size,
          learning_rate=cfg.posthoc_learning_rate,
          transform=transform,
          history_transforms=transform,
        )
        self.run.log(method=prefix + method, version=k, step=cfg.steps, loss=float(fitted.losses[-1]))
        return jax.tree.map(np.asarray, fitted.w)

      fitted_maps.append(jax.tree.map(jnp.asarray, self.run.stage(f"{prefix}{method}/B{k}", fit, POSTHOC_CHECKPOINT)))
    return fitted_maps

  def evaluate(self, method: str, transform, prefix: str) -> dict:
    """Per version k: the alignment error of z̃_0 (read back from the method's keep-latest registry) to z_0 on
    held-out points, the single-step error, the intended MSE and, for maps a matrix represents, ‖W^0_k‖₂."""
    cfg, data = self.cfg, self.data
    source = "non-bc" if method in POSTHOC else method
    models = self.trained(source, transform, prefix)
    registry = None
    if method in LINEAR:
      maps = self.posthoc(method, transform, prefix) if method in POSTHOC else [_params(m.backward) for m in models[1:]]

      def build(path):
        reg = Registry.create(path, cfg.dims[0], notes=f"{method}: M_0")
        for k, params in enumerate(maps, start=1):
          reg.append(jax.tree.map(np.asarray, params), notes=f"{method}: B_{k}", transform=transform)

      registry = Registry(self.run.publish_dir(f"registries/{prefix}{method}", build))
    per_version = {"alignment_error_to_v0": [], "single_step_error": [], "intended_mse": [], "composed_gain": []}
    z_prev_test = self.z0_test
    for k in range(1, self.num_versions):
      z_k, mse = _evaluate(models[k], data.x_test, data.y_test[k])
      if registry is None:  # Non-BC and Joint-NoTrans publish the first D_0 coordinates
        z0_tilde = notrans(z_k, cfg.dims[0])
        one_step = notrans(z_k, cfg.dims[k - 1])
        gain = 1.0
      else:  # keep-latest: only z_k and the registry are needed to reproduce version 0
        z0_tilde = jnp.asarray(registry.transform(np.asarray(z_k), to=0, source=k))
        one_step = jnp.asarray(registry.transform(np.asarray(z_k), to=k - 1, source=k))
        # affine and MLP maps have no single gain (a bias, a non-linear branch): None, never NaN
        gain = (
          float(np.linalg.norm(registry.compose(0, source=k), ord=2))
          if transform is None or transform.kind == "orthogonal"
          else None
        )
      z_prev_test = z_prev_test if k == 1 else _evaluate(models[k - 1], data.x_test, data.y_test[k])[0]
      per_version["alignment_error_to_v0"].append(float(alignment_error(z0_tilde, self.z0_test)))
      per_version["single_step_error"].append(float(alignment_error(one_step, z_prev_test)))
      per_version["intended_mse"].append(mse)
      per_version["composed_gain"].append(gain)
    return per_version


def summarise(cfg: Config, results: dict, mse0: float, sweep: dict | None = None) -> dict:
  """The results dictionary: per-method curves plus the intended degradation relative to Non-BC (also for the
  ``sweep``'s runs, kind -> method -> curves)."""
  versions = list(range(1, len(cfg.dims)))
  if "non-bc" in results:
    base = results["non-bc"]["intended_mse"]
    for res in [*results.values(), *(r for runs in (sweep or {}).values() for r in runs.values())]:
      res["intended_degradation_pct"] = [100.0 * (m - b) / b for m, b in zip(res["intended_mse"], base)]
  return {
    "dataset": "synthetic-chain",
    "preset_config": dataclasses.asdict(cfg),
    "seed": cfg.seed,
    "versions": versions,
    "v0_intended_mse": mse0,
    "methods": results,
  }


def _row(method: str, kind: str, res: dict) -> list:
  gain = res["composed_gain"][-1]
  return [
    method,
    kind,
    *res["alignment_error_to_v0"],
    res["single_step_error"][-1],
    "n/a" if gain is None else gain,
    float(np.mean(res["intended_mse"])),
    float(np.mean(res["intended_degradation_pct"])) if "intended_degradation_pct" in res else "n/a",
  ]


def report(run: Run, results: dict) -> str:
  """Writes table.md (and, with a transform sweep, its kind × method table) and alignment_error.png; returns the
  tables. The B_k column names what maps z_k back to version 0: the kind, or NoTrans."""
  versions, methods = results["versions"], results["methods"]
  header = (
    ["method", "B_k"]
    + [f"err→v0 @v{k}" for k in versions]
    + [f"1-step err @v{versions[-1]}", f"‖W^0_{versions[-1]}‖₂", "intended MSE (mean)", "intended degr. % (mean)"]
  )
  kind = results.get("transform", "linear")
  table = common.markdown_table(header, [_row(m, kind if m in LINEAR else "NoTrans", r) for m, r in methods.items()])
  if "transform_sweep" in results:
    rows = [
      _row(m, sweep["transform"], r)
      for sweep in results["transform_sweep"].values()
      for m, r in sweep["methods"].items()
    ]
    table += (
      "\n\nBackward transformation kinds (--transform-sweep): the methods with a transformation, once per "
      "kind, on the same M_0 and Non-BC models (‖W^0_k‖₂: n/a for maps no matrix represents).\n\n"
      + common.markdown_table(header, rows)
    )
  run.write_text("table.md", table)
  _plot(run, versions, methods, results.get("transform_sweep", {}), kind)
  return table


def _plot(run: Run, versions: list[int], results: dict, sweep: dict, kind: str) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  curves = [(method, "-", res) for method, res in results.items()]
  curves += [
    (f"{m} [{s['transform']}]", "--", res) for k, s in sweep.items() if k != kind for m, res in s["methods"].items()
  ]
  for label, style, res in curves:
    axes[0].plot(versions, res["alignment_error_to_v0"], style, marker="o", label=label)
    axes[1].plot(versions, res["single_step_error"], style, marker="o", label=label)
  axes[0].set(title="Alignment error of z̃₀ vs z₀ (held-out)", xlabel="version k", ylabel="mean L2 distance")
  axes[1].set(title="Single-step error of B_k(z_k) vs z_(k-1)", xlabel="version k", ylabel="mean L2 distance")
  for ax in axes:
    ax.set_xticks(versions)
    ax.grid(alpha=0.3)
  axes[0].legend(fontsize=8)
  fig.tight_layout()
  run.save_figure(fig, "alignment_error.png")
