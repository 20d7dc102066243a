"""Named evolving-graph datasets.

The synthetic default, every MovieLens variant and Amazon categories of either release.
"""

import os

import numpy as np

from bcjax.data._amazon import load_amazon
from bcjax.data._evolving import EvolvingGraph, evolving_graph
from bcjax.data._movielens import VARIANTS as ML_VARIANTS
from bcjax.data._movielens import Ratings, load_movielens, movielens_dir
from bcjax.data._synthetic_graph import synthetic_evolving_graph

GRAPH_DATASETS = ("synthetic", *(f"movielens-{v}" for v in ML_VARIANTS), "amazon-<Category>")
"""The names :func:`load_graph_dataset` accepts: the synthetic graph, each MovieLens variant, and
``amazon-<Category>``."""


def movielens_graph(ratings: Ratings, *, min_count: int = 5, name: str = "movielens") -> EvolvingGraph:
  """MovieLens ratings in the evolving-graph schema.

  Genres are the item attribute bags (the role of Amazon's categories); gender, occupation and age are user attribute
  bags where the variant has a user file (100K, 1M); time is the rating's unix second. The graph's notes say which user
  attributes the variant lacks.

  Args:
    ratings: the MovieLens :class:`Ratings`.
    min_count: an attribute value is kept when it occurs at least this often.
    name: the graph's name.

  Returns:
    The :class:`EvolvingGraph`.
  """
  item_attributes = {
    "genre": {i: [ratings.genre_names[g] for g in genres] for i, genres in enumerate(ratings.item_genres)}
  }
  user_attributes = {}
  for key, values in ratings.user_features.items():
    user_attributes[key] = {u: [f"{key}={v}"] for u, v in enumerate(np.asarray(values).tolist())}
  notes = [
    f"MovieLens {ratings.variant or '?'}: {len(ratings.user)} ratings, {ratings.num_users} users, "
    f"{ratings.num_items} movies"
  ]
  if not ratings.user_features:
    notes.append(f"MovieLens {ratings.variant or '?'} has no user file: no user attributes (age, gender, occupation)")
  return evolving_graph(
    ratings.user,
    ratings.item,
    ratings.rating,
    ratings.timestamp,
    item_attributes=item_attributes,
    user_attributes=user_attributes,
    min_count=min_count,
    name=name,
    notes=notes,
  )


def load_graph_dataset(
  name: str,
  data_dir: str | os.PathLike | None = None,
  *,
  download: bool = False,
  seed: int = 0,
  reviews: str | os.PathLike | None = None,
  meta: str | os.PathLike | None = None,
  **synthetic_kwargs,
) -> EvolvingGraph:
  """Loads an evolving-graph dataset by name.

  ``synthetic`` (seeded; ``synthetic_kwargs`` go to :func:`synthetic_evolving_graph`), ``movielens-<variant>`` for every
  variant :func:`load_movielens` reads (from ``data_dir`` or the cache) or ``amazon-<Category>`` (either release, from
  ``data_dir``, the cache, or explicit ``reviews``/``meta`` files).

  Args:
    name: ``synthetic``, ``movielens-<variant>`` or ``amazon-<Category>``.
    data_dir: where the files are.
    download: fetch missing files into the cache.
    seed: the synthetic graph's seed.
    reviews: an Amazon reviews file, instead of finding it.
    meta: an Amazon metadata file, instead of finding it.
    **synthetic_kwargs: more arguments of :func:`synthetic_evolving_graph`.

  Returns:
    The :class:`EvolvingGraph`.

  Raises:
    ValueError: an unknown dataset name.
  """
  if name == "synthetic":
    return synthetic_evolving_graph(seed=seed, **synthetic_kwargs)
  if name.startswith("movielens-"):
    variant = name.removeprefix("movielens-")
    if variant not in ML_VARIANTS:
      raise ValueError(
        f"load_graph_dataset: unknown MovieLens variant {variant!r}; choose from {', '.join(ML_VARIANTS)}"
      )
    folder = movielens_dir(variant, data_dir, download=download)
    return movielens_graph(load_movielens(folder, variant), name=name)
  if name.startswith("amazon-") and len(name) > len("amazon-"):
    return load_amazon(name.removeprefix("amazon-"), data_dir, reviews=reviews, meta=meta, download=download)
  raise ValueError(f"load_graph_dataset: unknown dataset {name!r}; choose from {', '.join(GRAPH_DATASETS)}")
