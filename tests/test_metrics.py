"""Ranking metrics against float64 NumPy references written here, and the chunked retrieval evaluation against a
brute-force loop (full corpus and candidate sets)."""

import functools
from unittest import mock

import jax
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import roc_auc_score

from bcjax.metrics import (
  _bootstrap,
  _retrieval,
  average_precision_at_k,
  bootstrap_means,
  evaluate_retrieval,
  mean_over_queries,
  negative_flip_rate,
  paired_bootstrap,
  recall_at_k,
  roc_auc,
  roc_auc_interval,
)
from bcjax.metrics._ranking import TIE_ULPS, ranking_metrics
from tests._tolerance import assert_close, close


def np_metrics(scores, relevant, k, where=None):
  """Per-query Recall@K and AP@K by explicit sorting under the tie rule: scores within tau (TIE_ULPS units of their
  precision times the query's largest |eligible score|) are ties, broken towards the lower item index."""
  scores = np.asarray(scores)
  where = np.ones_like(relevant) if where is None else where
  recalls, aps = [], []
  for s, r, w in zip(scores, relevant, where):
    r = r & w
    tau = TIE_ULPS * np.finfo(scores.dtype).eps * np.max(np.abs(s[w]), initial=0.0)

    def ahead(a, b, s=s, tau=tau):
      if abs(float(s[a]) - float(s[b])) <= tau:
        return -1 if a < b else 1
      return -1 if s[a] > s[b] else 1

    order = sorted((i for i in range(len(s)) if w[i]), key=functools.cmp_to_key(ahead))[:k]
    hits = [bool(r[i]) for i in order]
    n_rel = r.sum()
    recalls.append(sum(hits) / n_rel if n_rel else 0.0)
    ap, seen = 0.0, 0
    for j, h in enumerate(hits, start=1):
      if h:
        seen += 1
        ap += seen / j
    aps.append(ap / min(n_rel, k) if n_rel else 0.0)
  return np.array(recalls), np.array(aps)


