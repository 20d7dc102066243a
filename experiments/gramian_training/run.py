"""Trains one two-tower model per method on a common corpus and records validation MAP@10 over training time."""

import time

import jax
import numpy as np
from flax import nnx
from tqdm import tqdm

from bcjax.data import PairCorpus
from bcjax.gramian import batch_gramian, sagram, sogram
from bcjax.metrics import evaluate_retrieval
from bcjax.models import TwoTower
from bcjax.parallel import DATA_AXIS, replicate
from experiments.gramian_training.configs import Config
from experiments.two_tower.data import train_data
from experiments.two_tower.softmax import softmax_train_step
from experiments.two_tower.train import (
  gramian_train_step,
  init_state,
  make_embedder,
  make_estimation_error,
  make_optimizer,
)


def method_step(method: str, graphdef, optimizer, cfg: Config, mesh=None, num_entities=(0, 0)):
  """(train step, estimator (a (left, right) pair for SAGram) or None, entity sampling) of ``method``;
  ``num_entities`` (left, right) sizes SAGram's caches."""
  kind, _, variant = method.partition("-")
  axis_name = None if mesh is None else DATA_AXIS
  if kind == "softmax":
    step = softmax_train_step(
      graphdef, optimizer, batch_size=cfg.batch_size, temperature=cfg.temperature, correct=variant == "logq", mesh=mesh
    )
    return step, None, "uniform"
  if kind == "sogram":
    estimator = sogram(cfg.alpha, axis_name=axis_name)
  elif kind == "sagram":
    # The cache estimates the uniform Gramian; its SAGA correction is unbiased for uniformly drawn rows (mu = 1).
    if variant != "uniform":
      raise ValueError(f"{method}: SAGram samples its cache rows uniformly; use sagram-uniform")
    estimator = tuple(sagram(n, axis_name=axis_name) for n in num_entities)
  elif kind == "sampling":
    estimator = batch_gramian(sampling="uniform", axis_name=axis_name)  # the 1/(np) weights come with the batch
  elif kind == "exact":
    estimator = None
  else:
    raise ValueError(f"unknown method {method!r}")
  step = gramian_train_step(
    graphdef,
    optimizer,
    estimator,
    lam=cfg.lam,
    batch_size=cfg.batch_size,
    penalty_batch_size=cfg.penalty_batch_size,
    mesh=mesh,
    exact_chunk_size=cfg.exact_chunk_size,
  )
  return step, estimator, variant


def validation_queries(corpus: PairCorpus, limit: int, seed: int) -> np.ndarray:
  """The left entities whose validation pairs are ranked: all of them, or a fixed random ``limit`` of them (0: no
  limit), so the evaluation of a million-page corpus costs what a few thousand queries cost."""
  queries = np.unique(corpus.val.left)
  if 0 < limit < len(queries):
    queries = np.sort(np.random.default_rng([seed, 1]).choice(queries, limit, replace=False))
  return queries


def evaluate(
  embed,
  params,
  corpus: PairCorpus,
  candidates: np.ndarray,
  queries: np.ndarray,
  *,
  exact: bool = False,
  per_query: bool = False,
) -> dict:
  """MAP@10 / Recall@10 of the validation pairs of ``queries`` against the candidate set, or exact full-corpus
  metrics. Against candidates only the ranked items (the candidates and the queries' validation items) are embedded,
  so an evaluation costs the same at a thousand pages as at a million."""
  row = np.full(corpus.left.num_entities, -1)
  row[queries] = np.arange(len(queries))
  val_rows = row[corpus.val.left] >= 0
  train_rows = row[corpus.train.left] >= 0
  val_right, train_right = corpus.val.right[val_rows], corpus.train.right[train_rows]
  items, train_left = None, row[corpus.train.left[train_rows]]
  if not exact:  # renumber the ranked items 0..m-1; training pairs of other items are never ranked anyway
    items = np.union1d(candidates, val_right)
    column = np.full(corpus.right.num_entities, -1)
    column[items] = np.arange(len(items))
    kept = column[train_right] >= 0
    val_right, train_left, train_right = column[val_right], train_left[kept], column[train_right[kept]]
    candidates = column[candidates]
  u = embed(params, corpus.left.groups, "left", queries)
  v = embed(params, corpus.right.groups, "right", items)
  ks = (10, 50) if exact else (10,)
  return evaluate_retrieval(
    u,
    v,
    (row[corpus.val.left[val_rows]], val_right),
    exclude=(train_left, train_right),
    ks=ks,
    candidates=None if exact else candidates,
    per_query=per_query,
  )


