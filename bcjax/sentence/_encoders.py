r"""SIF and conceptor-aided (CA) sentence encoders (Arora et al. 2017; Liu, Ungar & Sedoc, NAACL 2019).

Featurisation (tokens -> padded id matrices) is done once on the host (:func:`encode_token_ids`); the encoders are
pure, jittable functions of the id matrix, the word vectors and the word weights.

References:
  S. Arora, Y. Liang, T. Ma, "A Simple but Tough-to-Beat Baseline for Sentence Embeddings", ICLR 2017.
  T. Liu, L. Ungar, J. Sedoc, "Continual Learning for Sentence Representations Using Conceptors", NAACL 2019.
  https://arxiv.org/abs/1904.09187
"""

from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax.conceptors import conceptor_from_correlation, correlation, disjunction
from bcjax.sentence._tokenize import keep_token, tokenize
from bcjax.sentence._vectors import WordVectors


def sif_weights(words: Sequence[str], counts: Mapping[str, int], a: float = 1e-3) -> np.ndarray:
  r"""SIF word weights :math:`a / (a + p(w))` with :math:`p(w) = \text{count}(w) / \sum \text{counts}`.

  A word missing from ``counts`` has p = 0 and weight 1, as in the official SIF code.

  Args:
    words: the vocabulary, [V].
    counts: word -> count (e.g. :func:`load_word_frequencies`).
    a: the SIF constant, > 0.

  Returns:
    Weights, [V], float64.

  Raises:
    ValueError: ``a`` <= 0, or counts without a positive total.

  Examples:
    >>> from bcjax.sentence import sif_weights
    >>> sif_weights(["the", "cat", "zebra"], {"the": 999, "cat": 1}, a=1e-3).round(4).tolist()
    [0.001, 0.5, 1.0]
  """
  if not a > 0:
    raise ValueError(f"sif_weights: `a` must be > 0, got {a!r}")
  total = float(sum(counts.values()))
  if total <= 0:
    raise ValueError("sif_weights: `counts` must hold a positive total count")
  p = np.array([counts.get(w, 0) / total for w in words], dtype=np.float64)
  return a / (a + p)