class RankingTest(parameterized.TestCase):
  @parameterized.parameters(1, 3, 10)
  @pytest.mark.heavy
  def test_against_numpy(self, k):
    rng = np.random.default_rng(k)
    scores = rng.normal(size=(20, 15))
    relevant = rng.random((20, 15)) < 0.2
    where = rng.random((20, 15)) < 0.8
    for w in (None, where):
      want_r, want_ap = np_metrics(scores, relevant, k, w)
      assert_close(recall_at_k(scores, relevant, k, where=w), want_r)
      assert_close(average_precision_at_k(scores, relevant, k, where=w), want_ap)

  @pytest.mark.heavy
  def test_one_ranking_serves_every_cutoff(self):
    # Ties (scores on a coarse grid) make the top K of one pass and the head of a longer one differ if the ranking
    # were not tie-stable.
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, size=(25, 18)).astype(np.float64)
    relevant = rng.random((25, 18)) < 0.3
    where = rng.random((25, 18)) < 0.7
    for w in (None, where):
      got = ranking_metrics(scores, relevant, (1, 4, 9), where=w)
      self.assertEqual(sorted(got), ["map@1", "map@4", "map@9", "recall@1", "recall@4", "recall@9"])
      for k in (1, 4, 9):
        want_r, want_ap = np_metrics(scores, relevant, k, w)
        assert_close(got[f"recall@{k}"], want_r, err_msg=f"K={k}")
        assert_close(got[f"map@{k}"], want_ap, err_msg=f"K={k}")

  def test_rounding_between_equal_items_does_not_decide_the_top_k(self):
    # Items 2 and 5 have equal embeddings, so equal scores in exact arithmetic; another summation order makes either
    # one a unit in the last place higher. The cut at K = 3 falls between them: the lower index enters either way.
    base = np.array([[0.9, 0.8, 0.0771198, 0.02, 0.03, 0.0771198, 0.01]], np.float32)  # ranks 0, 1, then {2, 5}
    relevant = np.array([[False, False, False, False, False, True, False]])
    results = []
    for nudge in (-2, 0, 2):  # item 5 two units of float32 below, equal to, above item 2
      scores = base.copy()
      scores[0, 5] = np.nextafter(scores[0, 5], np.float32(np.sign(nudge) * np.inf)) if nudge else scores[0, 5]
      if abs(nudge) == 2:
        scores[0, 5] = np.nextafter(scores[0, 5], np.float32(np.sign(nudge) * np.inf))
      got = ranking_metrics(scores, relevant, (3, 4))
      results.append([float(got[name][0]) for name in ("recall@3", "recall@4", "map@4")])
    self.assertEqual(results[0], results[1])
    self.assertEqual(results[1], results[2])
    assert_close(results[1], [0.0, 1.0, 1 / 4])  # item 5 is 4th: the tie goes to item 2, the lower index
    # Scores far apart in float32 terms are not ties: item 5 clearly above item 2 ranks third.
    scores = base.copy()
    scores[0, 5] = 0.078
    assert_close(recall_at_k(scores, relevant, 3), [1.0])

  def test_near_ties_inside_the_top_k_keep_the_index_order(self):
    # Duplicated items inside the top K, each copy perturbed by a few units: AP@K depends only on the index order.
    rng = np.random.default_rng(7)
    base = np.repeat(rng.normal(size=(4, 5)), 2, axis=1).astype(np.float32)  # items 2j and 2j+1 are copies
    relevant = rng.random((4, 10)) < 0.4
    want = ranking_metrics(base, relevant, (2, 5, 10))
    for seed in range(3):
      ulps = np.random.default_rng(seed).integers(-3, 4, size=base.shape)
      noisy = base * (1 + ulps * np.finfo(np.float32).eps).astype(np.float32)
      got = ranking_metrics(noisy, relevant, (2, 5, 10))
      for name in want:
        assert_close(got[name], want[name], err_msg=name)
    for k in (2, 5):
      want_r, want_ap = np_metrics(base, relevant, k)
      assert_close(want[f"recall@{k}"], want_r)
      assert_close(want[f"map@{k}"], want_ap)

  @pytest.mark.heavy
  def test_closed_forms(self):
    scores = np.array([[4.0, 3.0, 2.0, 1.0]])
    relevant = np.array([[True, False, True, False]])
    # ranks 1 and 3 relevant: AP@3 = (1/1 + 2/3) / 2
    assert_close(average_precision_at_k(scores, relevant, 3), [(1 + 2 / 3) / 2])
    assert_close(recall_at_k(scores, relevant, 2), [0.5])
    # excluding the top item moves the second relevant item to rank 2
    where = np.array([[False, True, True, True]])
    assert_close(average_precision_at_k(scores, relevant, 3, where=where), [0.5])

  @pytest.mark.heavy
  def test_jit_matches_eager_and_mean(self):
    rng = np.random.default_rng(0)
    scores, relevant = rng.normal(size=(6, 9)), rng.random((6, 9)) < 0.3
    relevant[0] = False
    eager = average_precision_at_k(scores, relevant, 4)
    jitted = jax.jit(average_precision_at_k, static_argnums=2)(scores, relevant, 4)
    assert_close(eager, jitted)
    assert_close(mean_over_queries(eager, relevant), np.asarray(eager)[relevant.any(1)].mean())
    with self.assertRaisesRegex(ValueError, "no query has a relevant item"):
      mean_over_queries(eager, np.zeros_like(relevant))

  def test_bad_inputs(self):
    with self.assertRaisesRegex(ValueError, r"`k` must be an integer in \[1, 3\]"):
      recall_at_k(np.zeros((2, 3)), np.zeros((2, 3), bool), 4)
    with self.assertRaisesRegex(ValueError, "`relevant` must be a boolean mask"):
      recall_at_k(np.zeros((2, 3)), np.zeros((2, 3)), 1)
    with self.assertRaisesRegex(ValueError, "NaN|nan|finite"):
      average_precision_at_k(np.full((2, 3), np.nan), np.zeros((2, 3), bool), 1)


