"""MovieLens ratings in their public formats (GroupLens): 100K, 1M, 10M, 20M and latest-small.

Reference: F. M. Harper and J. A. Konstan, "The MovieLens Datasets: History and Context", ACM TiiS 2015.
https://grouplens.org/datasets/movielens/
"""

import csv
import io
import os
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bcjax.data._download import default_cache_dir, extract_zip, fetch

VARIANTS = ("100k", "1m", "10m", "20m", "latest-small")
URLS = {
    "100k": "https://files.grouplens.org/datasets/movielens/ml-100k.zip",
    "1m": "https://files.grouplens.org/datasets/movielens/ml-1m.zip",
    "10m": "https://files.grouplens.org/datasets/movielens/ml-10m.zip",
    "20m": "https://files.grouplens.org/datasets/movielens/ml-20m.zip",
    "latest-small": "https://files.grouplens.org/datasets/movielens/ml-latest-small.zip",
}
# Folder names inside the official archives.
FOLDERS = {"100k": "ml-100k", "1m": "ml-1m", "10m": "ml-10M100K", "20m": "ml-20m", "latest-small": "ml-latest-small"}
GENRES_100K = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
               "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War",
               "Western")
_YEAR = re.compile(r"\((\d{4})\)\s*$")


class Ratings(NamedTuple):
  """Explicit ratings with dense 0-based ids.

  ``user``, ``item``, ``rating``, ``timestamp`` are aligned arrays [E] in file order. Users are the distinct users of
  the ratings; items are all movies of the movie file (some may have no rating). ``user_ids``/``item_ids`` map dense
  ids back to the dataset's ids. ``item_genres[i]`` holds indices into ``genre_names``; ``item_year`` is -1 when the
  title carries no year. ``user_features`` holds the demographic columns of the user file (age, gender, occupation)
  as arrays [n_users] where the variant has one (100K, 1M), else an empty dict.
  """
  user: np.ndarray  # [E] int32
  item: np.ndarray  # [E] int32
  rating: np.ndarray  # [E] float32
  timestamp: np.ndarray  # [E] int64, unix seconds
  user_ids: np.ndarray  # [n_users] original ids
  item_ids: np.ndarray  # [n_items] original ids
  item_titles: tuple[str, ...]
  item_year: np.ndarray  # [n_items] int32
  item_genres: tuple[tuple[int, ...], ...]
  genre_names: tuple[str, ...]
  user_features: dict

  @property
  def num_users(self) -> int:
    return len(self.user_ids)

  @property
  def num_items(self) -> int:
    return len(self.item_ids)


def _lines(path: Path, encoding: str):
  with open(path, encoding=encoding, newline="") as f:
    for lineno, line in enumerate(f, start=1):
      line = line.rstrip("\r\n")
      if line.strip():
        yield lineno, line


def _fail(path: Path, lineno: int, what: str, line: str):
  raise ValueError(f"{path}, line {lineno}: {what}: {line[:120]!r}")


def _read_ratings(path: Path, kind: str):
  """Rows (user, item, rating, timestamp) of u.data (whitespace), ratings.dat ('::') or ratings.csv (header)."""
  rows = []
  for lineno, line in _lines(path, "utf-8"):
    if kind == "csv":
      if lineno == 1 and line.lower().startswith("userid"):
        continue
      fields = line.split(",")
    elif kind == "dat":
      fields = line.split("::")
    else:
      fields = line.split()  # u.data: tab-separated, with stray spaces in the public file
    if len(fields) != 4:
      _fail(path, lineno, f"expected 4 fields (user, item, rating, timestamp), got {len(fields)}", line)
    try:
      user, item, rating, ts = int(fields[0]), int(fields[1]), float(fields[2]), int(fields[3])
    except ValueError:
      _fail(path, lineno, "non-numeric rating field", line)
    if not np.isfinite(rating):
      _fail(path, lineno, "non-finite rating", line)
    rows.append((user, item, rating, ts))
  if not rows:
    raise ValueError(f"{path}: no ratings")
  return rows


