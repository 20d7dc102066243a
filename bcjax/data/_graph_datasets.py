"""Named evolving-graph datasets: the synthetic default, MovieLens 100K / 1M and Amazon 2018 categories."""

import os

import numpy as np

from bcjax.data._amazon import load_amazon
from bcjax.data._evolving import EvolvingGraph, evolving_graph
from bcjax.data._movielens import Ratings, load_movielens, movielens_dir
from bcjax.data._synthetic_graph import synthetic_evolving_graph

GRAPH_DATASETS = ("synthetic", "movielens-100k", "movielens-1m", "amazon-<Category>")


def movielens_graph(ratings: Ratings, *, min_count: int = 5, name: str = "movielens") -> EvolvingGraph:
  """MovieLens ratings in the evolving-graph schema: genres are the item attribute bags (the role of Amazon's
  categories); gender, occupation and age are user attribute bags; time is the rating's unix second."""
  item_attributes = {"genre": {i: [ratings.genre_names[g] for g in genres]
                               for i, genres in enumerate(ratings.item_genres)}}
  user_attributes = {}
  for key, values in ratings.user_features.items():
    user_attributes[key] = {u: [f"{key}={v}"] for u, v in enumerate(np.asarray(values).tolist())}
  return evolving_graph(ratings.user, ratings.item, ratings.rating, ratings.timestamp,
                        item_attributes=item_attributes, user_attributes=user_attributes, min_count=min_count,
                        name=name)


def load_graph_dataset(name: str, data_dir: str | os.PathLike | None = None, *, download: bool = False,
                       seed: int = 0, **synthetic_kwargs) -> EvolvingGraph:
  """``synthetic`` (seeded; ``synthetic_kwargs`` go to :func:`synthetic_evolving_graph`), ``movielens-100k``,
  ``movielens-1m`` (from ``data_dir`` or the cache) or ``amazon-<Category>`` (2018 files, e.g.
  ``amazon-Musical_Instruments``)."""
  if name == "synthetic":
    return synthetic_evolving_graph(seed=seed, **synthetic_kwargs)
  if name in ("movielens-100k", "movielens-1m"):
    variant = name.split("-")[1]
    return movielens_graph(load_movielens(movielens_dir(variant, data_dir, download=download)), name=name)
  if name.startswith("amazon-") and len(name) > len("amazon-"):
    return load_amazon(name[len("amazon-"):], data_dir, download=download)
  raise ValueError(f"load_graph_dataset: unknown dataset {name!r}; choose from {', '.join(GRAPH_DATASETS)}")
