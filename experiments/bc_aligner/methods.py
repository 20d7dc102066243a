"""The nine methods of the paper's Table 3, run over the five versions.

Every method yields its intended val Recall@K per version and its *published* version-0-space embeddings per
version, which the version-0 consumers read:

* keep-all: the ideal that keeps every model: intended = non-bc's, published = fix-m0's (true M_0 embeddings);
* fix-m0: M_0 applied to each G_k; finetune-m0: M_0's architecture, fine-tuned per version (fresh Adam);
* non-bc: independent M_k, published = the first d_0 coordinates of z_k (what a consumer would do with no BC);
* post-lin-sloss / -mloss: non-bc's M_k plus B_k fitted afterwards on fixed embeddings;
* joint-notrans / joint-lin-sloss / bc-aligner (joint-lin-mloss): M_k trained with the alignment loss to the
  jointly trained M_(k-1).

M_0 is trained once and shared. Version k's model initialisation and sampling keys are the same in every method, so
methods differ only in their objective. Linear methods store W_1..W_4 in a keep-latest registry and publish
z̃_0 = B_1∘…∘B_k(z_k) through it; ``--transform`` makes every B_k of these methods another kind
(orthogonal, affine, MLP), stored in the registry with its kind. Every trained model and every post-hoc B_k is one
stage of the run, an orbax checkpoint whose graph definitions are rebuilt from the config on resume (``m0``,
``non-bc/v2``, ``bc-aligner/v3``, ``post-lin-sloss/B1``; ``lam=4/...`` for a λ sweep,
``transform=mlp/...`` for a transform sweep), so a resumed run recomputes none of them.
"""

import dataclasses
import functools
import itertools
from typing import NamedTuple

import jax
import numpy as np

from bcjax.alignment import multi_step_pull, notrans
from bcjax.versioning import Registry
from bcjax.versioning._registry import MATRIX_KINDS
from experiments.bc_aligner.configs import JOINT, POSTHOC, Config, transform_of
from experiments.bc_aligner.data import VersionData
from experiments.bc_aligner.train import (
  POSTHOC_CHECKPOINT,
  AlignTarget,
  Trained,
  apply_model,
  model_like,
  new_model,
  recall,
  train_model,
  train_posthoc,
  trained_checkpoint,
)
from experiments.harness import MISSING, Run


class ChainStats(NamedTuple):
  """What a method's chain of matrix B_k does to errors, for k = 1..K."""

  norm: list[float]  # ‖W_1⋯W_k‖₂: how much the published chain can amplify an error of z_k
  # κ_k = tr R_k / D_(k-1) (multi_step_pull on W_1..W_(k-1), the reference's per-coordinate scaling): the multi-step
  # loss's pull at version k relative to the single-step loss's, for an isotropic residual (1 at k = 1)
  multistep_weight: list[float]
  pull_range: list[list[float]]  # R_k's smallest and largest eigenvalues: its least and most pull along one direction


class MethodRun(NamedTuple):
  recall_by_version: list[dict[str, float]]
  published: list[np.ndarray]  # version-0-space node embeddings [N_k, d_0] per version (users first)
  serving: list[np.ndarray]  # the embeddings [N_k, d_k] whose val Recall@K is recall_by_version, per version
  chain: ChainStats | None = None  # matrix B_k only


def _version_key(key: jax.Array, k: int) -> jax.Array:
  return jax.random.fold_in(key, k)


