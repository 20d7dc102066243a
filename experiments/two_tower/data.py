"""Corpora of the Gramian experiments on device: features, training pairs and the entity-sampling distributions."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bcjax._buckets import pad_to_bucket
from bcjax.data import (
  MOVIELENS_VARIANTS,
  PAD,
  PairCorpus,
  counts,
  load_movielens,
  load_wikipedia_links,
  movielens_corpus,
  movielens_dir,
  synthetic_link_corpus,
)
from bcjax.gramian import sampling_probabilities


class Sampler(NamedTuple):
  """Draws entities from p (inverse CDF) and weights them by mu = 1 / (n p), so weighted batch Gramians estimate the
  uniform Gramian over all n entities without bias."""

  cdf: jax.Array  # [n], float32
  mu: jax.Array  # [n]


class TrainData(NamedTuple):
  """Everything a train step reads, as device arrays (passed as an argument, never closed over)."""

  left_groups: tuple[jax.Array, ...]
  right_groups: tuple[jax.Array, ...]
  pair_left: jax.Array  # [E_pad] training pairs; rows num_pairs.. are padding (pair 0), never drawn
  pair_right: jax.Array
  pair_target: jax.Array
  num_pairs: jax.Array  # [] int32 E, traced: corpora of one size but another seed share the compiled steps
  left_sampler: Sampler
  right_sampler: Sampler
  right_log_q: jax.Array  # [n_right] log Q_j of the in-batch softmax (see log_in_batch_probability)


def make_sampler(entity_counts: np.ndarray, kind: str, smoothing: float = 1.0) -> Sampler:
  """A sampler over entities from their training counts (``uniform``, ``linear`` or ``sqrt``); ``smoothing`` is
  added to the counts so entities unseen in training keep a positive probability."""
  p = sampling_probabilities(np.asarray(entity_counts, np.float64) + smoothing, kind)
  cdf = np.cumsum(p)
  cdf /= cdf[-1]
  return Sampler(jnp.asarray(cdf, jnp.float32), jnp.asarray(1.0 / (len(p) * p), jnp.float32))


def sample(sampler: Sampler, key: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
  """``size`` entity indices drawn i.i.d. from the sampler's p, and their weights mu."""
  u = jax.random.uniform(key, (size,), sampler.cdf.dtype)
  idx = jnp.minimum(jnp.searchsorted(sampler.cdf, u, side="right"), sampler.cdf.shape[0] - 1)
  return idx, sampler.mu[idx]


def log_in_batch_probability(pair_right: np.ndarray, n_right: int) -> np.ndarray:
  """log Q_j = log(count_j / E) for every right entity j: a uniformly drawn training pair's right entity is j with
  this probability. Counted once on the host; an entity in no training pair is never an in-batch candidate, and gets
  log(1 / E) so the table holds no -inf."""
  count = np.bincount(np.asarray(pair_right), minlength=n_right).astype(np.float64)
  return np.log(np.maximum(count, 1.0) / max(len(pair_right), 1)).astype(np.float32)


