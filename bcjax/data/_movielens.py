"""MovieLens ratings in their public formats (GroupLens): 100K, 1M, 10M, 20M and latest-small.

Reference: F. M. Harper and J. A. Konstan, "The MovieLens Datasets: History and Context", ACM TiiS 2015.
https://grouplens.org/datasets/movielens/
"""

import csv
import os
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bcjax._textfile import DECIMAL, INTEGER, DataFormatError, decode_text, fail, iter_lines, read_bytes
from bcjax.data._download import default_cache_dir, download_hint, extract_zip, fetch

VARIANTS = ("100k", "1m", "10m", "20m", "25m", "32m", "latest-small")
"""The MovieLens releases :func:`load_movielens` reads, by GroupLens' names (``ml-<variant>.zip``)."""
URLS = {v: f"https://files.grouplens.org/datasets/movielens/ml-{v}.zip" for v in VARIANTS}
# Folder names inside the official archives.
FOLDERS = {
  "100k": "ml-100k",
  "1m": "ml-1m",
  "10m": "ml-10M100K",
  "20m": "ml-20m",
  "25m": "ml-25m",
  "32m": "ml-32m",
  "latest-small": "ml-latest-small",
}
# SHA-256 of the fixed releases' archives (TensorFlow Datasets' url_checksums/movielens.txt); latest-small is
# re-released from time to time, so it has none.
SHA256 = {
  "100k": "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
  "1m": "a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
  "20m": "96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3",
  "25m": "8b21cfb7eb1706b4ec0aac894368d90acf26ebdfb6aced3ebd4ad5bd1eb9c6aa",
}
# Rows of ratings.csv in the fixed csv releases (GroupLens' READMEs), used when a folder has no README.txt.
CSV_RATINGS = {"20m": 20_000_263, "25m": 25_000_095, "32m": 32_000_204}
SMALL_MAX_RATINGS = 1_000_000
_README_NAME = re.compile(r"\((ml-[A-Za-z0-9-]+)\)")
GENRES_100K = (
  "unknown",
  "Action",
  "Adventure",
  "Animation",
  "Children's",
  "Comedy",
  "Crime",
  "Documentary",
  "Drama",
  "Fantasy",
  "Film-Noir",
  "Horror",
  "Musical",
  "Mystery",
  "Romance",
  "Sci-Fi",
  "Thriller",
  "War",
  "Western",
)
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
  variant: str = ""  # the release it was identified as, e.g. "100k"

  @property
  def num_users(self) -> int:
    return len(self.user_ids)

  @property
  def num_items(self) -> int:
    return len(self.item_ids)


def _fail(path: Path, lineno: int, what: str, line: str):
  fail(str(path), lineno, what, line)


CSV_HEADER = ("userId", "movieId", "rating", "timestamp")


def _int(text: str) -> int:
  """A plain ASCII decimal integer (Python's int() would also take '1_0', ' ١٢ ' or '+3')."""
  if not INTEGER.fullmatch(text):
    raise ValueError(text)
  return int(text)


def _float(text: str) -> float:
  """A plain ASCII decimal number."""
  if not DECIMAL.fullmatch(text):
    raise ValueError(text)
  return float(text)


def _read_ratings(path: Path, kind: str):
  """Rows (user, item, rating, timestamp) of u.data (whitespace), ratings.dat ('::') or ratings.csv (header)."""
  rows = []
  for lineno, line in iter_lines(path):
    if not line.strip():
      continue
    if kind == "csv":
      fields = line.split(",")
      if lineno == 1 and not INTEGER.fullmatch(fields[0].strip().lstrip("\ufeff")):
        # A header: read by position below, so its names must be GroupLens' in GroupLens' order.
        found = [f.strip().lstrip("\ufeff") for f in fields]
        if [f.lower() for f in found] != [f.lower() for f in CSV_HEADER]:
          raise DataFormatError(
            f"{path}: line 1: the header is {','.join(found)!r}; expected {','.join(CSV_HEADER)!r} "
            f"(GroupLens' columns, in that order)"
          )
        continue
    elif kind == "dat":
      fields = line.split("::")
    else:
      fields = line.split()  # u.data: tab-separated, with stray spaces in the public file
    if len(fields) != 4:
      _fail(path, lineno, f"expected 4 fields (user, item, rating, timestamp), got {len(fields)}", line)
    try:
      user, item, rating, ts = (
        _int(fields[0].strip()),
        _int(fields[1].strip()),
        _float(fields[2].strip()),
        _int(fields[3].strip()),
      )
    except ValueError:
      _fail(path, lineno, "non-numeric rating field", line)
    if not np.isfinite(rating):
      _fail(path, lineno, "non-finite rating", line)
    rows.append((user, item, rating, ts))
  if not rows:
    raise DataFormatError(f"{path}: no ratings")
  return rows