def encode_token_ids(sentences: Sequence[str], index: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
  """Tokenises sentences and maps kept tokens to vocabulary rows.

  A token is kept when it is in the vocabulary and ``islower()`` (the reference's filter).

  Args:
    sentences: the sentences.
    index: the vocabulary: word -> row.

  Returns:
    ``(ids, mask)``: ids [n, L] (0 where padded) and a boolean mask [n, L]; L is the longest kept sentence
    (at least 1). A sentence with no kept token has an all-False row.
  """
  kept = [[index[t] for t in tokenize(s) if keep_token(t, index)] for s in sentences]
  length = max([1] + [len(k) for k in kept])
  ids = np.zeros((len(kept), length), np.int32)
  mask = np.zeros((len(kept), length), bool)
  for i, row in enumerate(kept):
    ids[i, : len(row)] = row
    mask[i, : len(row)] = True
  return ids, mask


def weighted_average(vectors: ArrayLike, weights: ArrayLike, ids: ArrayLike, mask: ArrayLike) -> jax.Array:
  r"""Raw sentence vectors, weighted averages of their words' vectors.

  Raw sentence vectors :math:`q_s = \sum_{w \in s} a_w v_w / \sum_{w \in s} a_w` (Liu et al.'s normalisation; official
  SIF divides by :math:`|s|` instead, which changes only each sentence's scale).

  Args:
    vectors: word vectors, [V, d].
    weights: word weights, [V].
    ids: token rows, [n, L].
    mask: valid tokens, [n, L].

  Returns:
    [n, d]; a sentence without tokens gets the zero vector.

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: ``ids`` and ``mask`` of different shapes.
  """
  vectors = _checks.as_float_array("weighted_average", "vectors", vectors, ndim=2)
  weights = _checks.as_float_array("weighted_average", "weights", weights, ndim=1)
  if weights.shape[0] != vectors.shape[0]:
    raise ValueError(
      f"weighted_average: `weights` has shape {tuple(weights.shape)} but `vectors` has {vectors.shape[0]} rows"
    )
  ids, mask = jnp.asarray(ids), jnp.asarray(mask)
  if ids.shape != mask.shape or ids.ndim != 2:
    raise ValueError(f"weighted_average: `ids` {tuple(ids.shape)} and `mask` {tuple(mask.shape)} must be equal [n, L]")
  w = weights[ids] * mask
  total = jnp.sum(w, axis=1, keepdims=True)
  # max(total, tiny): an empty sentence gives 0 / tiny = 0 rather than 0 / 0.
  return jnp.einsum("nl,nld->nd", w, vectors[ids]) / jnp.maximum(total, jnp.finfo(vectors.dtype).tiny)


def principal_direction(q: ArrayLike) -> jax.Array:
  r"""First right singular vector u of the uncentred matrix Q [n, d] (the top eigenvector of QᵀQ); sign arbitrary.

  Args:
    q: sentence vectors Q, [n, d].

  Returns:
    u, a unit vector [d].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: an input that is not a matrix.
  """
  q = _checks.as_float_array("principal_direction", "q", q, ndim=2)
  _, u = jnp.linalg.eigh(q.T @ q)
  return u[:, -1]


def remove_direction(q: ArrayLike, u: ArrayLike) -> jax.Array:
  r"""SIF's common-component removal :math:`q \leftarrow q - u u^\top q` for every row; u is a unit vector [d].

  Args:
    q: sentence vectors, [n, d].
    u: a unit vector, [d].

  Returns:
    :math:`q - u u^\top q` per row, [n, d].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for widths that differ.
  """
  q = _checks.as_float_array("remove_direction", "q", q, ndim=2)
  u = _checks.as_float_array("remove_direction", "u", u, ndim=1)
  return q - jnp.outer(q @ u, u)


Aperture = float | Callable[[jax.Array], jax.Array]
"""A conceptor aperture: a number, or a rule mapping a correlation matrix R to one (``bcjax.optimal_aperture``,
``bcjax.relative_aperture``), which makes the encoder independent of the word vectors' scale."""


def conceptor_with_aperture(r: ArrayLike, alpha: Aperture = 1.0) -> tuple[jax.Array, jax.Array]:
  r"""(C(R, α), α) with α a number or ``alpha(R)`` for a rule: the conceptor and the aperture it used.

  Args:
    r: a correlation matrix R, [d, d].
    alpha: the aperture α, or a rule R -> α (:data:`Aperture`).

  Returns:
    ``(C(R, α), α)``.
  """
  r = jnp.asarray(r)
  value = alpha(r) if callable(alpha) else jnp.asarray(alpha, r.dtype)
  return conceptor_from_correlation(r, value), value


def ca_initial(stopword_vectors: ArrayLike, alpha: Aperture = 1.0) -> jax.Array:
  r"""Zero-shot conceptor :math:`C_0 = R_Z (R_Z + \alpha^{-2} I)^{-1}` of stop-word vectors.

  Zero-shot conceptor :math:`C_0 = R_Z (R_Z + \alpha^{-2} I)^{-1}` of stop-word vectors [:math:`|Z|`, d]; ``alpha`` a
  number or a rule R -> α (see :data:`Aperture`).

  Args:
    stopword_vectors: the stop words' vectors, [:math:`|Z|`, d].
    alpha: the aperture α, or a rule R -> α (:data:`Aperture`).

  Returns:
    :math:`C_0`, [d, d].
  """
  return conceptor_with_aperture(correlation(stopword_vectors), alpha)[0]


def stopword_correlation(vectors: WordVectors, stopwords: Sequence[str]) -> tuple[jax.Array, int]:
  r""":math:`R_Z` of the distinct stop words that have a vector, and their number.

  Each word counts once however often the list repeats it (the CA notebook builds :math:`R_Z` from a set).

  Args:
    vectors: the word vectors.
    stopwords: the stop-word list.

  Returns:
    ``(R_Z [d, d], the number of distinct stop words with a vector)``.

  Raises:
    ValueError: none of the stop words is in the vocabulary.
  """
  rows = [vectors.index[w] for w in dict.fromkeys(stopwords) if w in vectors.index]
  if not rows:
    raise ValueError("stopword_correlation: none of the stop words is in the word-vector vocabulary")
  return correlation(jnp.asarray(vectors.vectors)[np.asarray(rows)]), len(rows)


def stopword_conceptor(vectors: WordVectors, stopwords: Sequence[str], alpha: Aperture = 1.0) -> tuple[jax.Array, int]:
  r"""The zero-shot conceptor of the distinct stop words that have a vector, and their number.

  The zero-shot conceptor :math:`C_0 = C(R_Z, \alpha)` of the distinct stop words that have a vector (see
  :func:`stopword_correlation`), and their number.

  Args:
    vectors: the word vectors.
    stopwords: the stop-word list.
    alpha: the aperture α, or a rule R -> α (:data:`Aperture`).

  Returns:
    ``(C_0 [d, d], the number of stop words with a vector)``.

  Raises:
    ValueError: none of the stop words is in the vocabulary.
  """
  r, count = stopword_correlation(vectors, stopwords)
  return conceptor_with_aperture(r, alpha)[0], count


def ca_update(c_prev: ArrayLike, q_corpus: ArrayLike, alpha: Aperture = 1.0) -> jax.Array:
  r"""One continual step :math:`C_t = C_{t-1} \vee C(R_t, \alpha)`.

  One continual step :math:`C_t = C_{t-1} \vee C(R_t, \alpha)` with :math:`R_t` the uncentred correlation of the
  corpus's raw sentence vectors [n, d] (with one fixed α for every step the correlations add). A rule for ``alpha``
  picks each step's aperture from its own :math:`R_t`.

  Args:
    c_prev: :math:`C_{t-1}`, [d, d].
    q_corpus: the corpus's raw sentence vectors, [n, d].
    alpha: the aperture α, or a rule R -> α (:data:`Aperture`).

  Returns:
    :math:`C_t`, [d, d].
  """
  return disjunction(c_prev, conceptor_with_aperture(correlation(q_corpus), alpha)[0])


def ca_embed(q: ArrayLike, c: ArrayLike) -> jax.Array:
  r"""CA sentence embedding :math:`\neg C\, q = (I - C) q` for rows q [n, d].

  Args:
    q: raw sentence vectors, [n, d].
    c: the conceptor C, [d, d].

  Returns:
    :math:`(I - C) q` per row, [n, d].

  Raises:
    ValueError: widths that differ.
  """
  q = _checks.as_float_array("ca_embed", "q", q, ndim=2)
  c = _checks.as_float_array("ca_embed", "c", c, ndim=2)
  if c.shape != (q.shape[1], q.shape[1]):
    raise ValueError(f"ca_embed: `c` has shape {tuple(c.shape)} but `q` has dimension {q.shape[1]}")
  return q - q @ c  # C is symmetric


def cosine_similarity(a: ArrayLike, b: ArrayLike) -> jax.Array:
  """Row-wise cosine of [n, d] and [n, d]; 0 when either row is zero.

  Args:
    a: rows [n, d].
    b: rows [n, d].

  Returns:
    The cosine per row, [n].

  Raises:
    ValueError: shapes that differ.
  """
  a = _checks.as_float_array("cosine_similarity", "a", a, ndim=2)
  b = _checks.as_float_array("cosine_similarity", "b", b, ndim=2)
  if a.shape != b.shape:
    raise ValueError(f"cosine_similarity: `a` {tuple(a.shape)} and `b` {tuple(b.shape)} must have the same shape")
  norms = jnp.linalg.norm(a, axis=1) * jnp.linalg.norm(b, axis=1)
  return jnp.sum(a * b, axis=1) / jnp.maximum(norms, jnp.finfo(a.dtype).tiny)


def pearson(x: ArrayLike, y: ArrayLike) -> jax.Array:
  r"""Pearson correlation :math:`\frac{\sum (x-\bar x)(y-\bar y)}{\sqrt{\sum (x-\bar x)^2 \sum (y-\bar y)^2}}`.

  Raises ValueError (for concrete inputs) when fewer than 2 points are given or either input is constant.

  Args:
    x: values, [n].
    y: values, [n].

  Returns:
    The correlation, a scalar.

  Raises:
    ValueError: fewer than 2 points, lengths that differ, or a constant input (concrete inputs).
  """
  x = _checks.as_float_array("pearson", "x", x, ndim=1)
  y = _checks.as_float_array("pearson", "y", y, ndim=1)
  if x.shape != y.shape or x.shape[0] < 2:
    raise ValueError(f"pearson: `x` {tuple(x.shape)} and `y` {tuple(y.shape)} must be equal-length vectors of >= 2")
  xc, yc = x - jnp.mean(x), y - jnp.mean(y)
  denom = jnp.sqrt(jnp.sum(xc * xc) * jnp.sum(yc * yc))
  if _checks.is_concrete(denom) and float(denom) == 0.0:
    raise ValueError("pearson: `x` or `y` is constant; the correlation is undefined")
  return jnp.sum(xc * yc) / denom
