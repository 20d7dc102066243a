"""Amazon review data (McAuley lab) as an evolving user–item graph.

5-core reviews plus product metadata, in either public release, told apart by the files' content rather than their
names.

* 2018 release (Ni, Li & McAuley 2019): ``{Category}_5.json.gz`` and ``meta_{Category}.json.gz``, one JSON object per
  line; reviews carry ``verified``/``vote``/``style``, products a flat ``category`` list and ``brand``.
* 2014 release (McAuley et al. 2015; He & McAuley 2016): ``reviews_{Category}_5.json.gz`` (JSON, with ``helpful``)
  and ``meta_{Category}.json.gz``, whose lines are Python literals (single quotes) with ``categories``, a list of
  category paths (a list of lists), and an optional ``brand``. Copies renamed to the 2018 names read the same.

Processing follows BC-Aligner's reference ``process.py``: the date comes from ``reviewTime`` ("10 30, 2016"; the
2014 release's ``unixReviewTime`` when it is absent) at day resolution; reviews of products without metadata are
dropped; duplicate reviews stay as multi-edges; brands (the empty brand counts) and categories (2018 entries
containing ``</span>`` removed; 2014 paths flattened to the set of their names) are kept when at least 5 items carry
them. Everything dropped is counted in the graph's ``notes``; reviews without a metadata file give a graph without
item attributes, announced there too.

References: J. Ni, J. Li, J. McAuley, "Justifying Recommendations using Distantly-Labeled Reviews and Fine-Grained
Aspects", EMNLP 2019 (https://nijianmo.github.io/amazon/); J. McAuley, C. Targett, Q. Shi, A. van den Hengel,
"Image-based Recommendations on Styles and Substitutes", SIGIR 2015 (https://jmcauley.ucsd.edu/data/amazon/).
"""

import ast
import datetime
import json
import os
import warnings
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from bcjax._textfile import DataFormatError, fail, iter_lines
from bcjax.data._download import default_cache_dir, download_hint, fetch
from bcjax.data._evolving import EvolvingGraph, evolving_graph

AMAZON_URLS = {
  "2018": (
    "https://mcauleylab.ucsd.edu/public_datasets/data/amazon_v2/categoryFilesSmall/{category}_5.json.gz",
    "https://mcauleylab.ucsd.edu/public_datasets/data/amazon_v2/metaFiles2/meta_{category}.json.gz",
  ),
  "2014": (
    "https://snap.stanford.edu/data/amazon/productGraph/categoryFiles/reviews_{category}_5.json.gz",
    "https://snap.stanford.edu/data/amazon/productGraph/categoryFiles/meta_{category}.json.gz",
  ),
}
AMAZON_RELEASES = RELEASES = tuple(AMAZON_URLS)
"""The Amazon review releases :func:`load_amazon` reads: ``2018`` (McAuley lab's v2) and ``2014`` (SNAP's)."""
CATEGORIES = ("Musical_Instruments", "Video_Games", "Grocery_and_Gourmet_Food")  # the paper's three
# Product fields the loader turns into item attributes; a metadata file with none of them is refused.
ATTRIBUTE_KEYS = ("category", "categories", "brand")
_REVIEW_2018 = {"verified", "vote", "style", "image"}
_REVIEW_2014 = {"helpful"}


class Reviews(NamedTuple):
  """Reviews in file order.

  Reviewer ids, product ids (asin), ratings, YYYYMMDD days, and the release the content matches ("2014", "2018", or
  "2014/2018" when no line carries a release-specific field).
  """

  users: list
  items: list
  ratings: list
  days: list
  release: str


class Metadata(NamedTuple):
  """Product attributes.

  ``attributes[group][asin]`` is a list of values ("category", "brand"), ``release`` the release the content matches,
  ``notes`` what was dropped on the way.
  """

  attributes: dict[str, dict[str, list[str]]]
  release: str
  notes: tuple[str, ...]