def _year(title: str, release: str = "") -> int:
  m = _YEAR.search(title)
  if m:
    return int(m.group(1))
  m = re.search(r"(\d{4})$", release.strip())
  return int(m.group(1)) if m else -1


def _read_items_100k(path: Path, genre_path: Path):
  genres: tuple[str, ...] = GENRES_100K
  if genre_path.exists():
    names = [line.split("|")[0] for _, line in iter_lines(genre_path, encoding="latin-1") if line.strip()]
    genres = tuple(names)
  items = []
  for lineno, line in iter_lines(path, encoding="latin-1"):
    if not line.strip():
      continue
    fields = line.split("|")
    if len(fields) != 5 + len(genres):
      _fail(path, lineno, f"expected {5 + len(genres)} '|'-separated fields, got {len(fields)}", line)
    try:
      flags = [_int(x) for x in fields[5:]]
      movie = _int(fields[0])
    except ValueError:
      _fail(path, lineno, "non-integer id or genre flag", line)
    if any(f not in (0, 1) for f in flags):
      _fail(path, lineno, "genre flags must be 0 or 1", line)
    items.append((movie, fields[1], _year(fields[1], fields[2]), tuple(g for g, f in enumerate(flags) if f)))
  if not items:
    raise DataFormatError(f"{path}: no movies")
  return items, genres


def _read_items_named(path: Path, kind: str):
  """movies.dat ('id::title::A|B', latin-1 in 1M) or movies.csv (quoted CSV with header)."""
  raw = []
  if kind == "csv":
    for lineno, line in iter_lines(path):
      if not line.strip():
        continue
      try:
        fields = next(csv.reader([line]))
      except csv.Error as e:
        _fail(path, lineno, f"malformed CSV ({e})", line)
      if lineno == 1 and fields and fields[0].lower() == "movieid":
        continue
      raw.append((lineno, fields, line))
  else:
    text = decode_text(read_bytes(path), str(path), ("utf-8", "latin-1"))  # ml-1m's movies.dat is Latin-1
    for lineno, line in enumerate(text.split("\n"), start=1):
      line = line.rstrip("\r")
      if line.strip():
        raw.append((lineno, line.split("::"), line))
  names: dict[str, int] = {}
  items = []
  for lineno, fields, line in raw:
    if len(fields) != 3:
      _fail(path, lineno, f"expected 3 fields (id, title, genres), got {len(fields)}", line)
    try:
      movie = _int(fields[0])
    except ValueError:
      _fail(path, lineno, "non-integer movie id", line)
    tags = [] if fields[2] in ("", "(no genres listed)") else fields[2].split("|")
    items.append((movie, fields[1], _year(fields[1]), tuple(names.setdefault(t, len(names)) for t in tags)))
  if not items:
    raise DataFormatError(f"{path}: no movies")
  return items, tuple(names)


def _read_users(path: Path, kind: str) -> dict[int, tuple]:
  users = {}
  for lineno, line in iter_lines(path, encoding="latin-1"):
    if not line.strip():
      continue
    fields = line.split("|") if kind == "100k" else line.split("::")
    if len(fields) != 5:
      _fail(path, lineno, f"expected 5 user fields, got {len(fields)}", line)
    try:
      if kind == "100k":  # id|age|gender|occupation|zip
        users[_int(fields[0])] = (_int(fields[1]), fields[2], fields[3])
      else:  # id::gender::age::occupation::zip
        users[_int(fields[0])] = (_int(fields[2]), fields[1], fields[3])
    except ValueError:
      _fail(path, lineno, "non-integer user id or age", line)
  return users