def _year(title: str, release: str = "") -> int:
  m = _YEAR.search(title)
  if m:
    return int(m.group(1))
  m = re.search(r"(\d{4})$", release.strip())
  return int(m.group(1)) if m else -1


def _read_items_100k(path: Path, genre_path: Path):
  genres = GENRES_100K
  if genre_path.exists():
    names = [line.split("|")[0] for _, line in _lines(genre_path, "latin-1")]
    genres = tuple(names)
  items = []
  for lineno, line in _lines(path, "latin-1"):
    fields = line.split("|")
    if len(fields) != 5 + len(genres):
      _fail(path, lineno, f"expected {5 + len(genres)} '|'-separated fields, got {len(fields)}", line)
    try:
      flags = [int(x) for x in fields[5:]]
      movie = int(fields[0])
    except ValueError:
      _fail(path, lineno, "non-integer id or genre flag", line)
    items.append((movie, fields[1], _year(fields[1], fields[2]), tuple(g for g, f in enumerate(flags) if f)))
  return items, genres


def _read_items_named(path: Path, kind: str):
  """movies.dat ('id::title::A|B', latin-1 in 1M) or movies.csv (quoted CSV with header)."""
  raw = []
  if kind == "csv":
    with open(path, encoding="utf-8", newline="") as f:
      for lineno, fields in enumerate(csv.reader(f), start=1):
        if lineno == 1 and fields and fields[0].lower() == "movieid":
          continue
        if fields:
          raw.append((lineno, fields, ",".join(fields)))
  else:
    data = path.read_bytes()
    try:
      text = data.decode("utf-8")
    except UnicodeDecodeError:
      text = data.decode("latin-1")  # ml-1m's movies.dat
    for lineno, line in enumerate(io.StringIO(text, newline=None), start=1):
      line = line.rstrip("\n")
      if line.strip():
        raw.append((lineno, line.split("::"), line))
  names: dict[str, int] = {}
  items = []
  for lineno, fields, line in raw:
    if len(fields) != 3:
      _fail(path, lineno, f"expected 3 fields (id, title, genres), got {len(fields)}", line)
    try:
      movie = int(fields[0])
    except ValueError:
      _fail(path, lineno, "non-integer movie id", line)
    tags = [] if fields[2] in ("", "(no genres listed)") else fields[2].split("|")
    items.append((movie, fields[1], _year(fields[1]), tuple(names.setdefault(t, len(names)) for t in tags)))
  return items, tuple(names)


def _read_users(path: Path, kind: str) -> dict[int, tuple]:
  users = {}
  for lineno, line in _lines(path, "latin-1"):
    fields = line.split("|") if kind == "100k" else line.split("::")
    if len(fields) != 5:
      _fail(path, lineno, f"expected 5 user fields, got {len(fields)}", line)
    try:
      if kind == "100k":  # id|age|gender|occupation|zip
        users[int(fields[0])] = (int(fields[1]), fields[2], fields[3])
      else:  # id::gender::age::occupation::zip
        users[int(fields[0])] = (int(fields[2]), fields[1], fields[3])
    except ValueError:
      _fail(path, lineno, "non-integer user id or age", line)
  return users


def detect_variant(path: str | os.PathLike) -> str:
  """The MovieLens variant of an extracted folder, from the files it holds."""
  path = Path(path)
  if (path / "u.data").exists():
    return "100k"
  if (path / "ratings.dat").exists():
    return "1m" if (path / "users.dat").exists() else "10m"
  if (path / "ratings.csv").exists():
    return "latest-small" if "small" in path.name else "20m"
  raise FileNotFoundError(f"{path} holds no MovieLens ratings file (u.data, ratings.dat or ratings.csv)")


