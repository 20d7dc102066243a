"""Two-tower corpora of the Gramian paper: MovieLens ratings (App. F) and Wikipedia-style links (section 4)."""

import os
import re
from pathlib import Path

import numpy as np

from bcjax._textfile import INTEGER, DataFormatError, fail, iter_lines
from bcjax.data._movielens import Ratings
from bcjax.data._pairs import FeatureBags, PairCorpus, Pairs, Vocabulary, split_pairs

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def movielens_corpus(ratings: Ratings, *, val_fraction: float = 0.2, seed: int = 0) -> PairCorpus:
  """MovieLens as the paper's regression task (App. F).

  Left = user id, right = movie id + release year + bag of genres, target = the rating; an (80 %, 20 %) random split by
  default.

  Args:
    ratings: the MovieLens :class:`Ratings`.
    val_fraction: the share of ratings held out.
    seed: seeds the split.

  Returns:
    The :class:`PairCorpus`.
  """
  vocab = Vocabulary()
  user = vocab.ids("user", ratings.num_users)
  movie = vocab.ids("movie", ratings.num_items)
  year = vocab.bags("year", [(int(y),) if y >= 0 else () for y in ratings.item_year])
  genre = vocab.bags("genre", ratings.item_genres)
  left = FeatureBags((user,), ("user",))
  right = FeatureBags((movie, year, genre), ("movie", "year", "genre"))
  train, val = split_pairs(Pairs(ratings.user, ratings.item, ratings.rating), val_fraction, seed)
  return PairCorpus(left, right, len(vocab), train, val, "movielens")


def title_ngrams(title: str, n: int = 2) -> tuple[str, ...]:
  """Word 1..n-grams of a page title (lower-cased; underscores separate words as in Wikipedia URLs).

  Args:
    title: a page title.
    n: the largest n.

  Returns:
    The n-grams.
  """
  words = [w.lower() for w in _WORD.findall(title.replace("_", " "))]
  grams = []
  for size in range(1, n + 1):
    grams += [" ".join(words[i : i + size]) for i in range(len(words) - size + 1)]
  return tuple(dict.fromkeys(grams))


def page_corpus(
  titles, categories, links: np.ndarray, *, val_fraction: float = 0.1, seed: int = 0, name: str = "pages"
) -> PairCorpus:
  """Pages as both left and right entities with the paper's features.

  The features are the page id, title n-grams and categories; the observed pairs are the links (target 1), split
  (90 %, 10 %) by default.

  Args:
    titles: each page's title.
    categories: each page's categories.
    links: the links, [m, 2] (source, target).
    val_fraction: the share of links held out.
    seed: seeds the split.
    name: the corpus's name.

  Returns:
    The :class:`PairCorpus`.
  """
  vocab = Vocabulary()
  pages = FeatureBags(
    (
      vocab.ids("page", len(titles)),
      vocab.bags("ngram", [title_ngrams(t) for t in titles]),
      vocab.bags("category", categories),
    ),
    ("page", "ngrams", "categories"),
  )
  links = np.asarray(links, np.int32)
  pairs = Pairs(links[:, 0], links[:, 1], np.ones(len(links), np.float32))
  train, val = split_pairs(pairs, val_fraction, seed)
  return PairCorpus(pages, pages, len(vocab), train, val, name)


def load_wikipedia_links(path: str | os.PathLike, *, val_fraction: float = 0.1, seed: int = 0) -> PairCorpus:
  """Loads a link graph in the Wikipedia-links format.

  The format is a folder with

  * ``pages.tsv``: ``page_id<TAB>title<TAB>category|category|...`` (categories may be empty), one page per line;
  * ``links.tsv``: ``source_page_id<TAB>target_page_id``, one directed intra-site link per line.

  Page ids are arbitrary integers (e.g. Wikipedia page ids); duplicate links are kept once and self-links dropped.

  Args:
    path: the folder holding ``pages.tsv`` and ``links.tsv``.
    val_fraction: the share of links held out.
    seed: seeds the split.

  Returns:
    The :class:`PairCorpus`.

  Raises:
    FileNotFoundError: a file is missing.
    ValueError: naming the file and line of a malformed line, a duplicate page id, or a link to an unknown page.
  """
  path = Path(path)
  pages_file, links_file = path / "pages.tsv", path / "links.tsv"
  for f in (pages_file, links_file):
    if not f.exists():
      raise FileNotFoundError(f"{f} is missing (the Wikipedia-links format needs pages.tsv and links.tsv)")
  index: dict[int, int] = {}
  titles: list[str] = []
  categories: list[tuple[str, ...]] = []
  for lineno, line in iter_lines(pages_file):
    if not line.strip():
      continue
    fields = line.split("\t")
    if len(fields) not in (2, 3):
      fail(str(pages_file), lineno, f"expected 'id<TAB>title<TAB>categories', got {len(fields)} field(s)", line)
    if not INTEGER.fullmatch(fields[0]):
      fail(str(pages_file), lineno, f"non-integer page id {fields[0]!r}", line)
    page = int(fields[0])
    if page in index:
      fail(str(pages_file), lineno, f"duplicate page id {page}", line)
    index[page] = len(titles)
    titles.append(fields[1])
    categories.append(tuple(c for c in (fields[2].split("|") if len(fields) == 3 else []) if c))
  links = []
  for lineno, line in iter_lines(links_file):
    if not line.strip():
      continue
    fields = line.split()
    if len(fields) != 2:
      fail(str(links_file), lineno, f"expected 'source<TAB>target', got {len(fields)} field(s)", line)
    if not all(INTEGER.fullmatch(f) for f in fields):
      fail(str(links_file), lineno, "non-integer page id", line)
    src, dst = int(fields[0]), int(fields[1])
    for page in (src, dst):
      if page not in index:
        fail(str(links_file), lineno, f"page id {page} is not in {pages_file.name}", line)
    if src != dst:
      links.append((index[src], index[dst]))
  if not links:
    raise DataFormatError(f"{links_file}: no links")
  edges = np.unique(np.asarray(links, np.int32), axis=0)
  return page_corpus(titles, categories, edges, val_fraction=val_fraction, seed=seed, name=path.name)