class MethodRunner:
  """Runs methods on shared versions, training each shared model (M_0, non-bc's M_k) once per run."""

  def __init__(
    self,
    versions: list[VersionData],
    attribute_sizes: tuple[int, ...],
    cfg: Config,
    key: jax.Array,
    run: Run,
    progress=None,
    prefix: str = "",
    mesh: jax.sharding.Mesh | None = None,
    transform_prefix: str = "",
  ):
    self.versions, self.sizes, self.cfg, self.key = versions, attribute_sizes, cfg, key
    self.run_dir, self.progress, self.prefix, self.mesh = run, progress, prefix, mesh
    self.transform_prefix = transform_prefix  # post-hoc fits depend on the kind of B_k, not on λ
    self.train = functools.partial(train_model, mesh=mesh)  # every M_k's steps on the data mesh (--devices)
    self.transform = transform_of(cfg)  # the kind of B_k (None: the paper's linear W_k)

  def with_lambda(self, lam: float) -> "MethodRunner":
    """A runner for another λ that shares this one's M_0 and Non-BC models; its stages and registries go under
    ``lam=<λ>/``."""
    return MethodRunner(
      self.versions,
      self.sizes,
      dataclasses.replace(self.cfg, lam=lam),
      self.key,
      self.run_dir,
      self.progress,
      f"{self.transform_prefix}lam={lam:g}/",
      self.mesh,
      self.transform_prefix,
    )

  def with_transform(self, kind: str) -> "MethodRunner":
    """A runner whose methods with a transformation learn a B_k of ``kind`` (the run's ``--transform-rank`` and
    ``--transform-hidden``), sharing this one's M_0 and Non-BC models; its stages and registries go under
    ``transform=<kind>/``."""
    prefix = f"transform={kind}/"
    return MethodRunner(
      self.versions,
      self.sizes,
      dataclasses.replace(self.cfg, transform=kind),
      self.key,
      self.run_dir,
      self.progress,
      prefix,
      self.mesh,
      prefix,
    )

  def _fresh(self, k: int):
    layers, dim = self.cfg.versions[k]
    return new_model(self.sizes, layers, dim, _version_key(self.key, k))

  def _checkpoint(self, k: int):
    """How a model of version k's architecture is checkpointed (Finetune-M0's models have version 0's)."""
    layers, dim = self.cfg.versions[k]
    return trained_checkpoint(lambda: model_like(self.sizes, layers, dim))

  def _logger(self, method: str, version: int):
    return lambda **record: self.run_dir.log(method=method, version=version, **record)

  def _stage(self, name: str, compute, checkpoint, *, shared: bool = False):
    """``compute()`` as a stage of this run, checkpointed by ``checkpoint``; shared ones (M_0, Non-BC) do not depend
    on λ and carry no sweep prefix. The run is asked for the stage and stores it: the harness never runs this
    module's code (``compute`` runs here, inside :meth:`~experiments.harness.Run.computing`)."""
    name = name if shared else self.prefix + name
    value = self.run_dir.stored(name, checkpoint)
    if value is MISSING:
      with self.run_dir.computing(name):
        value = compute()
      value = self.run_dir.store(name, value, checkpoint)
    return value

  def m0(self) -> Trained:
    return self._stage(
      "m0",
      lambda: self.train(
        self.versions[0],
        self._fresh(0),
        self.cfg,
        _version_key(self.key, 100),
        epochs=self.cfg.epochs,
        select_after=0,
        log=self._logger("m0", 0),
        progress=self.progress,
      ),
      self._checkpoint(0),
      shared=True,
    )

  def nobc(self) -> list[Trained]:
    models = [self.m0()]
    for k in range(1, len(self.versions)):
      models.append(
        self._stage(
          f"non-bc/v{k}",
          lambda k=k: self.train(
            self.versions[k],
            self._fresh(k),
            self.cfg,
            _version_key(self.key, 100 + k),
            epochs=self.cfg.epochs,
            select_after=0,
            log=self._logger("non-bc", k),
            progress=self.progress,
          ),
          self._checkpoint(k),
          shared=True,
        )
      )
    return models

  def _publish(
    self, method: str, weights: list[np.ndarray], zs: list[np.ndarray], notes: list[str]
  ) -> tuple[list[np.ndarray], ChainStats | None]:
    """Writes the method's keep-latest registry (complete or not at all) and publishes z̃_0 = B_1∘…∘B_k(z_k);
    with matrix B_k also the chain's :class:`ChainStats`, from the registry's stored maps."""

    def build(path):
      registry = Registry.create(
        path, self.cfg.versions[0][1], notes=f"{method}: W_k maps M_k's embeddings to M_(k-1)'s space"
      )
      for w, note in zip(weights, notes):
        registry.append(w, notes=note, transform=self.transform)

    registry = Registry(self.run_dir.publish_dir(f"registries/{self.prefix}{method}", build))
    published = [zs[0]] + [registry.transform(z, to=0, source=k) for k, z in enumerate(zs[1:], start=1)]
    versions = range(1, len(zs))
    chain = None
    if all(registry.info(k).kind in MATRIX_KINDS for k in versions):
      ws = [registry.compose(k - 1, source=k) for k in versions]  # W_k, of any matrix kind
      dims = [w.shape[0] for w in ws]  # D_0..D_(K-1)
      pulls = [np.asarray(multi_step_pull(ws[: k - 1], dim=dims[k - 1], per_dim=True), np.float64) for k in versions]
      composed = itertools.accumulate(ws, np.matmul)  # W_1⋯W_k, k = 1..K, in float64 like the registry's
      chain = ChainStats(
        norm=[float(np.linalg.norm(w, 2)) for w in composed],
        multistep_weight=[float(np.trace(r)) / r.shape[0] for r in pulls],
        pull_range=[[float(e[0]), float(e[-1])] for e in map(np.linalg.eigvalsh, pulls)],
      )
    return published, chain

  def run(self, method: str) -> MethodRun:
    d0 = self.cfg.versions[0][1]
    if method == "fix-m0":
      m0 = self.m0().model
      zs = [apply_model(m0, vd) for vd in self.versions]
      return MethodRun([recall(z, vd, self.cfg.ks) for z, vd in zip(zs, self.versions)], zs, zs)
    if method == "non-bc":
      models = self.nobc()
      return MethodRun(
        [m.recall for m in models], [np.asarray(notrans(m.z, d0)) for m in models], [m.z for m in models]
      )
    if method == "keep-all":
      fixed, models = self.run("fix-m0"), self.nobc()
      return MethodRun([m.recall for m in models], fixed.published, [m.z for m in models])
    if method == "finetune-m0":
      runs = [self.m0()]
      for k in range(1, len(self.versions)):
        runs.append(
          self._stage(
            f"{method}/v{k}",
            lambda k=k: self.train(
              self.versions[k],
              runs[-1].model,
              self.cfg,
              _version_key(self.key, 200 + k),
              epochs=self.cfg.finetune_epochs,
              select_after=0,
              log=self._logger(method, k),
              progress=self.progress,
            ),
            self._checkpoint(0),
            shared=True,
          )
        )
      return MethodRun([r.recall for r in runs], [r.z for r in runs], [r.z for r in runs])
    if method in POSTHOC:
      nobc, history = self.nobc(), []
      for k in range(1, len(self.versions)):
        target = AlignTarget(apply_model(nobc[k - 1].model, self.versions[k]), tuple(history))
        w, _ = self._stage(
          f"{self.transform_prefix}{method}/B{k}",
          lambda k=k, target=target: train_posthoc(
            self.versions[k],
            nobc[k].z,
            target,
            POSTHOC[method],
            self.cfg,
            _version_key(self.key, 300 + k),
            log=self._logger(method, k),
            mesh=self.mesh,
            transform=self.transform,
          ),
          POSTHOC_CHECKPOINT,
          shared=True,
        )
        history.append(w)
      published, chain = self._publish(
        method, history, [m.z for m in nobc], ["post-hoc, selected by single-step error"] * len(history)
      )
      return MethodRun([m.recall for m in nobc], published, [m.z for m in nobc], chain)
    if method in JOINT:
      kind = JOINT[method]
      runs, history = [self.m0()], []
      for k in range(1, len(self.versions)):
        target = AlignTarget(apply_model(runs[-1].model, self.versions[k]), tuple(history))
        run = self._stage(
          f"{method}/v{k}",
          lambda k=k, target=target: self.train(
            self.versions[k],
            self._fresh(k),
            self.cfg,
            _version_key(self.key, 100 + k),
            epochs=self.cfg.epochs,
            select_after=self.cfg.select_after,
            kind=kind,
            target=target,
            log=self._logger(method, k),
            progress=self.progress,
            transform=self.transform,
          ),
          self._checkpoint(k),
        )
        runs.append(run)
        if kind != "notrans":
          history.append(run.w)
      if kind == "notrans":
        published, chain = [runs[0].z] + [np.asarray(notrans(r.z, d0)) for r in runs[1:]], None
      else:
        published, chain = self._publish(
          method, history, [r.z for r in runs], [f"joint, λ={self.cfg.lam}, epoch {r.epoch}" for r in runs[1:]]
        )
      return MethodRun([r.recall for r in runs], published, [r.z for r in runs], chain)
    raise ValueError(f"unknown method {method!r}")

  def epochs_needed(self, methods, *, shared: bool = True) -> int:
    """Epochs of embedding-model training the methods need (for the progress bar); without the ``shared`` models
    (M_0, Non-BC's, Finetune-M0's), what a sweep's runner adds."""
    n = len(self.versions) - 1
    total = 0
    if shared:
      total += self.cfg.epochs  # M_0
      if any(m in methods for m in ("non-bc", "keep-all", *POSTHOC)):
        total += n * self.cfg.epochs
      total += n * self.cfg.finetune_epochs * ("finetune-m0" in methods)
    total += n * self.cfg.epochs * sum(m in methods for m in JOINT)
    return total