def _records(path: Path):
  """(line number, dict, 'json' or 'literal') per non-empty line; anything else is an error naming file and line."""
  for lineno, line in iter_lines(path):
    text = line.strip()
    if not text:
      continue
    try:
      record, syntax = json.loads(text), "json"
    except (json.JSONDecodeError, RecursionError):
      try:  # the 2014 metadata dumps are Python literals (single quotes)
        with warnings.catch_warnings():  # a stray backslash would warn of an invalid escape; the value decides
          warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
          record, syntax = ast.literal_eval(text), "literal"
      except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        fail(str(path), lineno, "neither a JSON object nor a Python dict literal", text)
    if not isinstance(record, dict):
      fail(str(path), lineno, f"expected an object (dict), got {type(record).__name__}", text)
    if not all(isinstance(k, str) for k in record):
      fail(str(path), lineno, "every field name must be a string", text)
    yield lineno, record, syntax


def _day_of(record: dict) -> int:
  """YYYYMMDD from 'reviewTime' ("10 30, 2016", the reference's choice) or else 'unixReviewTime' (UTC)."""
  if "reviewTime" in record:
    parts = str(record["reviewTime"]).replace(",", " ").split()
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
      raise ValueError(f"'reviewTime' {record['reviewTime']!r} is not 'MM DD, YYYY'")
    month, day, year = (int(p) for p in parts)
    datetime.date(year, month, day)  # raises ValueError for an impossible date
    return year * 10000 + month * 100 + day
  if "unixReviewTime" in record:
    stamp = record["unixReviewTime"]
    if isinstance(stamp, bool) or not isinstance(stamp, int):
      raise ValueError(f"'unixReviewTime' {stamp!r} is not an integer")
    try:
      date = datetime.datetime.fromtimestamp(stamp, datetime.UTC).date()
    except (OverflowError, OSError) as e:
      raise ValueError(f"'unixReviewTime' {stamp} is out of range") from e
    return date.year * 10000 + date.month * 100 + date.day
  raise ValueError("the review has neither 'reviewTime' nor 'unixReviewTime'")


def _release(seen_2014: bool, seen_2018: bool, path: Path, evidence: str) -> str:
  if seen_2014 and seen_2018:
    raise DataFormatError(f"{path}: lines of both releases ({evidence}); it is not one public file")
  return "2014" if seen_2014 else "2018" if seen_2018 else "2014/2018"


def read_reviews(path: str | os.PathLike) -> Reviews:
  """Reads a reviews file of either release (gzipped or plain JSON lines).

  Args:
    path: the reviews file (gzipped or plain JSON lines).

  Returns:
    The :class:`Reviews`, in file order.

  Raises:
    DataFormatError: a malformed line (file and line), or a file without reviews.
  """
  path = Path(path)
  users, items, ratings, days = [], [], [], []
  seen_2014 = seen_2018 = False
  for lineno, r, _ in _records(path):
    missing = [k for k in ("reviewerID", "asin", "overall") if k not in r]
    if missing:
      fail(str(path), lineno, f"review lacks the field(s) {missing} (has {sorted(r)[:12]})")
    rating = r["overall"]
    if isinstance(rating, bool) or not isinstance(rating, (int, float)) or not 0 <= rating <= 5:
      fail(str(path), lineno, f"'overall' must be a rating in [0, 5], got {rating!r}")
    try:
      day = _day_of(r)
    except ValueError as e:
      fail(str(path), lineno, str(e))
    seen_2014 |= bool(_REVIEW_2014 & r.keys())
    seen_2018 |= bool(_REVIEW_2018 & r.keys())
    users.append(str(r["reviewerID"]))
    items.append(str(r["asin"]))
    ratings.append(float(rating))
    days.append(day)
  if not users:
    raise DataFormatError(f"{path}: no reviews")
  return Reviews(users, items, ratings, days, _release(seen_2014, seen_2018, path, "'helpful' and 'verified'"))


def _string_list(path: Path, lineno: int, key: str, value) -> list[str]:
  if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
    fail(str(path), lineno, f"'{key}' must be a list of strings, got {type(value).__name__} {str(value)[:60]}")
  return value