class RocAucTest(absltest.TestCase):
  @given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=2, max_size=40))
  @pytest.mark.heavy
  def test_matches_sklearn_with_ties(self, rows):
    scores = np.array([float(s) for s, _ in rows])  # few distinct values: many ties
    labels = np.array([y for _, y in rows])
    if labels.all() or not labels.any():
      return
    assert_close(float(roc_auc(scores, labels)), roc_auc_score(labels, scores), scale=1.0)  # AUC lies in [0, 1]

  def test_examples_with_equal_inputs_tie_however_their_scores_were_rounded(self):
    # sklearn on the exact (grid) scores is the referee; each score then moves by a few float32 units, as another
    # summation order would move it, and the AUC and its interval stay what the exact ties give.
    rng = np.random.default_rng(5)
    exact = rng.integers(0, 6, size=300).astype(np.float32) * np.float32(0.37)
    labels = rng.random(300) < 0.4
    want = roc_auc_score(labels, exact)
    base = roc_auc_interval(exact, labels)
    for seed in range(3):
      ulps = np.random.default_rng(seed).integers(-4, 5, size=300)
      noisy = exact * (1 + ulps * np.finfo(np.float32).eps).astype(np.float32)
      self.assertGreater(len(np.unique(noisy)), 6)  # the rounding split the ties
      assert_close(float(roc_auc(noisy, labels)), want, scale=1.0)
      got = roc_auc_interval(noisy, labels)
      assert_close([float(got.auc), float(got.std_error)], [float(base.auc), float(base.std_error)], scale=1.0)
    # Scores a clear step apart are ordered, not tied: a positive 1e-4 above a negative counts whole.
    assert_close(float(roc_auc(np.float32([0.5, 0.5001]), [False, True])), 1.0)
    assert_close(float(roc_auc(np.float32([0.5, np.nextafter(np.float32(0.5), 1)]), [False, True])), 0.5)

  @pytest.mark.heavy
  def test_mask_jit_and_errors(self):
    rng = np.random.default_rng(0)
    scores, labels = rng.normal(size=50), rng.random(50) < 0.4
    where = rng.random(50) < 0.7
    want = roc_auc_score(labels[where], scores[where])
    assert_close(float(roc_auc(scores, labels, where=where)), want, scale=1.0)
    assert_close(float(jax.jit(roc_auc)(scores, labels, where=where)), want, scale=1.0)
    with self.assertRaisesRegex(ValueError, "needs both classes, got 0 positive"):
      roc_auc(scores, np.zeros(50, bool))
    with self.assertRaisesRegex(ValueError, "`labels` must be binary"):
      roc_auc(scores, np.full(50, 2))


def delong_float64(scores, labels):
  """DeLong's AUC and standard error from the O(n+ n-) pairwise placements, in float64."""
  pos, neg = scores[labels].astype(np.float64), scores[~labels].astype(np.float64)
  kernel = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
  v10, v01 = kernel.mean(axis=1), kernel.mean(axis=0)
  var = lambda v: np.var(v, ddof=1) if len(v) > 1 else 0.0
  return kernel.mean(), np.sqrt(var(v10) / len(pos) + var(v01) / len(neg))


