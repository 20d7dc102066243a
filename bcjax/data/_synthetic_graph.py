"""A seeded synthetic evolving user–item graph: the embedded default of the BC-Aligner experiment.

The generator is built so that the intended task (link prediction) and the five consumer tasks all carry signal
that a graph embedding can pick up, and so that the graph keeps changing:

* items have categories and a brand; an item's latent factor is the mean of its categories' factors plus its
  brand's, its quality comes from its brand, and its rating spread from its main category;
* users belong to taste segments that set their initial interest, activity, positivity and retention; interests
  drift along a per-user direction over time, so later snapshots reward new models;
* users and items arrive over time and users churn; activity and item popularity follow power laws;
* optionally (``popularity_decay`` > 0) an item's popularity fades with its age, a product's life cycle, so what
  is bought shifts towards newer items; brands launch over time and new items favour young brands, so later
  snapshots hold attribute values that the first model never trained;
* an interaction picks an active user by activity and an available item by popularity times exp(affinity); its
  rating (1-5) rises with affinity, item quality and user positivity.

Interest drift and the life cycle are what make an old embedding model stale on later snapshots, as on the Amazon
data of the BC-Aligner paper (Fix-M_0 loses about a quarter of Recall@50 there).
"""

import numpy as np

from bcjax import _checks
from bcjax.data._evolving import EvolvingGraph, evolving_graph


def _zipf(rng, n: int, exponent: float) -> np.ndarray:
  return rng.permutation(np.arange(1, n + 1, dtype=np.float64) ** -exponent)


def _life_cycle(rng, item_arrival, brand_p, decay: float, lifetime: float):
  r"""Launch times of the items and each item's brand.

  Launch times of the items (those of the first day were launched in the span before it) and each item's brand: brands
  launch over time too, and a new item takes a brand launched by its arrival, weighted by the brand's size and, like
  item popularity, by :math:`(1 + \text{age} / \ell)^{-\gamma}` -- so new brands bring attribute values that an old
  model never trained, as on the Amazon data.
  """
  num_items, num_brands = len(item_arrival), len(brand_p)
  item_launch = np.where(item_arrival > 0.0, item_arrival, -rng.uniform(0.0, 1.0, num_items))
  brand_launch = np.where(rng.random(num_brands) < 0.5, 0.0, rng.uniform(0.0, 0.9, num_brands))
  brand_launch[np.argmax(brand_p)] = 0.0  # so the first day's items have a brand to take
  age = item_arrival[:, None] - brand_launch[None, :]
  weight = np.where(age >= 0, brand_p * (1.0 + np.maximum(age, 0.0) / lifetime) ** -decay, 0.0)
  cdf = np.cumsum(weight, axis=1) / weight.sum(axis=1, keepdims=True)
  brand = np.minimum((cdf < rng.random(num_items)[:, None]).sum(axis=1), num_brands - 1)
  return item_launch, brand