def _count_lines(path: Path) -> int:
  """Newline-terminated lines of a (possibly huge) file, counted in 1 MiB blocks."""
  count = 0
  with open(path, "rb") as f:
    while block := f.read(1 << 20):
      count += block.count(b"\n")
  return count


def _csv_variant(path: Path) -> tuple[str, str]:
  """(variant, evidence) of a folder with ratings.csv.

  The dataset name its README gives (e.g. 'This dataset (ml-20m) ...'), else the number of ratings, which differs
  between the fixed releases.
  """
  readme = path / "README.txt"
  if readme.is_file():
    match = _README_NAME.search(readme.read_bytes()[:4096].decode("utf-8", "replace"))
    if match:
      name = match.group(1).lower()
      variant = next((v for v, folder in FOLDERS.items() if folder.lower() == name), None)
      if variant is not None:
        return variant, f"{readme.name} names it {name}"
      return name, f"{readme.name} names it {name}, a release bcjax does not know"
  rows = max(_count_lines(path / "ratings.csv") - 1, 0)
  for variant, count in CSV_RATINGS.items():
    if rows == count:
      return variant, f"ratings.csv has {rows:,} ratings, as the {variant} release"
  if rows <= SMALL_MAX_RATINGS:
    return "latest-small", f"ratings.csv has {rows:,} ratings (no README.txt; small, so taken as latest-small)"
  return "unknown", f"ratings.csv has {rows:,} ratings, the count of no fixed release, and there is no README.txt"


def identify(path: str | os.PathLike) -> tuple[str, str]:
  """(variant, evidence): the MovieLens variant of an extracted folder.

  From the files it holds and their content, never from the folder's name. Raises FileNotFoundError when it holds no
  ratings file.

  Args:
    path: the extracted folder.

  Returns:
    ``(variant, evidence)``: the variant and what identified it.

  Raises:
    FileNotFoundError: a folder without a ratings file.
  """
  path = Path(path)
  if (path / "u.data").is_file():
    return "100k", "u.data (tab-separated, with u.item and u.user)"
  if (path / "ratings.dat").is_file():
    if (path / "users.dat").is_file():
      return "1m", "ratings.dat with users.dat"
    return "10m", "ratings.dat without users.dat"
  if (path / "ratings.csv").is_file():
    return _csv_variant(path)
  raise FileNotFoundError(f"{path} holds no MovieLens ratings file (u.data, ratings.dat or ratings.csv)")


def detect_variant(path: str | os.PathLike) -> str:
  """The MovieLens variant of an extracted folder, from its files and their content (see :func:`identify`)."""
  return identify(path)[0]


