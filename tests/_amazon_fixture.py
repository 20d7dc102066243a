"""Small Amazon review categories in the public files' formats, written from the seeded synthetic evolving graph.

2018: JSON lines; reviews with ``verified``/``style``, products with a flat ``category`` list. 2014: reviews with
``helpful``; products as Python dict literals (single quotes) with ``categories`` (a list of category paths). Both
use the same file names (``{c}_5.json.gz`` / ``reviews_{c}_5.json.gz`` and ``meta_{c}.json.gz``).
"""

import datetime
import gzip
import json
from pathlib import Path

import numpy as np

from bcjax.data import synthetic_evolving_graph

BASE = datetime.date(2014, 1, 1)


def category_graph(num_users=300, num_items=150, num_edges=4000, seed=2, five_star_after: float | None = 0.5):
  """The synthetic graph's edges, with every rating after the ``five_star_after`` time ratio set to 5 (so the edge
  rating task's evaluation windows hold one class), and its raw item attributes."""
  g = synthetic_evolving_graph(num_users, num_items, num_edges, seed=seed)
  rating = g.rating.copy()
  if five_star_after is not None:
    rating[int(five_star_after * len(rating)) :] = 5.0
  cats = {i: [] for i in range(g.num_items)}
  for owner, value in zip(g.item_attributes["category"].owner, g.item_attributes["category"].value):
    cats[int(owner)].append(g.item_attributes["category"].vocab[value])
  brand = {
    int(o): g.item_attributes["brand"].vocab[v]
    for o, v in zip(g.item_attributes["brand"].owner, g.item_attributes["brand"].value)
  }
  return g, rating, cats, brand


def write_category(
  folder: Path, category: str, release: str, *, meta: bool = True, reviews_name: str | None = None, **graph_kwargs
) -> tuple[Path, Path | None]:
  """Writes the category's reviews (and metadata) in ``release``'s format; returns their paths."""
  g, rating, cats, brand = category_graph(**graph_kwargs)
  folder.mkdir(parents=True, exist_ok=True)
  lines = []
  for u, i, r, t in zip(g.user, g.item, rating, g.time):
    day = BASE + datetime.timedelta(days=int(t))
    review = {
      "reviewerID": f"A{u:05d}",
      "asin": f"B{i:05d}",
      "overall": float(r),
      "reviewTime": f"{day.month:02d} {day.day}, {day.year}",
      "unixReviewTime": int(datetime.datetime(day.year, day.month, day.day).timestamp()),
      "reviewText": "fine",
      "summary": "ok",
      "reviewerName": "x",
    }
    review.update({"helpful": [0, 0]} if release == "2014" else {"verified": True, "style": {"Size:": " M"}})
    lines.append(json.dumps(review))
  name = reviews_name or (f"reviews_{category}_5.json.gz" if release == "2014" else f"{category}_5.json.gz")
  reviews = folder / name
  reviews.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
  if not meta:
    return reviews, None
  products = []
  for i in range(g.num_items):
    if release == "2014":
      paths = [["Musical Instruments", c] for c in cats[i]] or [["Musical Instruments"]]
      product = {
        "asin": f"B{i:05d}",
        "title": f"item {i}",
        "price": 9.99,
        "salesRank": {"Musical Instruments": i},
        "categories": paths,
      }
      if i in brand:
        product["brand"] = brand[i]
      products.append(repr(product))  # Python literal, single quotes: the 2014 dump
    else:
      entries = ["Musical Instruments", *cats[i], '<span class="a-size-base">x</span>']
      products.append(
        json.dumps(
          {
            "asin": f"B{i:05d}",
            "title": f"item {i}",
            "category": entries,
            "brand": brand.get(i, ""),
            "main_cat": "Musical Instruments",
            "also_buy": [],
          }
        )
      )
  meta_path = folder / f"meta_{category}.json.gz"
  meta_path.write_bytes(gzip.compress(("\n".join(products) + "\n").encode()))
  return reviews, meta_path


def expected_days(t: np.ndarray) -> np.ndarray:
  days = [BASE + datetime.timedelta(days=int(x)) for x in t]
  return np.array([d.year * 10000 + d.month * 100 + d.day for d in days])