class RocAucIntervalTest(absltest.TestCase):
  def test_matches_the_pairwise_placements_in_float64_with_ties(self):
    rng = np.random.default_rng(0)
    for n, distinct in ((7, 3), (60, 1000), (301, 5)):
      scores = np.float64(rng.integers(0, distinct, n))
      labels = rng.random(n) < 0.3
      labels[:2] = [True, False]
      auc, se = delong_float64(scores, labels)
      got = roc_auc_interval(scores, labels, level=0.9)
      assert_close(float(got.auc), auc, scale=1.0)
      assert_close(float(got.std_error), se, scale=se)
      z = stats.norm.ppf(0.95)
      assert_close([float(got.low), float(got.high)], np.clip([auc - z * se, auc + z * se], 0, 1), scale=1.0)

  def test_the_95_percent_interval_covers_the_binormal_auc_about_95_percent_of_the_time(self):
    """Scores N(0, 1) for negatives and N(1, 1) for positives: AUC = Φ(1/√2) = 0.7602."""
    true_auc = stats.norm.cdf(1 / np.sqrt(2))
    rng = np.random.default_rng(1)
    interval = jax.jit(functools.partial(roc_auc_interval, level=0.95))
    covered = 0
    reps = 400
    for _ in range(reps):
      labels = rng.random(120) < 0.4
      scores = rng.normal(size=120) + labels
      got = interval(scores, labels)
      covered += float(got.low) <= true_auc <= float(got.high)
    # 400 draws of a 95 % interval: the count is Binomial(400, 0.95), sd 4.4 (DeLong is a little narrow at n=120)
    self.assertBetween(covered / reps, 0.91, 0.98)

  def test_padded_rows_holding_nan_or_huge_values_change_nothing_eager_or_jit(self):
    rng = np.random.default_rng(2)
    scores, labels = rng.normal(size=30), rng.random(30) < 0.5
    want = roc_auc_interval(scores, labels)
    for fill in (np.nan, 1e30):
      padded = np.concatenate([scores, np.full(10, fill)])
      pad_labels = np.concatenate([labels, np.ones(10, bool)])
      where = np.arange(40) < 30
      for fn in (roc_auc_interval, jax.jit(roc_auc_interval)):
        got = fn(padded, pad_labels, where=where)
        assert_close(np.array(got), np.array(want), scale=1.0, err_msg=str(fill))

  def test_a_classifier_at_chance_has_an_interval_around_one_half_and_bad_input_is_named(self):
    rng = np.random.default_rng(3)
    labels = rng.random(400) < 0.5
    got = roc_auc_interval(rng.normal(size=400), labels)  # scores independent of the labels
    self.assertLess(float(got.low), 0.5)
    self.assertGreater(float(got.high), 0.5)
    with self.assertRaisesRegex(ValueError, r"roc_auc_interval: `level` must be in \(0, 1\), got 1.0"):
      roc_auc_interval(rng.normal(size=4), [0, 1, 0, 1], level=1.0)
    with self.assertRaisesRegex(ValueError, "needs both classes"):
      roc_auc_interval(rng.normal(size=4), [1, 1, 1, 1])


