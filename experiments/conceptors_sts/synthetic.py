"""The embedded default: a seeded synthetic STS corpus with planted common-discourse directions.

Every word vector is a random vector plus, for stop words, a shared discourse direction g_0 and, for each genre's
frequent "genre words", a genre direction g_t. Each sentence mixes content words that carry its meaning with stop
words and genre words, so raw averages share large common components within a genre: the gold similarity of a pair is
the fraction of content words the two sentences share, which cosine similarity recovers only once the common
directions are removed. Word counts make stop words frequent (down-weighted by SIF) and genre words moderately
frequent, as discourse words are in real corpora.
"""

import string

import numpy as np

from bcjax.sentence import GENRES, NLTK_ENGLISH_STOPWORDS, StsPairs, WordVectors


def _name(i: int, prefix: str) -> str:
  """A lower-case alphabetic word for index i (the CA filter keeps only such tokens)."""
  letters = []
  while True:
    i, r = divmod(i, 26)
    letters.append(string.ascii_lowercase[r])
    if i == 0:
      break
  return prefix + "".join(reversed(letters))


def make_synthetic_sts(
  seed: int = 0,
  *,
  dim: int = 50,
  pairs_per_genre=(600, 500, 400, 300, 200),
  content_words: int = 2000,
  genre_words: int = 12,
  content_per_sentence: int = 6,
  stop_per_sentence: int = 5,
  genre_per_sentence: int = 4,
  discourse_scale: float = 3.0,
) -> tuple[WordVectors, dict[str, int], dict[str, StsPairs]]:
  """Returns ``(vectors, counts, genres)`` shaped like the real inputs of the experiment."""
  rng = np.random.default_rng(seed)
  unit = lambda v: v / np.linalg.norm(v)
  stop = tuple(dict.fromkeys(NLTK_ENGLISH_STOPWORDS))
  g0 = unit(rng.normal(size=dim))
  genre_dirs = [unit(rng.normal(size=dim)) for _ in GENRES]
  words, vecs, counts = [], [], {}

  def add(word, vector, count):
    words.append(word)
    vecs.append(vector)
    counts[word] = int(count)

  for i, w in enumerate(stop):
    add(w, discourse_scale * g0 + rng.normal(size=dim) / np.sqrt(dim), 5e6 / (1 + i) ** 0.5)
  genre_vocab = []
  for t, g in enumerate(genre_dirs):
    names = [_name(j, f"g{string.ascii_lowercase[t]}") for j in range(genre_words)]
    for w in names:
      add(w, discourse_scale * g + rng.normal(size=dim) / np.sqrt(dim), rng.integers(2e4, 2e5))
    genre_vocab.append(names)
  content = [_name(j, "c") for j in range(content_words)]
  for j, w in enumerate(content):
    add(w, rng.normal(size=dim) / np.sqrt(dim) * 1.5, 5e4 / (1 + j) ** 0.8 + 200)
  vectors = WordVectors(tuple(words), np.stack(vecs), {w: i for i, w in enumerate(words)})

  genres = {}
  for t, (genre, n_pairs) in enumerate(zip(GENRES, pairs_per_genre)):
    s1, s2, scores = [], [], []
    for _ in range(n_pairs):
      meaning = list(rng.choice(content, size=content_per_sentence, replace=False))
      overlap = rng.uniform()
      shared = int(round(overlap * content_per_sentence))
      other = list(rng.choice(content, size=content_per_sentence - shared, replace=False))
      sentences = []
      for words_of in (meaning, meaning[:shared] + other):
        tokens = (
          list(words_of)
          + list(rng.choice(stop, stop_per_sentence))
          + list(rng.choice(genre_vocab[t], genre_per_sentence))
        )
        rng.shuffle(tokens)
        sentences.append(" ".join(tokens).capitalize() + ".")
      s1.append(sentences[0])
      s2.append(sentences[1])
      scores.append(float(np.clip(5.0 * shared / content_per_sentence + rng.normal(0, 0.3), 0, 5)))
    genres[genre] = StsPairs(tuple(s1), tuple(s2), np.asarray(scores), (f"synthetic-{genre}",) * n_pairs)
  return vectors, counts, genres