def pair_capacity(num_pairs: int) -> int:
  """The padded length of E training pairs: E rounded up to a multiple of 2^(bits(E) - 6), at most ~3 % more rows.
  The seeds of one corpus size draw E within a fraction of a percent of each other, so they nearly always get the
  same shapes, and a step compiled for one seed is read back from the compilation cache for the others."""
  quantum = 1 << max(num_pairs.bit_length() - 6, 0)
  return -(-num_pairs // quantum) * quantum


def train_data(corpus: PairCorpus, sampling: str, smoothing: float = 1.0) -> TrainData:
  n_left, n_right = corpus.left.num_entities, corpus.right.num_entities
  e = len(corpus.train.left)
  pair_left, pair_right, pair_target = pad_to_bucket(
    (corpus.train.left, corpus.train.right, corpus.train.target), (0, 0, 0), size=pair_capacity(e)
  )
  return TrainData(
    left_groups=tuple(jnp.asarray(g) for g in corpus.left.groups),
    right_groups=tuple(jnp.asarray(g) for g in corpus.right.groups),
    pair_left=pair_left,
    pair_right=pair_right,
    pair_target=pair_target,
    num_pairs=jnp.asarray(e, jnp.int32),
    left_sampler=make_sampler(counts(corpus.train.left, n_left), sampling, smoothing),
    right_sampler=make_sampler(counts(corpus.train.right, n_right), sampling, smoothing),
    right_log_q=jnp.asarray(log_in_batch_probability(corpus.train.right, n_right)),
  )


def gather(groups: tuple[jax.Array, ...], idx: jax.Array) -> tuple[jax.Array, ...]:
  return tuple(g[idx] for g in groups)


def check_corpus(corpus: PairCorpus) -> PairCorpus:
  """Before the first step: training needs pairs, and the evaluation needs held-out pairs to rank."""
  if len(corpus.train.left) == 0 or len(corpus.val.left) == 0:
    raise ValueError(
      f"{corpus.name}: {len(corpus.train.left)} training and {len(corpus.val.left)} validation pairs; "
      f"both must be non-empty (too few interactions?)"
    )
  return corpus


def corpus_notes(corpus: PairCorpus) -> tuple[str, ...]:
  """What a reader of the results needs to know about the corpus: its sizes, the entities that no training pair
  reaches (their embeddings move only through the Gramian penalty and the features they share) and the validation
  pairs that rank such an entity, and the entities with an empty feature group."""
  e, v = len(corpus.train.left), len(corpus.val.left)
  same = corpus.left is corpus.right
  sides = (("entities", corpus.left),) if same else (("left entities", corpus.left), ("right entities", corpus.right))
  sizes = ", ".join(f"{b.num_entities:,} {name}" for name, b in sides)
  notes = [f"{corpus.name}: {sizes}; {e:,} training and {v:,} validation pairs"]
  trained_right = np.zeros(corpus.right.num_entities, bool)
  trained_right[corpus.train.right] = True
  if same:
    trained_right[corpus.train.left] = True
  cold = int(np.sum(~trained_right))
  if cold:
    unseen = int(np.sum(~trained_right[corpus.val.right]))
    notes.append(
      f"{cold:,} of {corpus.right.num_entities:,} {sides[-1][0]} are in no training pair; {unseen:,} of {v:,} "
      f"validation pairs have one as their target"
    )
  for name, bags in sides:
    for group, ids in zip(bags.names[1:], bags.groups[1:]):  # group 0 is the id: never empty
      empty = int(np.sum(np.all(ids == PAD, axis=1)))
      if empty:
        notes.append(f"{empty:,} of {bags.num_entities:,} {name} have no {group!r} feature")
  return tuple(notes)


def load_corpus(dataset: str, data_dir: str | None, *, num_pages: int, num_links: int, seed: int) -> PairCorpus:
  """``synthetic`` (embedded default), ``movielens-<variant>`` (from ``data_dir``) or ``wikipedia`` (a folder in the
  Wikipedia-links format)."""
  if dataset == "synthetic":
    return synthetic_link_corpus(num_pages, num_links, seed=seed)
  if dataset.startswith("movielens-"):
    variant = dataset.removeprefix("movielens-")
    if variant not in MOVIELENS_VARIANTS:
      raise ValueError(f"unknown MovieLens variant {variant!r}; choose from {', '.join(MOVIELENS_VARIANTS)}")
    return movielens_corpus(load_movielens(movielens_dir(variant, data_dir), variant), seed=seed)
  if dataset == "wikipedia":
    if data_dir is None:
      raise FileNotFoundError("--dataset wikipedia needs --data-dir (a folder with pages.tsv and links.tsv)")
    return load_wikipedia_links(data_dir, seed=seed)
  raise ValueError(f"unknown dataset {dataset!r}; use synthetic, movielens-<variant> or wikipedia")
