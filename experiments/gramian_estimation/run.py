r"""Tracks every estimator along one common trajectory :math:`(\theta^{(t)})`.

The trajectory comes from training the two-tower model with the uniform candidate-sampling baseline; at every step
each estimator draws its own batch, embeds it at :math:`\theta^{(t)}` and updates its estimate; every
``error_every`` steps the exact Gramians :math:`G_u(\theta^{(t)}), G_v(\theta^{(t)})` are computed on all entities
and each estimate's normalised Frobenius error :math:`\lVert \hat G - G \rVert_F / \lVert G \rVert_F` recorded.
The estimators never influence the trajectory, so their errors are directly comparable.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from tqdm import tqdm

from bcjax.data import PairCorpus, counts
from bcjax.gramian import GramianEstimator, SAGramState, batch_gramian, gramian, sagram, sogram
from bcjax.models import TwoTower
from bcjax.parallel import DATA_AXIS, replicate, shard_table, split_rows
from experiments.harness import option
from experiments.two_tower.data import Sampler, gather, make_sampler, sample, train_data
from experiments.two_tower.train import gramian_train_step, init_state, make_embedder, make_optimizer


@dataclasses.dataclass(frozen=True)
class Config:
  input_dim: int = 50
  sizes: tuple[int, ...] = (256, 64)
  lam: float = option(10.0, help="penalty coefficient λ of the trajectory's training", flag="--lambda", low=0.0)
  optimizer: str = "adam"
  learning_rate: float = 1e-3
  train_batch_size: int = 1024  # the trajectory's own batches
  steps: int = option(600, help="trajectory length", low=1)
  error_every: int = option(10, help="steps between exact-Gramian error measurements", low=1)
  batch_sizes: tuple[int, ...] = option((128, 1024), help="|B| of the estimators (Figure 2a)", low=1)
  alpha: float = option(0.1, help="SOGram's α in Figure 2a", low=0.0, high=1.0, low_open=True)
  alphas: tuple[float, ...] = option(
    (0.001, 0.01, 0.1, 0.5), help="SOGram's α values of Figure 2b", low=0.0, high=1.0, low_open=True
  )
  smoothing: float = 1.0
  num_pages: int = 10_000
  num_links: int = 100_000
  seed: int = option(0, help="PRNG seed of the corpus, the model and the batches", low=0)
  shard_tables: bool = option(
    False,
    help="split SAGram's caches by rows over the data mesh (--devices): each "
    "device holds n / N rows; the estimates are unchanged",
  )


PRESETS = {
  "quick": Config(),
  "paper": Config(steps=5000, error_every=25, num_pages=85_000, num_links=1_500_000),
  "test": Config(
    input_dim=8,
    sizes=(16, 8),
    steps=12,
    error_every=4,
    batch_sizes=(16, 32),
    alphas=(0.1, 0.5),
    train_batch_size=64,
    num_pages=300,
    num_links=2000,
  ),
}


class Spec(NamedTuple):
  name: str  # e.g. "sogram|B|=128"
  method: str  # sagram-sag, sagram-saga, sogram, sampling-uniform, ...
  batch: int
  alpha: float | None


def specs(cfg: Config) -> list[Spec]:
  out = []
  for b in cfg.batch_sizes:
    out += [
      Spec(f"sagram-sag B={b}", "sagram-sag", b, None),
      Spec(f"sagram-saga B={b}", "sagram-saga", b, None),
      Spec(f"sogram(a={cfg.alpha}) B={b}", "sogram", b, cfg.alpha),
    ]
    out += [Spec(f"sampling-{s} B={b}", f"sampling-{s}", b, None) for s in ("uniform", "linear", "sqrt")]
  b = min(cfg.batch_sizes)
  out += [Spec(f"sogram(a={a}) B={b}", "sogram", b, a) for a in cfg.alphas if a != cfg.alpha]
  return out


def _make(
  spec: Spec, n: int, entity_counts, smoothing: float, axis_name: str | None, shard_cache: bool = False
) -> tuple[GramianEstimator, Sampler]:
  kind = spec.method.split("-")[-1] if spec.method.startswith("sampling") else "uniform"
  sampler = make_sampler(entity_counts, kind, smoothing)
  if spec.method.startswith("sagram"):
    return sagram(n, beta=spec.method.split("-")[1], axis_name=axis_name, shard_cache=shard_cache), sampler
  if spec.method == "sogram":
    return sogram(spec.alpha, axis_name=axis_name), sampler
  # weights 1/(np) come with the batch
  return batch_gramian(sampling="uniform", axis_name=axis_name), sampler


def _relative_error(estimate, truth):
  return jnp.linalg.norm(estimate - truth) / jnp.linalg.norm(truth)


def track(
  corpus: PairCorpus, cfg: Config, *, progress: bool = True, log=None, mesh: jax.sharding.Mesh | None = None
) -> dict:
  """The trajectory and every estimator's error along it; with ``mesh`` the training step and every estimator's
  batch are split over its devices (the estimators sum their per-device Gramians; SAGram gathers the batch into its
  cache, replicated or, with ``cfg.shard_tables``, split by rows over the devices)."""
  axis = None if mesh is None else DATA_AXIS
  key = jax.random.key(cfg.seed)
  model = TwoTower(
    corpus.vocab_size,
    cfg.input_dim,
    len(corpus.left.groups),
    len(corpus.right.groups),
    cfg.sizes,
    rngs=nnx.Rngs(params=jax.random.fold_in(key, 0)),
  )
  graphdef, params = nnx.split(model)
  optimizer = make_optimizer(cfg.optimizer, cfg.learning_rate)
  driver = batch_gramian(sampling="uniform", axis_name=axis)
  state = init_state(graphdef, params, optimizer, driver, cfg.sizes[-1])
  train_step = gramian_train_step(
    graphdef,
    optimizer,
    driver,
    lam=cfg.lam,
    batch_size=cfg.train_batch_size,
    penalty_batch_size=cfg.train_batch_size,
    mesh=mesh,
  )
  data = train_data(corpus, "uniform", cfg.smoothing)
  if mesh is not None:
    state, data = replicate(mesh, state), replicate(mesh, data)
  embed = make_embedder(graphdef)
  sides = {
    "left": (corpus.left, counts(corpus.train.left, corpus.left.num_entities), data.left_groups),
    "right": (corpus.right, counts(corpus.train.right, corpus.right.num_entities), data.right_groups),
  }
  all_specs = specs(cfg)
  estimators, estimator_states = {}, {}

  def sharded(spec: Spec) -> bool:
    return mesh is not None and cfg.shard_tables and spec.method.startswith("sagram")

  for side, (bags, entity_counts, groups) in sides.items():
    full = embed(state.params, groups, side)
    for spec in all_specs:
      est, sampler = _make(spec, bags.num_entities, entity_counts, cfg.smoothing, axis, sharded(spec))
      estimators[side, spec.name] = (est, sampler)
      initial = est.init(full)
      # placed as update_all leaves them, so it compiles once; a row-sharded cache is never whole on every device
      if sharded(spec):
        cache = shard_table(mesh, np.asarray(initial.cache), name=f"{side} SAGram cache")
        initial = replicate(mesh, initial._replace(cache=None))._replace(cache=cache)
      elif mesh is not None:
        initial = replicate(mesh, initial)
      estimator_states[side, spec.name] = initial

  ordered = sorted(estimators.items())
  features = {"left": data.left_groups, "right": data.right_groups}
  batch_of, method_of = {s.name: s.batch for s in all_specs}, {s.name: s.method for s in all_specs}

  def draw(rng):
    """Each estimator's own batch on the global view: entity ids and weights mu."""
    return {
      (side, name): sample(sampler, jax.random.fold_in(rng, i), batch_of[name])
      for i, ((side, name), (_, sampler)) in enumerate(ordered)
    }

  def update(params, est_states, features, draws):
    model = nnx.merge(graphdef, params)
    new_states, estimates = {}, {}
    for (side, name), (est, _) in ordered:
      idx, mu = draws[side, name]
      groups = gather(features[side], idx)
      x = model.embed_left(groups) if side == "left" else model.embed_right(groups)
      weights = mu if method_of[name].startswith("sampling") else None
      g, new_states[side, name] = est.update(est_states[side, name], x, indices=idx, weights=weights)
      estimates[side, name] = g.gramian
    return new_states, estimates

  if mesh is not None:
    # replicated states, or (--shard-tables) SAGram caches split by rows
    state_specs = {
      (side, name): SAGramState(jax.P(DATA_AXIS, None), jax.P(), jax.P(), jax.P())
      if sharded(next(s for s in all_specs if s.name == name))
      else jax.P()
      for (side, name), _ in ordered
    }
    update = jax.shard_map(
      update, mesh=mesh, in_specs=(jax.P(), state_specs, jax.P(), jax.P(DATA_AXIS)), out_specs=(state_specs, jax.P())
    )

  @jax.jit
  def update_all(params, est_states, features, rng):
    draws = draw(rng)
    if mesh is not None:  # each device embeds and folds in its block of every batch
      draws = split_rows(mesh, draws)
    return update(params, est_states, features, draws)

  @jax.jit
  def errors(estimates, exact):
    return {k: _relative_error(v, exact[k[0]]) for k, v in estimates.items()}

  rng = jax.random.fold_in(key, 1)
  steps, curves = [], {side: {s.name: [] for s in all_specs} for side in sides}
  for t in tqdm(range(cfg.steps), desc="trajectory", disable=not progress):
    estimator_states, estimates = update_all(state.params, estimator_states, features, jax.random.fold_in(rng, 2 * t))
    if t % cfg.error_every == 0 or t == cfg.steps - 1:
      exact = {side: gramian(embed(state.params, sides[side][2], side)) for side in sides}
      errs = jax.device_get(errors(estimates, exact))
      steps.append(t)
      for (side, name), e in errs.items():
        curves[side][name].append(float(e))
      if log is not None:
        log(step=t, **{f"{side}/{name}": float(e) for (side, name), e in errs.items()})
    state, _ = train_step(state, data, jax.random.fold_in(rng, 2 * t + 1))
  half = len(steps) // 2
  summary = {side: {name: float(np.mean(v[half:])) for name, v in c.items()} for side, c in curves.items()}
  return {
    "steps": steps,
    "errors": curves,
    "mean_error_second_half": summary,
    "specs": [s._asdict() for s in all_specs],
  }
