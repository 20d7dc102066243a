r"""The time-course protocol of the CA paper (reference note section 2, recipe section 5).

For t = 1..5 (news -> captions -> WordNet -> forums -> tweets) every genre is evaluated after the first t corpora:

* train-from-scratch SIF: the first principal direction of the stacked raw sentence vectors of all corpora seen
  so far is removed from the test genre's vectors;
* CA: :math:`C_t = C_{t-1} \vee C(R_t, \alpha)` from :math:`C_0` of the stop-word vectors, embedding
  :math:`\neg C_t q`;
* zero-shot CA: :math:`\neg C_0 q` (constant over time).

Scores are cosine similarities; the metric is Pearson's r with the gold scores over all pairs of a genre, x 100.
Corpus-specialized SIF (direction estimated on the test genre itself) is reported as a reference line.
"""

import functools
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from bcjax.conceptors import correlation, disjunction, optimal_aperture, quota, relative_aperture
from bcjax.parallel import DATA_AXIS, shard_padded_rows
from bcjax.sentence import (
  NLTK_ENGLISH_STOPWORDS,
  StsPairs,
  WordVectors,
  ca_embed,
  conceptor_with_aperture,
  cosine_similarity,
  encode_token_ids,
  pearson,
  principal_direction,
  remove_direction,
  sif_weights,
  stopword_correlation,
  weighted_average,
)

# --alpha auto: each conceptor's aperture from its own correlation matrix, so no labelled data picks it.
APERTURE_RULES = {"jaeger": optimal_aperture, "relative": relative_aperture}


@functools.cache
def _sharded_correlation(mesh: jax.sharding.Mesh):
  return jax.jit(
    jax.shard_map(
      lambda x, m: correlation(x, where=m, axis_name=DATA_AXIS),
      mesh=mesh,
      in_specs=(jax.P(DATA_AXIS), jax.P(DATA_AXIS)),
      out_specs=jax.P(),
    )
  )


def _correlation(q, mesh) -> jax.Array:
  """R = QᵀQ / n of the rows of q [n, d]; with a mesh the rows are split over its devices and the sums psum'd."""
  if mesh is None:
    return correlation(q)
  return _sharded_correlation(mesh)(*shard_padded_rows(mesh, q, name="sentence vectors"))


def _principal_direction(q, mesh) -> jax.Array:
  if mesh is None:
    return principal_direction(q)
  return jnp.linalg.eigh(_correlation(q, mesh))[1][:, -1]  # QᵀQ / n has QᵀQ's eigenvectors


def _pcc(e1, e2, gold) -> float:
  return 100.0 * float(pearson(cosine_similarity(e1, e2), gold))


def _rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
  """Pearson's r of each row pair of ``x``, ``y`` [B, n] (float64)."""
  xc = x - x.mean(axis=1, keepdims=True)
  yc = y - y.mean(axis=1, keepdims=True)
  return (xc * yc).sum(axis=1) / np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))


def mean_pcc_difference(
  similarities_a: Sequence[Mapping[str, np.ndarray]],
  similarities_b: Sequence[Mapping[str, np.ndarray]],
  gold: Mapping[str, np.ndarray],
  *,
  seed: int,
  num_samples: int = 2000,
  level: float = 0.95,
) -> dict:
  r"""Method A minus method B in Table 1's summary: the genre mean of the time-course-averaged PCC × 100, with a
  paired bootstrap interval over sentence pairs.

  .. math:: \Delta = \frac{1}{G}\sum_g \Big(\frac{1}{T_a}\sum_t r(s^a_{t,g}, y_g)
     - \frac{1}{T_b}\sum_t r(s^b_{t,g}, y_g)\Big) \times 100

  Each replicate redraws every genre's pairs with replacement (stratified by genre, as the genres are fixed test
  sets), the same pairs for both methods and every step, so what the methods share (how hard a pair is) cancels.

  Args:
    similarities_a: per step of method A, genre -> cosine similarity of each pair [n_g] (one step for zero-shot).
    similarities_b: the same for method B.
    gold: genre -> gold scores [n_g].
    seed: seeds the redraws (NumPy's PCG64).
    num_samples: bootstrap replicates.
    level: the interval's coverage.

  Returns:
    ``{"estimate", "low", "high", "units", "over", "level"}`` in PCC × 100 points.
  """
  rng = np.random.default_rng(seed)
  genres = list(gold)
  replicates = np.zeros(num_samples)
  for g in genres:
    y = np.asarray(gold[g], np.float64)
    n = len(y)
    for start in range(0, num_samples, 256):
      idx = rng.integers(0, n, size=(min(256, num_samples - start), n))
      yy = y[idx]
      course = []
      for steps in (similarities_a, similarities_b):
        course.append(np.mean([_rowwise_pearson(np.asarray(step[g], np.float64)[idx], yy) for step in steps], axis=0))
      replicates[start : start + len(idx)] += 100.0 * (course[0] - course[1]) / len(genres)
  estimate = 100.0 * np.mean(
    [
      np.mean([_rowwise_pearson(np.asarray(s[g])[None], np.asarray(gold[g])[None])[0] for s in similarities_a])
      - np.mean([_rowwise_pearson(np.asarray(s[g])[None], np.asarray(gold[g])[None])[0] for s in similarities_b])
      for g in genres
    ]
  )
  tail = 100.0 * (1.0 - level) / 2.0
  low, high = np.percentile(replicates, [tail, 100.0 - tail])
  return {
    "estimate": float(estimate),
    "low": float(low),
    "high": float(high),
    "units": int(sum(len(gold[g]) for g in genres)),
    "over": "sentence pairs, redrawn within each genre",
    "level": level,
  }


