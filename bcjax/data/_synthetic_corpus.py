"""A seeded synthetic stand-in for a Wikipedia link graph: the embedded default of the Gramian experiments.

Pages belong to topical clusters. A page's features (id, title words, categories) are drawn from its cluster's pools,
so features carry signal. Page popularity follows a power law (Zipf); a link's source is drawn by a power-law
activity, its target's cluster is the source's own (most often), a neighbouring cluster, or a random one, and the
target is drawn within that cluster proportionally to popularity. The corpus size scales to millions of pages: all
steps are vectorised.
"""

import numpy as np

from bcjax import _checks
from bcjax.data._pairs import PAD, FeatureBags, PairCorpus, Pairs, split_pairs


def _zipf_weights(rng, n: int, exponent: float) -> np.ndarray:
  return rng.permutation((np.arange(1, n + 1, dtype=np.float64)) ** -exponent)


def synthetic_link_corpus(
  num_pages: int = 20_000,
  num_links: int = 200_000,
  *,
  num_clusters: int = 100,
  words_per_cluster: int = 30,
  popularity_exponent: float = 1.0,
  activity_exponent: float = 0.8,
  own_cluster: float = 0.7,
  neighbour_cluster: float = 0.2,
  val_fraction: float = 0.1,
  seed: int = 0,
) -> PairCorpus:
  """Generates a link corpus (targets 1) with pages as both left and right entities.

  Args:
    num_pages: n, the corpus size.
    num_links: links drawn before removing duplicates and self-links.
    num_clusters: topical clusters.
    words_per_cluster: size of each cluster's title-word pool (plus an equal global pool of noise words).
    popularity_exponent: the Zipf exponent of target popularity.
    activity_exponent: the Zipf exponent of source activity.
    own_cluster: the probability that a link stays in the source's cluster.
    neighbour_cluster: the probability that a link goes to the next cluster.
    val_fraction: share of links held out for validation.
    seed: the corpus is a deterministic function of all arguments.

  Returns:
    The :class:`PairCorpus`.

  Raises:
    ValueError: naming the argument, for a count below 1 or more clusters than pages.
  """
  for name, value in (
    ("num_pages", num_pages),
    ("num_links", num_links),
    ("num_clusters", num_clusters),
    ("words_per_cluster", words_per_cluster),
  ):
    _checks.check_positive_int("synthetic_link_corpus", name, value)
  if num_clusters > num_pages:
    raise ValueError(f"synthetic_link_corpus: `num_clusters` ({num_clusters}) exceeds `num_pages` ({num_pages})")
  if not (own_cluster >= 0 and neighbour_cluster >= 0 and own_cluster + neighbour_cluster <= 1):
    raise ValueError(
      "synthetic_link_corpus: `own_cluster` and `neighbour_cluster` must be probabilities summing to "
      f"at most 1, got {own_cluster}, {neighbour_cluster}"
    )
  rng = np.random.default_rng(seed)
  n, c = num_pages, num_clusters
  cluster = np.concatenate([np.arange(c), rng.integers(0, c, n - c)])  # every cluster non-empty
  rng.shuffle(cluster)

  # Features; ids are laid out as [pages | cluster words | noise words | categories].
  page_ids = np.arange(n, dtype=np.int32)[:, None]
  word_base, noise_base = n, n + c * words_per_cluster
  cat_base = noise_base + words_per_cluster * 4
  topical = word_base + cluster[:, None] * words_per_cluster + rng.integers(0, words_per_cluster, (n, 2))
  noise = noise_base + rng.integers(0, words_per_cluster * 4, (n, 1))
  words = np.concatenate([topical, noise], axis=1)
  words[rng.random(n) < 0.3, 2] = PAD  # not every title has a noise word
  subtopics = 4
  categories = np.stack(
    [
      cat_base + cluster,
      cat_base + c + cluster * subtopics + rng.integers(0, subtopics, n),
      cat_base + c * (1 + subtopics) + rng.integers(0, c, n),
    ],
    axis=1,
  )
  categories[rng.random(n) < 0.5, 2] = PAD
  vocab_size = int(cat_base + c * (2 + subtopics))
  pages = FeatureBags((page_ids, words.astype(np.int32), categories.astype(np.int32)), ("page", "ngrams", "categories"))

  # Links.
  popularity = _zipf_weights(rng, n, popularity_exponent)
  activity = _zipf_weights(rng, n, activity_exponent)
  src = rng.choice(n, size=num_links, p=activity / activity.sum())
  u = rng.random(num_links)
  shift = np.where(u < own_cluster, 0, np.where(u < own_cluster + neighbour_cluster, 1, -1))
  dst_cluster = np.where(shift >= 0, (cluster[src] + np.maximum(shift, 0)) % c, rng.integers(0, c, num_links))
  order = np.argsort(cluster, kind="stable")  # pages grouped by cluster
  start = np.searchsorted(cluster[order], np.arange(c + 1))
  cum = np.cumsum(popularity[order])
  before = np.where(start[:-1] > 0, cum[np.maximum(start[:-1] - 1, 0)], 0.0)
  mass = cum[start[1:] - 1] - before
  pick = before[dst_cluster] + rng.random(num_links) * mass[dst_cluster]
  pos = np.clip(np.searchsorted(cum, pick, side="right"), start[dst_cluster], start[dst_cluster + 1] - 1)
  dst = order[pos]
  # Distinct links in (source, target) order; one int64 key per link sorts ~20x faster than np.unique's rows.
  kept = src != dst
  keys = np.unique(src[kept].astype(np.int64) * n + dst[kept])
  links = np.stack([keys // n, keys % n], axis=1).astype(np.int32)
  pairs = Pairs(links[:, 0], links[:, 1], np.ones(len(links), np.float32))
  train, val = split_pairs(pairs, val_fraction, seed + 1)
  return PairCorpus(pages, pages, vocab_size, train, val, f"synthetic-{n}")