def read_metadata(path: str | os.PathLike) -> Metadata:
  """Reads a product metadata file of either release.

  Brand and category bags per asin (a later line for the same asin wins). 2018's ``category`` loses its ``</span>``
  entries (the reference's filter); 2014's ``categories`` paths are flattened to the distinct names on them.

  Args:
    path: the metadata file (gzipped or plain JSON lines).

  Returns:
    The :class:`Metadata`.

  Raises:
    DataFormatError: a malformed line (file and line), a field of the wrong type, lines of both releases, or a file
      whose products carry none of :data:`ATTRIBUTE_KEYS` (the error lists the keys it found).
  """
  path = Path(path)
  category, brand = {}, {}
  seen_2014 = seen_2018 = False
  keys_found: Counter = Counter()
  dropped_span, with_attributes = 0, 0
  for lineno, r, _ in _records(path):
    if "asin" not in r:
      fail(str(path), lineno, f"product lacks the field 'asin' (has {sorted(r)[:12]})")
    keys_found.update(r.keys())
    asin = str(r["asin"])
    if "category" in r:
      values = _string_list(path, lineno, "category", r["category"])
      kept = [c for c in values if "</span>" not in c]
      dropped_span += len(values) - len(kept)
      category[asin] = kept
      seen_2018 = True
    if "categories" in r:
      paths = r["categories"]
      if not isinstance(paths, list):
        fail(str(path), lineno, f"'categories' must be a list of category paths, got {type(paths).__name__}")
      names = []
      for p in paths:
        names += _string_list(path, lineno, "categories", p)
      category[asin] = list(dict.fromkeys(names))
      seen_2014 = True
    if "brand" in r and not isinstance(r["brand"], str):
      fail(str(path), lineno, f"'brand' must be a string, got {type(r['brand']).__name__}")
    brand[asin] = [str(r.get("brand") or "")]  # a missing brand is the empty brand, which the reference counts
    with_attributes += any(k in r for k in ATTRIBUTE_KEYS)
  if not brand:
    raise DataFormatError(f"{path}: no products")
  if not with_attributes:
    common = ", ".join(k for k, _ in keys_found.most_common(20))
    raise DataFormatError(
      f"{path}: no product has any of the fields {ATTRIBUTE_KEYS} that become item attributes; "
      f"the keys found are: {common}"
    )
  release = _release(seen_2014, seen_2018, path, "2014 'categories' and 2018 'category'")
  notes = []
  if dropped_span:
    notes.append(f"{path.name}: {dropped_span} category entries containing '</span>' dropped (the reference's filter)")
  no_category = len(brand) - len(category)
  if no_category:
    notes.append(f"{path.name}: {no_category} of {len(brand)} products have no category field (empty category bag)")
  return Metadata({"category": category, "brand": brand}, release, tuple(notes))


def _first_file(folders, names) -> Path | None:
  return next((f / n for f in folders for n in names if (f / n).is_file()), None)


def amazon_files(
  category: str, data_dir: str | os.PathLike | None = None, *, download: bool = False, release: str = "2018"
) -> tuple[Path, Path | None]:
  """Paths of a category's 5-core reviews and metadata.

  Paths of a category's 5-core reviews and metadata in ``data_dir`` (or its ``category`` sub-folder) or the cache, under
  either release's names (``{category}_5.json.gz`` / ``reviews_{category}_5.json.gz``, and ``meta_{category}.json.gz``;
  plain ``.json`` too). Missing files are fetched from ``release``'s site when ``download``. The metadata path is None
  when there is none (the graph then has no item attributes).

  Args:
    category: the category, e.g. ``Video_Games``.
    data_dir: where to look first (the folder or its ``category`` sub-folder).
    download: fetch missing files into the cache.
    release: the release to download: ``2018`` or ``2014``.

  Returns:
    ``(reviews path, metadata path or None)``.

  Raises:
    FileNotFoundError: no reviews file and ``download`` is False (the message lists where it looked).
  """
  if release not in RELEASES:
    raise ValueError(f"amazon_files: `release` must be one of {RELEASES}, got {release!r}")
  category = category.removeprefix("reviews_").removesuffix("_5")
  cache = default_cache_dir() / "amazon" / category
  folders = ([Path(data_dir), Path(data_dir) / category] if data_dir is not None else []) + [cache]
  review_names = [f"{p}{category}_5.json{z}" for p in ("", "reviews_") for z in (".gz", "")]
  meta_names = [f"meta_{category}.json{z}" for z in (".gz", "")]
  reviews, meta = _first_file(folders, review_names), _first_file(folders, meta_names)
  urls = tuple(u.format(category=category) for u in AMAZON_URLS[release])
  if reviews is None:
    if not download:
      raise FileNotFoundError(
        f"amazon_files: no reviews file ({' or '.join(review_names[::2])}) in "
        f"{', '.join(map(str, folders))}; pass --data-dir or --reviews/--meta, or fetch {urls[0]} with "
        f"{download_hint(cache)}"
      )
    reviews = fetch(urls[0], cache)
  if meta is None and download:
    meta = fetch(urls[1], cache)
  return reviews, meta