class RetrievalTest(parameterized.TestCase):
  def brute_force(self, u, v, rel, exc, k, candidates=None):
    recalls, aps = [], []
    for q in sorted(set(rel[0])):
      relevant = np.zeros(len(v), bool)
      relevant[rel[1][rel[0] == q]] = True
      where = np.ones(len(v), bool) if candidates is None else np.isin(np.arange(len(v)), candidates)
      where[exc[1][exc[0] == q]] = False
      where |= relevant
      r, ap = np_metrics((u[q] @ v.T)[None], relevant[None], k, where[None])
      recalls.append(r[0])
      aps.append(ap[0])
    return np.mean(recalls), np.mean(aps)

  @parameterized.parameters(None, "candidates")
  @pytest.mark.heavy
  def test_matches_brute_force_across_chunks(self, use_candidates):
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=(30, 4)), rng.normal(size=(50, 4))
    rel = (rng.integers(0, 30, 60), rng.integers(0, 50, 60))
    exc = (rng.integers(0, 30, 200), rng.integers(0, 50, 200))
    candidates = rng.choice(50, 20, replace=False) if use_candidates else None
    got = evaluate_retrieval(u, v, rel, exclude=exc, ks=(5, 10), candidates=candidates, chunk_size=7)
    for k in (5, 10):
      want_r, want_ap = self.brute_force(u, v, rel, exc, k, candidates)
      assert_close(got[f"recall@{k}"], want_r)
      assert_close(got[f"map@{k}"], want_ap)
    self.assertEqual(got["queries"], len(set(rel[0])))

  @pytest.mark.heavy
  def test_per_query_values_are_each_querys_brute_force_values(self):
    rng = np.random.default_rng(3)
    u, v = rng.normal(size=(30, 4)), rng.normal(size=(50, 4))
    rel = (rng.integers(0, 30, 60), rng.integers(0, 50, 60))
    exc = (rng.integers(0, 30, 200), rng.integers(0, 50, 200))
    for chunk in (4, 1024):
      got = evaluate_retrieval(u, v, rel, exclude=exc, ks=(5, 10), chunk_size=chunk, per_query=True)
      np.testing.assert_array_equal(got["query_ids"], np.unique(rel[0]))
      for k in (5, 10):
        want = [self.brute_force(u, v, (rel[0][rel[0] == q], rel[1][rel[0] == q]), exc, k) for q in got["query_ids"]]
        assert_close(got["per_query"][f"recall@{k}"], np.array([w[0] for w in want]))
        assert_close(got["per_query"][f"map@{k}"], np.array([w[1] for w in want]))
        self.assertEqual(got[f"recall@{k}"], float(np.mean(got["per_query"][f"recall@{k}"])))
    self.assertNotIn("per_query", evaluate_retrieval(u, v, rel, exclude=exc, ks=(5,)))

  @pytest.mark.heavy
  def test_large_corpora_are_scored_in_smaller_query_chunks(self):
    # A chunk holds at most _CHUNK_ENTRIES scores; with a tiny budget every chunk is one or two queries, and the
    # padded last chunk (rows that copy a real query) must still add nothing.
    rng = np.random.default_rng(4)
    u, v = rng.normal(size=(9, 3)), rng.normal(size=(40, 3))
    rel = (rng.integers(0, 9, 30), rng.integers(0, 40, 30))
    exc = (rng.integers(0, 9, 50), rng.integers(0, 40, 50))
    want = evaluate_retrieval(u, v, rel, exclude=exc, ks=(3, 6))
    with mock.patch.object(_retrieval, "_CHUNK_ENTRIES", 60):
      got = evaluate_retrieval(u, v, rel, exclude=exc, ks=(3, 6))
    for k in (3, 6):
      want_r, want_ap = self.brute_force(u, v, rel, exc, k)
      assert_close(got[f"recall@{k}"], want_r)
      assert_close(got[f"map@{k}"], want_ap)
      assert_close(got[f"map@{k}"], want[f"map@{k}"])

  @pytest.mark.heavy
  def test_excluded_relevant_items_count_in_the_recall_denominator(self):
    # BC-Aligner's reference rule: a re-interaction with a training item is not ranked, but it still counts among
    # the query's |R| relevant items, so Recall@K = |top K of the eligible items ∩ R| / |R|.
    rng = np.random.default_rng(7)
    u, v = rng.normal(size=(12, 3)), rng.normal(size=(30, 3))
    rel = (rng.integers(0, 12, 80), rng.integers(0, 30, 80))
    exc = (
      np.concatenate([rel[0][:40], rng.integers(0, 12, 60)]),
      np.concatenate([rel[1][:40], rng.integers(0, 30, 60)]),
    )
    got = evaluate_retrieval(u, v, rel, exclude=exc, ks=(3, 8), chunk_size=5, rank_excluded_relevant=False)
    for k in (3, 8):
      recalls = []
      for q in sorted(set(rel[0])):
        relevant = set(rel[1][rel[0] == q].tolist())
        excluded = set(exc[1][exc[0] == q].tolist())
        ranked = [i for i in np.argsort(-(u[q] @ v.T), kind="stable") if i not in excluded][:k]
        recalls.append(len(relevant.intersection(ranked)) / len(relevant))
      assert_close(got[f"recall@{k}"], np.mean(recalls), err_msg=f"K={k}")
    # the rule matters on this data: ranking the excluded relevant items gives other numbers
    ranked_too = evaluate_retrieval(u, v, rel, exclude=exc, ks=(3, 8), chunk_size=5)
    self.assertGreater(abs(ranked_too["recall@8"] - got["recall@8"]), 1e-3)

  @pytest.mark.heavy
  def test_numpy_scalars_are_accepted_where_python_numbers_are(self):
    scores, relevant = np.array([[0.3, 0.9, 0.1]]), np.array([[True, False, True]])
    assert_close(recall_at_k(scores, relevant, np.int64(2)), recall_at_k(scores, relevant, 2))
    assert_close(average_precision_at_k(scores, relevant, np.array(2)), average_precision_at_k(scores, relevant, 2))
    u, v = np.eye(3), np.eye(3)
    got = evaluate_retrieval(u, v, (np.array([0, 1]), np.array([0, 2])), ks=(np.int32(1),), chunk_size=np.int64(1))
    self.assertEqual(got["recall@1"], 0.5)
    with self.assertRaisesRegex(ValueError, "`k` must be an integer"):
      recall_at_k(scores, relevant, 2.0)

  def test_bad_inputs(self):
    u, v = np.zeros((3, 2)), np.zeros((4, 2))
    for chunk in (0, -3, 1.5):
      with self.assertRaisesRegex(ValueError, "`chunk_size` must be a positive integer"):
        evaluate_retrieval(u, v, ([0], [1]), chunk_size=chunk)
    with self.assertRaisesRegex(TypeError, r"`relevant\[1\]` must hold integer indices, got dtype float64"):
      evaluate_retrieval(u, v, ([0], [1.7]))
    with self.assertRaisesRegex(TypeError, r"`candidates` must hold integer indices"):
      evaluate_retrieval(u, v, ([0], [1]), candidates=[0.5, 2.0])
    with self.assertRaisesRegex(ValueError, r"`exclude` indexes outside \[0, 3\) x \[0, 4\)"):
      evaluate_retrieval(u, v, ([0], [1]), exclude=([0], [-1]))
    with self.assertRaisesRegex(ValueError, r"every K in `ks` must be an integer in \[1, 4\]"):
      evaluate_retrieval(u, v, ([0], [1]), ks=(5,))
    with self.assertRaisesRegex(ValueError, r"`relevant` indexes outside \[0, 3\) x \[0, 4\)"):
      evaluate_retrieval(u, v, ([0], [4]))
    with self.assertRaisesRegex(ValueError, "no relevant pairs"):
      evaluate_retrieval(u, v, ([], []))
    with self.assertRaisesRegex(ValueError, r"embeddings must be \[Q, k\] and \[N, k\]"):
      evaluate_retrieval(u, np.zeros((4, 3)), ([0], [1]))