def check_inputs(
  vectors: WordVectors, genres: Mapping[str, StsPairs], stopwords: Sequence[str] = NLTK_ENGLISH_STOPWORDS
) -> None:
  """What would fail after the embeddings are built, checked first: every genre needs two scored pairs with
  scores that vary (Pearson's r is undefined otherwise) and a sentence with a word in the vocabulary, and some stop
  word must have a vector (C_0)."""
  if not any(w in vectors.index for w in stopwords):
    raise ValueError(
      "none of the stop words is in the word-vector vocabulary; C_0 cannot be built (are the vectors "
      "lower-cased, as the protocol expects?)"
    )
  for g, pairs in genres.items():
    if len(pairs.scores) < 2 or np.ptp(pairs.scores) == 0:
      raise ValueError(
        f"genre {g!r} has {len(pairs.scores)} scored pair(s) with scores spanning "
        f"{np.ptp(pairs.scores) if len(pairs.scores) else 0}; Pearson's r needs two or more that vary"
      )
    _, mask = encode_token_ids(pairs.sentence1 + pairs.sentence2, vectors.index)
    if not mask.any():
      raise ValueError(f"genre {g!r}: no sentence has a word in the word-vector vocabulary")


def run_time_course(
  vectors: WordVectors,
  counts: Mapping[str, int],
  genres: Mapping[str, StsPairs],
  *,
  alpha: float | str = 1.0,
  a: float = 1e-3,
  stopwords: Sequence[str] = NLTK_ENGLISH_STOPWORDS,
  progress: bool = True,
  log=None,
  mesh: jax.sharding.Mesh | None = None,
  bootstrap_seed: int = 0,
) -> dict:
  """Runs the protocol in float64; returns the results dictionary (PCC x 100), with CA's and zero-shot CA's
  differences from SIF in ``differences`` (:func:`mean_pcc_difference`, redraws seeded by ``bootstrap_seed``).
  ``alpha`` is a fixed aperture or the name of a rule in :data:`APERTURE_RULES` that picks every conceptor's
  aperture (C_0's and each step's) from its own correlation matrix; the apertures used are in ``alpha_by_step``.
  With ``mesh`` the corpora's correlation matrices (the conceptors' R_t and SIF's principal directions) are summed
  over its devices, each holding a block of the sentences."""
  if isinstance(alpha, str) and alpha not in APERTURE_RULES:
    raise ValueError(
      f"run_time_course: `alpha` must be a positive number or one of {sorted(APERTURE_RULES)}, got {alpha!r}"
    )
  aperture = APERTURE_RULES.get(alpha, alpha)
  names = list(genres)
  with jax.enable_x64(True):
    vec = jnp.asarray(vectors.vectors, jnp.float64)
    weights = jnp.asarray(sif_weights(vectors.words, counts, a))
    raw, empty = {}, {}
    for g in names:
      pair = []
      for side in (genres[g].sentence1, genres[g].sentence2):
        ids, mask = encode_token_ids(side, vectors.index)
        pair.append(weighted_average(vec, weights, ids, mask))
        empty[g] = empty.get(g, 0) + int((~mask.any(axis=1)).sum())
      raw[g] = pair
    # Both sentences of every pair, interleaved s1, s2, s1, s2, ... as the reference stacks them.
    corpus = {g: jnp.stack(raw[g], axis=1).reshape(-1, vec.shape[1]) for g in names}
    r0, stop_count = stopword_correlation(vectors, stopwords)
    c0, alpha0 = conceptor_with_aperture(r0, aperture)
    alphas = {"stopwords": float(alpha0)}
    quotas = {"stopwords": float(quota(c0))}  # how much of the space each conceptor claims, and so removes

    def sims(e1, e2) -> np.ndarray:
      return np.asarray(cosine_similarity(e1, e2), np.float64)

    zero_shot_sims = {g: sims(ca_embed(raw[g][0], c0), ca_embed(raw[g][1], c0)) for g in names}
    zero_shot = {g: _pcc(ca_embed(raw[g][0], c0), ca_embed(raw[g][1], c0), genres[g].scores) for g in names}
    specialized = {}
    for g in names:
      u = _principal_direction(corpus[g], mesh)
      specialized[g] = _pcc(remove_direction(raw[g][0], u), remove_direction(raw[g][1], u), genres[g].scores)

    sif_steps, ca_steps = [], []
    sif_sims: list[dict] = []
    ca_sims: list[dict] = []
    c = c0
    for t in tqdm(range(len(names)), desc="corpora", disable=not progress):
      u = _principal_direction(jnp.concatenate([corpus[g] for g in names[: t + 1]]), mesh)
      # C_t = C_{t-1} OR C(R_t, alpha), as bcjax.sentence.ca_update, with R_t possibly from many devices
      c_t, alphas[names[t]] = conceptor_with_aperture(_correlation(corpus[names[t]], mesh), aperture)
      alphas[names[t]] = float(alphas[names[t]])
      c = disjunction(c, c_t)
      quotas[names[t]] = float(quota(c))
      sif_steps.append(
        [_pcc(remove_direction(raw[g][0], u), remove_direction(raw[g][1], u), genres[g].scores) for g in names]
      )
      ca_steps.append([_pcc(ca_embed(raw[g][0], c), ca_embed(raw[g][1], c), genres[g].scores) for g in names])
      sif_sims.append({g: sims(remove_direction(raw[g][0], u), remove_direction(raw[g][1], u)) for g in names})
      ca_sims.append({g: sims(ca_embed(raw[g][0], c), ca_embed(raw[g][1], c)) for g in names})
      if log is not None:
        for method, row in (("sif", sif_steps[-1]), ("ca", ca_steps[-1])):
          log(step=t + 1, corpus=names[t], method=method, **dict(zip(names, row)))

  def course(steps):
    return {"pcc_by_step": steps, "time_course_average": dict(zip(names, np.mean(steps, axis=0).tolist()))}

  gold = {g: np.asarray(genres[g].scores, np.float64) for g in names}
  return {
    "genres": names,
    "differences": {
      "ca_minus_sif": mean_pcc_difference(ca_sims, sif_sims, gold, seed=bootstrap_seed),
      "zero_shot_ca_minus_sif": mean_pcc_difference([zero_shot_sims], sif_sims, gold, seed=bootstrap_seed),
    },
    "methods": {
      "sif": course(sif_steps),
      "zero-shot-ca": course([[zero_shot[g] for g in names]] * len(names)),
      "ca": course(ca_steps),
    },
    "corpus_specialized_sif": specialized,
    "pairs": {g: int(len(genres[g].scores)) for g in names},
    "sentences_without_tokens": empty,
    "stopwords_in_vocabulary": stop_count,
    "alpha": alpha,
    "sif_a": a,
    "alpha_by_step": alphas,
    "quota_by_step": quotas,
    "alpha_spread": aperture_spread(list(alphas.values())),
  }


def aperture_spread(alphas: Sequence[float]) -> dict:
  """Summary of the apertures used: range, geometric mean and max/min ratio (1 for a fixed aperture)."""
  values = np.asarray(alphas, np.float64)
  return {
    "min": float(values.min()),
    "max": float(values.max()),
    "geometric_mean": float(np.exp(np.log(values).mean())),
    "max_over_min": float(values.max() / values.min()),
  }