def load_movielens(path: str | os.PathLike) -> Ratings:
  """Loads an extracted MovieLens folder (any of :data:`VARIANTS`, detected from its files).

  Raises:
    FileNotFoundError: the folder or one of its required files is missing.
    ValueError: naming the file and line of a malformed line, or a rating of a movie the movie file lacks.
  """
  path = Path(path)
  if not path.is_dir():
    raise FileNotFoundError(f"MovieLens folder {path} does not exist")
  variant = detect_variant(path)
  if variant == "100k":
    ratings_file, items_file = path / "u.data", path / "u.item"
    rows = _read_ratings(ratings_file, "ws")
    if not items_file.exists():
      raise FileNotFoundError(f"{items_file} is missing")
    items, genres = _read_items_100k(items_file, path / "u.genre")
    users_file, user_kind = path / "u.user", "100k"
  elif variant in ("1m", "10m"):
    ratings_file, items_file = path / "ratings.dat", path / "movies.dat"
    rows = _read_ratings(ratings_file, "dat")
    if not items_file.exists():
      raise FileNotFoundError(f"{items_file} is missing")
    items, genres = _read_items_named(items_file, "dat")
    users_file, user_kind = path / "users.dat", "1m"
  else:
    ratings_file, items_file = path / "ratings.csv", path / "movies.csv"
    rows = _read_ratings(ratings_file, "csv")
    if not items_file.exists():
      raise FileNotFoundError(f"{items_file} is missing")
    items, genres = _read_items_named(items_file, "csv")
    users_file, user_kind = None, None

  items.sort(key=lambda t: t[0])
  item_ids = np.array([t[0] for t in items], np.int64)
  if len(np.unique(item_ids)) != len(item_ids):
    raise ValueError(f"{items_file}: duplicate movie ids")
  table = np.asarray(rows, dtype=np.float64)
  raw_user, raw_item = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
  user_ids, user = np.unique(raw_user, return_inverse=True)
  item = np.searchsorted(item_ids, raw_item)
  unknown = (item >= len(item_ids)) | (item_ids[np.minimum(item, len(item_ids) - 1)] != raw_item)
  if unknown.any():
    raise ValueError(f"{ratings_file}: {int(unknown.sum())} rating(s) of movies absent from {items_file.name} "
                     f"(first: movie id {int(raw_item[unknown][0])})")

  user_features = {}
  if users_file is not None and users_file.exists():
    users = _read_users(users_file, user_kind)
    missing = [u for u in user_ids if int(u) not in users]
    if missing:
      raise ValueError(f"{users_file}: no row for user id {int(missing[0])} (and {len(missing) - 1} more)")
    ages, genders, jobs = zip(*(users[int(u)] for u in user_ids))
    user_features = {"age": np.array(ages, np.int32), "gender": np.array(genders), "occupation": np.array(jobs)}
  return Ratings(user=user.astype(np.int32), item=item.astype(np.int32), rating=table[:, 2].astype(np.float32),
                 timestamp=table[:, 3].astype(np.int64), user_ids=user_ids, item_ids=item_ids,
                 item_titles=tuple(t[1] for t in items), item_year=np.array([t[2] for t in items], np.int32),
                 item_genres=tuple(t[3] for t in items), genre_names=tuple(genres), user_features=user_features)


def movielens_dir(variant: str, data_dir: str | os.PathLike | None = None, *, download: bool = False) -> Path:
  """Locates an extracted MovieLens folder: ``data_dir`` itself, or its sub-folder named as in the official archive,
  or the download cache (downloading and extracting the official zip when ``download``).

  Raises:
    FileNotFoundError: not found and ``download`` is False (the message says where to put the files).
    ConnectionError: ``download`` is True but the machine is offline.
  """
  if variant not in VARIANTS:
    raise ValueError(f"movielens_dir: `variant` must be one of {VARIANTS}, got {variant!r}")
  roots = [Path(data_dir)] if data_dir is not None else []
  roots.append(default_cache_dir() / "movielens")
  for root in roots:
    for candidate in (root, root / FOLDERS[variant]):
      try:
        if detect_variant(candidate) == variant:
          return candidate
      except FileNotFoundError:
        continue
  if not download:
    raise FileNotFoundError(f"MovieLens {variant} not found in {' or '.join(map(str, roots))}; pass the extracted "
                            f"folder, or download {URLS[variant]} (download=True uses the cache {roots[-1]})")
  archive = fetch(URLS[variant], roots[-1])
  return extract_zip(archive, roots[-1]) / FOLDERS[variant]