def train_method(
  method: str,
  corpus: PairCorpus,
  cfg: Config,
  *,
  progress: bool = True,
  log=None,
  mesh: jax.sharding.Mesh | None = None,
) -> dict:
  """One method's training curve; with ``mesh`` (``--devices``) every step is data-parallel over it."""
  key = jax.random.key(cfg.seed)  # same initial model and batches for every method
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
  step_fn, estimator, sampling = method_step(
    method, graphdef, optimizer, cfg, mesh, (corpus.left.num_entities, corpus.right.num_entities)
  )
  data = train_data(corpus, sampling, cfg.smoothing)
  embed = make_embedder(graphdef)
  caches = None
  if method.startswith("sagram-"):  # the caches start from every entity's initial embedding (Alg. 1 line 4)
    caches = (embed(params, corpus.left.groups, "left"), embed(params, corpus.right.groups, "right"))
  state = init_state(graphdef, params, optimizer, estimator, cfg.sizes[-1], caches)
  if mesh is not None:
    state, data = replicate(mesh, state), replicate(mesh, data)
  rng = jax.random.fold_in(key, 1)
  start = time.perf_counter()
  compiled = step_fn.lower(state, data, rng).compile()
  compile_seconds = time.perf_counter() - start
  candidates = np.random.default_rng(cfg.seed).choice(
    corpus.right.num_entities, min(cfg.num_candidates, corpus.right.num_entities), replace=False
  )
  queries = validation_queries(corpus, cfg.eval_queries, cfg.seed)
  # The Gramian estimates' error along training (not timed); the oracle's is 0, the softmax has no Gramian.
  track = cfg.track_error and mesh is None and estimator is not None
  error = (
    None
    if not track
    else make_estimation_error(
      graphdef, estimator, penalty_batch_size=cfg.penalty_batch_size, exact_chunk_size=cfg.exact_chunk_size
    )
  )

  def point(step: int, seconds: float, ev: dict) -> dict:
    out = {"step": step, "train_seconds": seconds, "map@10": ev["map@10"]}
    # Not at step 0: there the estimate is its initial value, not an estimate yet, and the pass over the whole corpus
    # costs ~5 s at a million pages.
    if error is not None and step > 0:
      out["gramian_error"] = [float(e) for e in error(state, data, jax.random.fold_in(key, 2 + step))]
    return out

  curve, train_seconds = [], 0.0
  curve.append(point(0, 0.0, evaluate(embed, state.params, corpus, candidates, queries)))
  bar = tqdm(range(1, cfg.steps + 1), desc=method, disable=not progress, leave=False)
  for step in bar:
    tic = time.perf_counter()
    state, metrics = compiled(state, data, jax.random.fold_in(rng, step))
    if step % cfg.eval_every == 0 or step == cfg.steps:
      jax.block_until_ready(state.params)
      train_seconds += time.perf_counter() - tic
      metrics = {k: float(v) for k, v in metrics.items()}
      if not np.isfinite(metrics["loss"]):
        raise FloatingPointError(f"{method}: non-finite loss {metrics['loss']} at step {step}")
      ev = evaluate(embed, state.params, corpus, candidates, queries)
      curve.append(point(step, train_seconds, ev))
      bar.set_postfix(map10=f"{ev['map@10']:.4f}", loss=f"{metrics['loss']:.3f}")
      if log is not None:
        extra = {"gramian_error": curve[-1]["gramian_error"]} if "gramian_error" in curve[-1] else {}
        log(method=method, step=step, train_seconds=train_seconds, **metrics, **{"val_map@10": ev["map@10"]}, **extra)
    else:
      train_seconds += time.perf_counter() - tic
  final = evaluate(embed, state.params, corpus, candidates, queries, exact=True)
  # Each query's final AP@10 (the queries are the same for every method): the oracle's gap over sampling is tested
  # against the validation queries' noise before a share of it is reported (gramian_training.experiment).
  last = evaluate(embed, state.params, corpus, candidates, queries, per_query=True)
  return {
    "final_ap@10_by_query": (np.asarray(last["query_ids"]), np.asarray(last["per_query"]["map@10"], np.float64)),
    "curve": curve,
    "final_map@10": curve[-1]["map@10"],
    "best_map@10": max(c["map@10"] for c in curve),
    "exact": final,
    "train_seconds": train_seconds,
    "compile_seconds": compile_seconds,
    "steps": cfg.steps,
  }


def time_to_reach(curve: list[dict], target: float) -> float | None:
  """Training seconds at which a curve first reaches ``target`` (None if never)."""
  for point in curve:
    if point["map@10"] >= target:
      return point["train_seconds"]
  return None