def load_amazon(
  category: str | None = None,
  data_dir: str | os.PathLike | None = None,
  *,
  reviews: str | os.PathLike | None = None,
  meta: str | os.PathLike | None = None,
  download: bool = False,
  release: str = "2018",
  min_count: int = 5,
) -> EvolvingGraph:
  """A category's reviews with brand and category bags, as an evolving graph.

  A category's reviews with brand and category bags (see :mod:`bcjax.data._amazon`), from ``reviews``/``meta`` paths or
  found by :func:`amazon_files`. Without metadata the graph has no item attributes; the graph's ``notes`` say so, and
  count every review, product or category entry that was dropped.

  Args:
    category: the category (to find the files).
    data_dir: where to look first.
    reviews: the reviews file, instead of finding it.
    meta: the metadata file, instead of finding it.
    download: fetch missing files into the cache.
    release: the release to download.
    min_count: an attribute value is kept when it occurs at least this often.

  Returns:
    The :class:`EvolvingGraph`.

  Raises:
    ValueError: neither a category nor a reviews file.
    FileNotFoundError: a reviews or metadata file that does not exist.
    DataFormatError: a malformed file (file and line).
  """
  if reviews is None:
    if category is None:
      raise ValueError("load_amazon: pass a `category` (with `data_dir` or `download`) or a `reviews` file")
    reviews, found_meta = amazon_files(category, data_dir, download=download, release=release)
    meta = meta if meta is not None else found_meta
  reviews = Path(reviews)
  if not reviews.is_file():
    raise FileNotFoundError(f"load_amazon: reviews file {reviews} does not exist")
  data = read_reviews(reviews)
  name = f"amazon-{category or reviews.name.split('.')[0].removeprefix('reviews_').removesuffix('_5')}"
  notes = [f"{reviews.name}: {len(data.users)} reviews, release {data.release} by content"]
  if meta is None:
    notes.append("no metadata file: items have no attributes (no brand or category bags)")
    return evolving_graph(
      data.users, data.items, data.ratings, data.days, min_count=min_count, name=name, notes=tuple(notes)
    )
  meta = Path(meta)
  if not meta.is_file():
    raise FileNotFoundError(f"load_amazon: metadata file {meta} does not exist")
  products = read_metadata(meta)
  notes.append(f"{meta.name}: {len(products.attributes['brand'])} products, release {products.release} by content")
  notes += products.notes
  known = products.attributes["brand"]
  keep = [i for i, asin in enumerate(data.items) if asin in known]
  if len(keep) < 2:
    raise DataFormatError(
      f"{reviews}: only {len(keep)} review(s) have a product in {meta}; are they the same category?"
    )
  if len(keep) < len(data.items):
    lost = len(set(data.items) - known.keys())
    notes.append(
      f"{len(data.items) - len(keep)} reviews of {lost} products without metadata dropped (the reference's rule)"
    )
  pick = lambda xs: [xs[i] for i in keep]
  return evolving_graph(
    pick(data.users),
    pick(data.items),
    pick(data.ratings),
    pick(data.days),
    item_attributes=products.attributes,
    min_count=min_count,
    name=name,
    notes=tuple(notes),
  )
