"""The experiment's corpus: sentences, the old index, held-out queries with their relevant index rows, and a
consumer task.

From SemEval STS (``--sts-dir``, the CA paper's five genres): every distinct sentence once; the queries are the first
sentences of pairs scored >= 4 (paraphrases) whose partner differs, the relevant item of a query is its partner in
the index; the consumer task is the genre (news, captions, WordNet, forums, tweets). From a text file
(``--corpus``, one passage per line): no relevance and no labels, so the report falls back to label-free measures.
"""

from typing import NamedTuple

import numpy as np

from bcjax.sentence import load_sts_genres

PARAPHRASE_SCORE = 4.0
TRAIN_SCORE = 3.0


class Corpus(NamedTuple):
  sentences: tuple[str, ...]  # [n] every sentence embedded (index items and queries)
  index_rows: np.ndarray  # [N] rows of `sentences` in the old index
  query_rows: np.ndarray  # [Q] held-out query rows (never in the index, never paired for fitting)
  qrels: tuple[np.ndarray, np.ndarray] | None  # (query sentence row, index position) relevance pairs
  labels: np.ndarray | None  # [n] consumer classes
  label_names: tuple[str, ...]
  source: str
  train_pairs: np.ndarray | None = None  # [m, 2] paraphrase pairs (score >= 3) away from the queries, for training


def from_sts(sts_dir, *, max_sentences: int, max_queries: int, seed: int) -> Corpus:
  genres = load_sts_genres(sts_dir)
  row_of: dict[str, int] = {}
  labels, sentences, paraphrases, similar = [], [], [], []
  for g, pairs in enumerate(genres.values()):
    for s1, s2, score in zip(pairs.sentence1, pairs.sentence2, pairs.scores):
      for s in (s1, s2):
        if s not in row_of:
          row_of[s] = len(sentences)
          sentences.append(s)
          labels.append(g)
      if score >= TRAIN_SCORE and s1 != s2:
        similar.append((row_of[s1], row_of[s2]))
      if score >= PARAPHRASE_SCORE and s1 != s2:
        paraphrases.append((row_of[s1], row_of[s2]))
  rng = np.random.default_rng(seed)
  # Queries first (their partners must stay in the index), then the rest of the corpus up to max_sentences.
  order = rng.permutation(len(paraphrases))
  queries, partners, taken = [], [], set()
  for i in order:
    q, p = paraphrases[i]
    if len(queries) >= max_queries:
      break
    if q in taken or p in taken:
      continue
    queries.append(q)
    partners.append(p)
    taken.update((q, p))
  rest = [r for r in rng.permutation(len(sentences)) if r not in taken]
  budget = max(0, max_sentences - len(queries) - len(partners))
  index = np.sort(np.array(partners + rest[:budget], np.int64))
  keep = np.sort(np.concatenate([index, np.array(queries, np.int64)]))
  # Renumber to the kept sentences only.
  new_row = {int(r): i for i, r in enumerate(keep)}
  position = {int(r): i for i, r in enumerate(index)}
  train = np.array(
    [
      (new_row[a], new_row[b])
      for a, b in similar
      if a in new_row and b in new_row and a not in taken and b not in taken
    ],
    np.int64,
  ).reshape(-1, 2)
  return Corpus(
    tuple(sentences[r] for r in keep),
    np.array([new_row[int(r)] for r in index], np.int64),
    np.array([new_row[q] for q in queries], np.int64),
    (np.array([new_row[q] for q in queries], np.int64), np.array([position[p] for p in partners], np.int64)),
    np.array([labels[r] for r in keep], np.int64),
    tuple(genres),
    f"STS genres ({sts_dir})",
    train,
  )


def from_lines(path, *, max_sentences: int, max_queries: int, seed: int) -> Corpus:
  with open(path, encoding="utf-8") as f:
    lines = list(dict.fromkeys(line.strip() for line in f if line.strip()))
  rng = np.random.default_rng(seed)
  rows = rng.permutation(len(lines))[:max_sentences]
  sentences = tuple(lines[r] for r in np.sort(rows))
  order = rng.permutation(len(sentences))
  n_queries = min(max_queries, len(sentences) // 5)
  return Corpus(
    sentences, np.sort(order[n_queries:]), np.sort(order[:n_queries]), None, None, (), f"passages of {path}"
  )
