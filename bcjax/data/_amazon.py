"""Amazon Review Data (2018) as an evolving user–item graph: 5-core reviews plus product metadata.

Files (public, McAuley lab): ``{category}_5.json.gz`` (one JSON review per line) and ``meta_{category}.json.gz``
(one JSON product per line). Files named ``reviews_*`` belong to the 2014 release and are refused.
Processing follows BC-Aligner's reference ``process.py``: the date comes from ``reviewTime`` ("10 30, 2016") at day
resolution; reviews of products without metadata are dropped; duplicate reviews stay as multi-edges; brands (the
empty brand counts) and categories (entries containing ``</span>`` removed) are kept when at least 5 items carry them.

Reference: J. Ni, J. Li, J. McAuley, "Justifying Recommendations using Distantly-Labeled Reviews and Fine-Grained
Aspects", EMNLP 2019. https://nijianmo.github.io/amazon/
"""

import ast
import gzip
import json
import os
from pathlib import Path

from bcjax.data._download import default_cache_dir, fetch
from bcjax.data._evolving import EvolvingGraph, evolving_graph

AMAZON_URL = "https://mcauleylab.ucsd.edu/public_datasets/data/amazon_v2"
CATEGORIES = ("Musical_Instruments", "Video_Games", "Grocery_and_Gourmet_Food")  # the paper's three


def _records(path: Path):
  """(line number, dict) per non-empty line of a gzipped JSON-lines file; a bad line raises with file and line."""
  opener = gzip.open if path.suffix == ".gz" else open
  try:
    with opener(path, "rt", encoding="utf-8") as f:
      for lineno, line in enumerate(f, start=1):
        line = line.strip()
        if not line:
          continue
        try:
          record = json.loads(line)
        except json.JSONDecodeError:
          try:  # some metadata dumps are Python literals rather than JSON
            record = ast.literal_eval(line)
          except (ValueError, SyntaxError):
            raise ValueError(f"{path}, line {lineno}: not a JSON object: {line[:120]!r}") from None
        if not isinstance(record, dict):
          raise ValueError(f"{path}, line {lineno}: expected a JSON object, got {type(record).__name__}")
        yield lineno, record
  except (OSError, EOFError) as e:
    raise ValueError(f"{path}: cannot read the gzipped JSON lines ({e})") from e


def _day(review_time: str) -> int:
  """'10 30, 2016' -> 20161030 (the reference's YYYYMMDD integer)."""
  month, day, year = review_time.replace(",", "").split()
  month, day, year = int(month), int(day), int(year)
  if not (1 <= month <= 12 and 1 <= day <= 31):
    raise ValueError(review_time)
  return year * 10000 + month * 100 + day


def read_reviews(path: str | os.PathLike) -> tuple[list, list, list, list]:
  """(reviewer ids, asins, ratings, YYYYMMDD days) in file order."""
  path = Path(path)
  users, items, ratings, days = [], [], [], []
  for lineno, r in _records(path):
    try:
      user, item, rating, day = str(r["reviewerID"]), str(r["asin"]), float(r["overall"]), _day(r["reviewTime"])
    except KeyError as e:
      raise ValueError(f"{path}, line {lineno}: review lacks the field {e.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError):
      raise ValueError(f"{path}, line {lineno}: bad 'overall' or 'reviewTime' "
                       f"({r.get('overall')!r}, {r.get('reviewTime')!r})") from None
    users.append(user)
    items.append(item)
    ratings.append(rating)
    days.append(day)
  if not users:
    raise ValueError(f"{path}: no reviews")
  return users, items, ratings, days


def read_metadata(path: str | os.PathLike) -> dict[str, tuple[str, list[str]]]:
  """asin -> (brand, categories without ``</span>`` entries); a later line for the same asin wins."""
  path = Path(path)
  meta = {}
  for lineno, r in _records(path):
    if "asin" not in r:
      raise ValueError(f"{path}, line {lineno}: product lacks the field 'asin'")
    categories = r.get("category") or []
    if not isinstance(categories, list):
      raise ValueError(f"{path}, line {lineno}: 'category' must be a list, got {type(categories).__name__}")
    meta[str(r["asin"])] = (str(r.get("brand") or ""), [str(c) for c in categories if "</span>" not in str(c)])
  return meta


def amazon_files(category: str, data_dir: str | os.PathLike | None = None, *,
                 download: bool = False) -> tuple[Path, Path]:
  """Paths of ``{category}_5.json.gz`` and ``meta_{category}.json.gz``: in ``data_dir`` (or its ``category``
  sub-folder), else in the download cache; with ``download=True`` missing files are fetched into the cache."""
  if category.startswith("reviews_"):
    raise ValueError(f"amazon_files: {category!r} names the 2014 release; use the 2018 category name, e.g. "
                     f"'Musical_Instruments'")
  names = (f"{category}_5.json.gz", f"meta_{category}.json.gz")
  cache = default_cache_dir() / "amazon" / category
  folders = ([Path(data_dir), Path(data_dir) / category] if data_dir is not None else []) + [cache]
  found = []
  for name, sub in zip(names, ("categoryFilesSmall", "metaFiles2")):
    path = next((f / name for f in folders if (f / name).is_file()), None)
    if path is None:
      if not download:
        raise FileNotFoundError(f"amazon_files: {name} is not in {', '.join(map(str, folders))}; pass --data-dir "
                                f"with the 2018 files, or download=True to fetch {AMAZON_URL}/{sub}/{name}")
      path = fetch(f"{AMAZON_URL}/{sub}/{name}", cache)
    found.append(path)
  return found[0], found[1]


def load_amazon(category: str, data_dir: str | os.PathLike | None = None, *, download: bool = False,
                min_count: int = 5) -> EvolvingGraph:
  """The 2018 5-core reviews of ``category`` with brand and category bags (see the module docstring)."""
  reviews_path, meta_path = amazon_files(category, data_dir, download=download)
  users, items, ratings, days = read_reviews(reviews_path)
  meta = read_metadata(meta_path)
  keep = [i for i, asin in enumerate(items) if asin in meta]
  if len(keep) < 2:
    raise ValueError(f"{reviews_path}: only {len(keep)} review(s) have a product in {meta_path}")
  pick = lambda xs: [xs[i] for i in keep]  # noqa: E731
  return evolving_graph(pick(users), pick(items), pick(ratings), pick(days),
                        item_attributes={"category": {a: m[1] for a, m in meta.items()},
                                         "brand": {a: [m[0]] for a, m in meta.items()}},
                        min_count=min_count, name=f"amazon-{category}")
