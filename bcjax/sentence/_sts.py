"""Loaders for SemEval STS 2012-2016 and the STS Benchmark, and the CA paper's five genres.

Loaders for SemEval STS 2012-2016 (``STS.input.*`` / ``STS.gs.*``) and the STS Benchmark, and the CA paper's five genres
(Liu, Ungar & Sedoc 2019, section 2.5 of the reference note).
"""

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bcjax._textfile import DECIMAL, DataFormatError, fail, iter_lines

GENRES = ("news", "captions", "WordNet", "forums", "tweets")  # the reference's presentation order
"""The STS genres in the reference's presentation order (news, captions, WordNet, forums, tweets)."""


class StsPairs(NamedTuple):
  """Sentence pairs with gold similarity scores (0-5)."""

  sentence1: tuple[str, ...]
  sentence2: tuple[str, ...]
  scores: np.ndarray  # [n], float64
  source: tuple[str, ...]  # dataset name of each pair


def _read_lines(path: Path) -> list[str]:
  """Every line (blank ones included: they mark unscored pairs), decoded as UTF-8 line by line."""
  if not path.is_file():
    raise FileNotFoundError(f"STS file {path} does not exist")
  return [line for _, line in iter_lines(path)]


def _score(path: Path, lineno: int, text: str) -> float:
  value = text.strip(" \t\r")
  if not DECIMAL.fullmatch(value):  # a negative one is refused by the range check
    fail(str(path), lineno, "the score is not a number", text)
  score = float(value)
  if not 0.0 <= score <= 5.0:
    fail(str(path), lineno, f"score {score} outside [0, 5]", text)
  return score


def load_sts_pairs(input_path: str | os.PathLike, gold_path: str | os.PathLike, name: str | None = None) -> StsPairs:
  """Reads one SemEval STS set.

  ``STS.input.<set>.txt`` (2 tab fields; 4 in 2016, whose source notes are ignored) and ``STS.gs.<set>.txt`` (one score
  per line). A blank gold line marks an unscored pair, which is dropped.

  Args:
    input_path: the ``STS.input.<set>.txt`` file.
    gold_path: the ``STS.gs.<set>.txt`` file.
    name: the set's name (default: from the file name).

  Returns:
    The scored pairs, :class:`StsPairs`.

  Raises:
    ValueError: naming file and line when a line has fewer than 2 fields, a score is not a number in [0, 5], or
      the two files disagree in length.
  """
  input_path, gold_path = Path(input_path), Path(gold_path)
  inputs, golds = _read_lines(input_path), _read_lines(gold_path)
  # Both formats end with a newline; the 2016 .ascii files add one more empty line.
  while inputs and not inputs[-1].strip():
    inputs.pop()
  while golds and not golds[-1].strip():
    golds.pop()
  if len(inputs) != len(golds):
    raise DataFormatError(f"{input_path} has {len(inputs)} pairs but {gold_path} has {len(golds)} scores")
  s1, s2, scores = [], [], []
  for lineno, (line, gold) in enumerate(zip(inputs, golds), start=1):
    if not gold.strip():
      continue
    fields = line.split("\t")
    if len(fields) not in (2, 4):
      fail(str(input_path), lineno, f"expected 2 (or, in 2016, 4) tab-separated fields, got {len(fields)}", line)
    scores.append(_score(gold_path, lineno, gold))
    s1.append(fields[0])
    s2.append(fields[1])
  if not scores:
    raise DataFormatError(f"{gold_path}: no scored pairs")
  name = name or input_path.name
  return StsPairs(tuple(s1), tuple(s2), np.asarray(scores, np.float64), (name,) * len(scores))


def load_stsb(path: str | os.PathLike) -> tuple[StsPairs, tuple[str, ...]]:
  """Reads an STS Benchmark csv (tab-separated, no quoting: genre, dataset, year, id, score, s1, s2[, src1, src2]).

  Args:
    path: the csv file.

  Returns:
    ``(pairs, genres)`` with the genre column of every pair.

  Raises:
    ValueError: a malformed line, naming the file and line.
  """
  path = Path(path)
  s1, s2, scores, sources, genres = [], [], [], [], []
  for lineno, line in enumerate(_read_lines(path), start=1):
    if not line.strip():
      continue
    fields = line.split("\t")  # quoting disabled: sentences contain unbalanced double quotes
    if len(fields) not in (7, 9):
      fail(str(path), lineno, f"expected 7 or 9 tab-separated fields, got {len(fields)}", line)
    score = _score(path, lineno, fields[4])
    genres.append(fields[0])
    sources.append(f"{fields[1]}-{fields[2]}")
    scores.append(score)
    s1.append(fields[5])
    s2.append(fields[6])
  if not scores:
    raise DataFormatError(f"{path}: no sentence pairs")
  return StsPairs(tuple(s1), tuple(s2), np.asarray(scores, np.float64), tuple(sources)), tuple(genres)


def concat_pairs(parts: list[StsPairs]) -> StsPairs:
  return StsPairs(
    sum((p.sentence1 for p in parts), ()),
    sum((p.sentence2 for p in parts), ()),
    np.concatenate([p.scores for p in parts]),
    sum((p.source for p in parts), ()),
  )


def load_sts_genres(sts_dir: str | os.PathLike) -> dict[str, StsPairs]:
  """The CA paper's five genres, in order news, captions, WordNet, forums, tweets.

  Expected layout (the public releases): ``STSBenchmark/sts-{train,dev,test}.csv`` give news (main-news),
  captions (main-captions) and forums (main-forum + main-forums); ``STS12/STS.input.surprise.OnWN.txt``,
  ``STS13/STS.input.OnWN.txt`` and ``STS14/STS.input.OnWN.txt`` give WordNet; ``STS14/STS.input.tweet-news.txt``
  gives tweets (each with its ``STS.gs.*`` file). Expected pair counts: 4299, 3250, 2061, 1079, 750.

  Args:
    sts_dir: the folder holding the public STS releases (layout above).

  Returns:
    ``{genre: StsPairs}`` in the order news, captions, WordNet, forums, tweets.

  Raises:
    FileNotFoundError: a file of the layout is missing.
    ValueError: a malformed line, naming its file and line.
  """
  root = Path(sts_dir)
  by_genre: dict[str, list[StsPairs]] = {g: [] for g in GENRES}
  stsb_genre = {"main-news": "news", "main-captions": "captions", "main-forum": "forums", "main-forums": "forums"}
  for split in ("train", "dev", "test"):
    pairs, genres = load_stsb(root / "STSBenchmark" / f"sts-{split}.csv")
    for genre_name, target in stsb_genre.items():
      rows = [i for i, g in enumerate(genres) if g == genre_name]
      if rows:
        by_genre[target].append(
          StsPairs(
            tuple(pairs.sentence1[i] for i in rows),
            tuple(pairs.sentence2[i] for i in rows),
            pairs.scores[rows],
            tuple(pairs.source[i] for i in rows),
          )
        )
  for folder, name, genre in (
    ("STS12", "surprise.OnWN", "WordNet"),
    ("STS13", "OnWN", "WordNet"),
    ("STS14", "OnWN", "WordNet"),
    ("STS14", "tweet-news", "tweets"),
  ):
    by_genre[genre].append(
      load_sts_pairs(
        root / folder / f"STS.input.{name}.txt", root / folder / f"STS.gs.{name}.txt", name=f"{folder}-{name}"
      )
    )
  return {g: concat_pairs(parts) for g, parts in by_genre.items()}