def synthetic_evolving_graph(
  num_users: int = 2000,
  num_items: int = 800,
  num_edges: int = 40_000,
  *,
  num_categories: int = 24,
  num_brands: int = 40,
  num_segments: int = 8,
  latent_dim: int = 8,
  drift: float = 1.5,
  popularity_decay: float = 0.0,
  item_lifetime: float = 0.1,
  affinity_scale: float = 1.5,
  num_days: int = 3650,
  seed: int = 0,
) -> EvolvingGraph:
  r"""Generates the graph; it is a deterministic function of its arguments.

  Args:
    num_users: users that may appear (those never drawn are absent).
    num_items: items that may appear (likewise).
    num_edges: interactions.
    num_categories: the category vocabulary (rare values fall below the min-count of 5 and vanish, as in the real
      data).
    num_brands: the brand vocabulary (likewise).
    num_segments: user taste segments.
    latent_dim: dimension of the latent factors.
    drift: how far a user's interest moves over the whole time span, in units of the factors' scale.
    popularity_decay: exponent :math:`\gamma` of an item's popularity over its age :math:`a` (time since launch,
      in units of the whole span): :math:`p_i(t) = p_i (1 + a / \ell)^{-\gamma}`, and brands launch over time with
      new items favouring young brands the same way. 0 (the default) keeps popularity fixed and every brand present
      from the start, draw for draw the generator of earlier releases.
    item_lifetime: the age scale :math:`\ell` of that decay.
    affinity_scale: inverse temperature of item choice.
    num_days: time resolution (ties within a day are kept in generation order).
    seed: PRNG seed.

  Returns:
    The :class:`EvolvingGraph`.

  Raises:
    ValueError: naming the argument, for a count below 1 or a rate outside its range.
  """
  for name, value in (
    ("num_users", num_users),
    ("num_items", num_items),
    ("num_edges", num_edges),
    ("num_categories", num_categories),
    ("num_brands", num_brands),
    ("num_segments", num_segments),
    ("latent_dim", latent_dim),
    ("num_days", num_days),
  ):
    _checks.check_positive_int("synthetic_evolving_graph", name, value)
  for name, rate in (("drift", drift), ("popularity_decay", popularity_decay), ("affinity_scale", affinity_scale)):
    _checks.as_float_in("synthetic_evolving_graph", name, rate, 0.0, np.inf)
  _checks.as_float_in("synthetic_evolving_graph", "item_lifetime", item_lifetime, 0.0, np.inf, low_open=True)
  if num_edges < 10 * max(num_users, num_items) ** 0.5:
    raise ValueError(
      f"synthetic_evolving_graph: `num_edges`={num_edges} is too small for {num_users} users and {num_items} items"
    )
  rng = np.random.default_rng(seed)
  L = latent_dim

  # Items: attributes -> factor, quality, spread.
  cat_factor = rng.normal(size=(num_categories, L))
  brand_factor = 0.5 * rng.normal(size=(num_brands, L))
  brand_quality = rng.normal(size=num_brands)
  cat_spread = rng.uniform(0.3, 1.5, size=num_categories)
  cat_p = _zipf(rng, num_categories, 0.7)
  main_cat = rng.choice(num_categories, num_items, p=cat_p / cat_p.sum())
  extra_cat = rng.choice(num_categories, (num_items, 2), p=cat_p / cat_p.sum())
  n_extra = rng.integers(0, 3, num_items)
  brand_p = _zipf(rng, num_brands, 0.9)
  brand = rng.choice(num_brands, num_items, p=brand_p / brand_p.sum())
  cats = [[main_cat[i], *extra_cat[i, : n_extra[i]]] for i in range(num_items)]
  factor_noise = 0.3 * rng.normal(size=(num_items, L))
  quality_noise = 0.4 * rng.normal(size=num_items)
  spread = cat_spread[main_cat]
  popularity = _zipf(rng, num_items, 0.8)
  item_arrival = np.where(rng.random(num_items) < 0.6, 0.0, rng.uniform(0.0, 0.95, num_items))
  if popularity_decay > 0:  # its own stream: without it, the generator of earlier releases draw for draw
    item_launch, brand = _life_cycle(
      np.random.default_rng([seed, 1]), item_arrival, brand_p, popularity_decay, item_lifetime
    )
  item_factor = np.stack([cat_factor[c].mean(0) for c in cats]) + brand_factor[brand] + factor_noise
  item_factor /= np.sqrt(L)
  quality = brand_quality[brand] + quality_noise

  # Users: segment -> interest, activity, positivity, retention; interests drift.
  seg_center = rng.normal(size=(num_segments, L))
  seg_activity = np.exp(rng.normal(0.0, 0.8, num_segments))
  seg_bias = rng.normal(0.0, 0.6, num_segments)
  seg_retention = rng.uniform(0.15, 1.0, num_segments)
  segment = rng.integers(0, num_segments, num_users)
  interest = (seg_center[segment] + 0.5 * rng.normal(size=(num_users, L))) / np.sqrt(L)
  direction = rng.normal(size=(num_users, L)) / np.sqrt(L)
  activity = seg_activity[segment] * _zipf(rng, num_users, 0.6)
  bias = seg_bias[segment] + 0.2 * rng.normal(size=num_users)
  join = np.where(rng.random(num_users) < 0.5, 0.0, rng.uniform(0.0, 0.95, num_users))
  leave = join + rng.exponential(seg_retention[segment])

  # Interactions, generated in time bins (the active user and item sets are fixed within a bin).
  t = np.sort(rng.random(num_edges))
  bins = np.minimum((t * 100).astype(int), 99)
  users, items, ratings = (np.empty(num_edges, np.int64) for _ in range(3))
  for b in range(100):
    rows = np.flatnonzero(bins == b)
    if rows.size == 0:
      continue
    now = (b + 0.5) / 100
    active = np.flatnonzero((join <= now) & (leave > now))
    if active.size == 0:
      active = np.flatnonzero(join <= now)
    p = activity[active] / activity[active].sum()
    u = active[rng.choice(active.size, rows.size, p=p)]
    available = np.flatnonzero(item_arrival <= now)
    taste = interest[u] + drift * now * direction[u]
    affinity = taste @ item_factor[available].T  # [rows, available]
    log_popularity = np.log(popularity[available])
    if popularity_decay > 0:
      log_popularity = log_popularity - popularity_decay * np.log1p((now - item_launch[available]) / item_lifetime)
    logits = log_popularity[None, :] + affinity_scale * affinity * np.sqrt(L)
    pick = np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)
    i = available[pick]
    score = (
      2.7
      + 0.8 * affinity[np.arange(rows.size), pick] * np.sqrt(L)
      + 0.6 * quality[i]
      + bias[u]
      + spread[i] * rng.normal(size=rows.size)
    )
    users[rows], items[rows], ratings[rows] = u, i, np.clip(np.rint(score), 1, 5)
  days = np.minimum((t * num_days).astype(np.int64), num_days - 1)
  item_attributes = {
    "category": {i: [f"category-{c}" for c in cats[i]] for i in range(num_items)},
    "brand": {i: [f"brand-{brand[i]}"] for i in range(num_items)},
  }
  return evolving_graph(
    users, items, ratings.astype(np.float32), days, item_attributes=item_attributes, name="synthetic"
  )