def load_movielens(path: str | os.PathLike, variant: str | None = None) -> Ratings:
  """Loads an extracted MovieLens folder (any of :data:`VARIANTS`, identified from its files and content).

  Args:
    path: the folder.
    variant: the variant the caller expects; when the folder holds another one, an error names what was found.

  Returns:
    The :class:`Ratings`.

  Raises:
    FileNotFoundError: the folder or one of its required files is missing.
    DataFormatError: (a ValueError) naming the file and line of a malformed line, a rating of a movie the movie file
      lacks, or a folder that holds another variant than ``variant``.
  """
  path = Path(path)
  if not path.is_dir():
    raise FileNotFoundError(f"MovieLens folder {path} does not exist")
  if variant is not None and variant not in VARIANTS:
    raise ValueError(f"load_movielens: `variant` must be one of {VARIANTS}, got {variant!r}")
  found, evidence = identify(path)
  if variant is not None and found != variant:
    raise DataFormatError(f"{path} holds MovieLens {found} ({evidence}), not the requested {variant}")
  if found not in VARIANTS:
    raise DataFormatError(f"{path}: {evidence}; pass a folder of one of {VARIANTS}")
  if found == "100k":
    ratings_file, items_file = path / "u.data", path / "u.item"
    rows = _read_ratings(ratings_file, "ws")
    if not items_file.exists():
      raise FileNotFoundError(f"{items_file} is missing")
    items, genres = _read_items_100k(items_file, path / "u.genre")
    users_file, user_kind = path / "u.user", "100k"
  elif found in ("1m", "10m"):
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
    duplicate = int(item_ids[np.flatnonzero(np.diff(item_ids) == 0)[0]])
    raise DataFormatError(f"{items_file}: duplicate movie id {duplicate}")
  table = np.asarray(rows, dtype=np.float64)
  raw_user, raw_item = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
  user_ids, user = np.unique(raw_user, return_inverse=True)
  item = np.searchsorted(item_ids, raw_item)
  unknown = (item >= len(item_ids)) | (item_ids[np.minimum(item, len(item_ids) - 1)] != raw_item)
  if unknown.any():
    raise DataFormatError(
      f"{ratings_file}: {int(unknown.sum())} rating(s) of movies absent from {items_file.name} "
      f"(first: movie id {int(raw_item[unknown][0])})"
    )

  user_features = {}
  if users_file is not None and user_kind is not None and users_file.exists():
    users = _read_users(users_file, user_kind)
    missing = [u for u in user_ids if int(u) not in users]
    if missing:
      raise DataFormatError(f"{users_file}: no row for user id {int(missing[0])} (and {len(missing) - 1} more)")
    ages, genders, jobs = zip(*(users[int(u)] for u in user_ids))
    user_features = {"age": np.array(ages, np.int32), "gender": np.array(genders), "occupation": np.array(jobs)}
  return Ratings(
    user=user.astype(np.int32),
    item=item.astype(np.int32),
    rating=table[:, 2].astype(np.float32),
    timestamp=table[:, 3].astype(np.int64),
    user_ids=user_ids,
    item_ids=item_ids,
    item_titles=tuple(t[1] for t in items),
    item_year=np.array([t[2] for t in items], np.int32),
    item_genres=tuple(t[3] for t in items),
    genre_names=tuple(genres),
    user_features=user_features,
    variant=found,
  )


def movielens_dir(variant: str, data_dir: str | os.PathLike | None = None, *, download: bool = False) -> Path:
  """Locates an extracted MovieLens folder.

  ``data_dir`` itself, or its sub-folder named as in the official archive, or the download cache (downloading and
  extracting the official zip when ``download``).

  Args:
    variant: one of :data:`MOVIELENS_VARIANTS`.
    data_dir: where to look first.
    download: fetch and extract the official zip when missing.

  Returns:
    The extracted folder.

  Raises:
    FileNotFoundError: not found and ``download`` is False (the message says where to put the files).
    ConnectionError: ``download`` is True but the machine is offline.
  """
  if variant not in VARIANTS:
    raise ValueError(f"movielens_dir: `variant` must be one of {VARIANTS}, got {variant!r}")
  roots = [Path(data_dir)] if data_dir is not None else []
  roots.append(default_cache_dir() / "movielens")
  others = []
  for root in roots:
    for candidate in (root, root / FOLDERS[variant]):
      try:
        found, evidence = identify(candidate)
      except FileNotFoundError:
        continue
      if found == variant:
        return candidate
      others.append(f"{candidate} holds {found} ({evidence})")
  if data_dir is not None and others and not download:
    raise DataFormatError(f"MovieLens {variant} was requested, but {'; '.join(others)}")
  if not download:
    raise FileNotFoundError(
      f"MovieLens {variant} not found in {' or '.join(map(str, roots))}; pass the extracted "
      f"folder, or fetch {URLS[variant]} with {download_hint(roots[-1])}"
    )
  archive = fetch(URLS[variant], roots[-1], sha256=SHA256.get(variant))
  return extract_zip(archive, roots[-1]) / FOLDERS[variant]