class NegativeFlipTest(absltest.TestCase):
  """The negative-flip rate against a direct count, with padded entries and sharded over a named axis."""

  @pytest.mark.heavy
  def test_rate_is_the_direct_count_eager_jit_and_sharded(self):
    rng = np.random.default_rng(0)
    y, old, new = (rng.integers(0, 3, 40) for _ in range(3))
    where = rng.random(40) < 0.8
    count = sum(1 for i in range(40) if where[i] and old[i] == y[i] and new[i] != y[i])
    expected = count / where.sum()
    self.assertGreater(count, 0)
    garbage = old.copy()
    garbage[~where] = y[~where]  # padded entries that would flip if they counted
    new_garbage = new.copy()
    new_garbage[~where] = y[~where] + 1
    eager = negative_flip_rate(y, garbage, new_garbage, where=where)
    jitted = jax.jit(negative_flip_rate)(y, garbage, new_garbage, where=where)
    sharded = jax.vmap(lambda *a: negative_flip_rate(*a[:3], where=a[3], axis_name="d"), axis_name="d")(
      *(x.reshape(4, 10) for x in (y, garbage, new_garbage, where))
    )
    for value in (eager, jitted, *sharded):
      assert_close(float(value), expected)
    # swapping old and new counts the positive flips instead: a different number on these draws
    positive = sum(1 for i in range(40) if where[i] and new[i] == y[i] and old[i] != y[i]) / where.sum()
    assert_close(float(negative_flip_rate(y, new, old, where=where)), positive)
    self.assertFalse(close(positive, expected))

  def test_bad_input_names_the_argument(self):
    with self.assertRaisesRegex(ValueError, r"`old_predictions` must be a 1-D array of classes .* float"):
      negative_flip_rate([1, 0], [0.5, 0.2], [1, 0])
    with self.assertRaisesRegex(ValueError, r"`new_predictions` has shape \(3,\) but `labels` has shape \(2,\)"):
      negative_flip_rate([1, 0], [1, 0], [1, 0, 1])


class PairedBootstrapTest(absltest.TestCase):
  """The stratified paired bootstrap against its closed forms (the weighted mean; the standard error
  sqrt(sum_s w_s^2 var_s / n_s) of the plug-in variances), a Monte-Carlo check of the interval's coverage, and its
  refusals."""

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.strata = [rng.normal(0.3, 1.0, 40), rng.exponential(2.0, 25) - 1.0, rng.normal(-0.5, 3.0, 60)]
    self.weights = [0.2, 0.3, 0.5]

  def closed_form(self, strata, weights):
    estimate = sum(w * d.mean() for w, d in zip(weights, strata))
    std = np.sqrt(sum(w**2 * d.var() / d.size for w, d in zip(weights, strata)))
    return estimate, std

  @pytest.mark.heavy
  def test_estimate_and_standard_error_match_the_closed_forms(self):
    got = paired_bootstrap(self.strata, jax.random.key(0), weights=self.weights, num_samples=20_000)
    estimate, std = self.closed_form(self.strata, self.weights)
    assert_close(got.estimate, estimate)
    # 20,000 replicates: the standard error of a standard deviation is about 1/sqrt(2 x 20,000) = 0.5 % of it
    assert_close(got.std, std, op="statistical", rtol=0.03, atol=0.0)
    self.assertLess(got.low, got.estimate)
    self.assertLess(got.estimate, got.high)
    # the percentile interval of a near-normal statistic is about estimate +- 1.96 standard errors
    assert_close(got.high - got.low, 2 * 1.959964 * std, op="statistical", rtol=0.05, atol=0.0)
    # the default weights are the mean over strata
    got = paired_bootstrap(self.strata, jax.random.key(0), num_samples=20_000)
    estimate, std = self.closed_form(self.strata, [1 / 3] * 3)
    assert_close(got.estimate, estimate)
    assert_close(got.std, std, op="statistical", rtol=0.03, atol=0.0)

  def test_bootstrap_means_pairs_columns_and_weights_strata(self):
    rng = np.random.default_rng(5)
    x = [rng.normal(1.0, 2.0, 50), rng.normal(-1.0, 1.0, 30)]
    y = [a + rng.normal(0.0, 0.1, a.size) for a in x]  # y shares x's units: pairing cancels most of the spread
    key = jax.random.key(3)
    both = bootstrap_means([np.stack([a, b], axis=1) for a, b in zip(x, y)], key, num_samples=4000, weights=[0.3, 0.7])
    diff = bootstrap_means([(a - b)[:, None] for a, b in zip(x, y)], key, num_samples=4000, weights=[0.3, 0.7])
    assert_close(both[:, 0] - both[:, 1], diff[:, 0])  # the same rows redrawn for both columns: paired
    self.assertLess((both[:, 0] - both[:, 1]).std(), 0.2 * both[:, 0].std())
    estimate, std = self.closed_form(x, [0.3, 0.7])
    assert_close(both[:, 0].mean(), estimate, op="statistical", rtol=0.0, atol=4 * std / np.sqrt(4000))
    assert_close(both[:, 0].std(), std, op="statistical", rtol=0.06, atol=0.0)
    again = bootstrap_means([np.stack([a, b], axis=1) for a, b in zip(x, y)], key, num_samples=4000, weights=[0.3, 0.7])
    np.testing.assert_array_equal(again, both)  # the key fixes the draws
    # paired_bootstrap is this resampler on the differences: the same key gives its interval exactly
    iv = paired_bootstrap([a - b for a, b in zip(x, y)], key, weights=[0.3, 0.7], num_samples=4000)
    low, high = np.quantile(diff[:, 0], [0.025, 0.975])
    self.assertEqual((iv.low, iv.high), (float(low), float(high)))

  def test_one_stratum_matches_scipys_percentile_bootstrap(self):
    d = self.strata[1]
    got = paired_bootstrap([d], jax.random.key(15), num_samples=20_000)
    peer = stats.bootstrap(
      (d,),
      np.mean,
      n_resamples=20_000,
      method="percentile",
      confidence_level=0.95,
      random_state=np.random.default_rng(5),
    )
    se = self.closed_form([d], [1.0])[1]
    # two Monte-Carlo estimates of the same 2.5 % and 97.5 % quantiles from 20,000 draws each: each estimate is off
    # by about 0.02 standard errors (sqrt(0.025 x 0.975 / 20,000) over the normal density there), their difference
    # by 0.03; 0.12 allows four of those on this skewed stratum
    for mine, theirs in ((got.low, peer.confidence_interval.low), (got.high, peer.confidence_interval.high)):
      assert_close(mine, theirs, op="statistical", rtol=0.0, atol=0.12 * se)
    assert_close(got.std, peer.standard_error, op="statistical", rtol=0.03, atol=0.0)

  @pytest.mark.heavy
  def test_replicates_drawn_in_blocks_have_the_same_spread(self):
    with mock.patch.object(_bootstrap, "_BLOCK_ENTRIES", 50):  # one or two replicates per block
      got = paired_bootstrap(self.strata, jax.random.key(1), weights=self.weights, num_samples=5000)
    assert_close(got.std, self.closed_form(self.strata, self.weights)[1], op="statistical", rtol=0.06, atol=0.0)

  @pytest.mark.heavy
  def test_the_same_key_gives_the_same_interval_and_levels_nest(self):
    a = paired_bootstrap(self.strata, jax.random.key(7), num_samples=500)
    self.assertEqual(a, paired_bootstrap(self.strata, jax.random.key(7), num_samples=500))
    self.assertNotEqual(a, paired_bootstrap(self.strata, jax.random.key(8), num_samples=500))
    narrow = paired_bootstrap(self.strata, jax.random.key(7), num_samples=500, level=0.5)
    self.assertLess(a.low, narrow.low)
    self.assertLess(narrow.high, a.high)
    constant = paired_bootstrap([np.full(5, 0.25), np.full(3, -0.5)], jax.random.key(0), num_samples=50)
    self.assertEqual(constant, (-0.125, 0.0, -0.125, -0.125))

  @pytest.mark.heavy
  def test_the_95_percent_interval_covers_the_true_difference_about_95_percent_of_the_time(self):
    rng = np.random.default_rng(5)
    covered, trials = 0, 200
    for t in range(trials):  # true theta = 0.5 * 0.2 + 0.5 * (-0.1) = 0.05
      strata = [rng.normal(0.2, 1.0, 60), rng.normal(-0.1, 0.5, 40)]
      got = paired_bootstrap(strata, jax.random.key(t), num_samples=400)
      covered += got.low <= 0.05 <= got.high
    # 200 trials: the coverage's standard error is 1.5 points
    self.assertBetween(covered / trials, 0.89, 0.99)

  def test_bad_inputs_name_the_argument(self):
    key = jax.random.key(0)
    for bad in ([], "abc", np.zeros(3)):
      with self.assertRaisesRegex(ValueError, "`differences` must be a non-empty sequence"):
        paired_bootstrap(bad, key)
    with self.assertRaisesRegex(ValueError, r"`differences\[1\]` must have rank 1, got shape \(2, 2\)"):
      paired_bootstrap([np.zeros(3), np.zeros((2, 2))], key)
    with self.assertRaisesRegex(ValueError, r"`differences\[0\]` has no queries"):
      paired_bootstrap([np.zeros(0)], key)
    with self.assertRaisesRegex(ValueError, r"`differences\[0\]` contains 1 NaN or inf"):
      paired_bootstrap([np.array([0.1, np.nan])], key)
    with self.assertRaisesRegex(ValueError, r"`weights` must have one entry per stratum, shape \(2,\), got \(3,\)"):
      paired_bootstrap([np.zeros(3), np.zeros(2)], key, weights=[1, 2, 3])
    with self.assertRaisesRegex(ValueError, r"`weights` contains 1 NaN"):
      paired_bootstrap([np.zeros(3)], key, weights=[np.nan])
    with self.assertRaisesRegex(ValueError, r"`num_samples` must be an integer in \[2, inf\], got 1"):
      paired_bootstrap([np.zeros(3)], key, num_samples=1)
    for level in (0.0, 1.0, float("nan")):
      with self.assertRaisesRegex(ValueError, r"`level` must"):
        paired_bootstrap([np.zeros(3)], key, level=level)
    with self.assertRaisesRegex(TypeError, r"`key` must be a PRNG key"):
      paired_bootstrap([np.zeros(3)], 0)


if __name__ == "__main__":
  absltest.main()
