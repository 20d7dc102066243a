"""The Gramian experiments end to end on their `test` presets: outputs, table layout, determinism, refusal to
overwrite, and the ML-100K path when the development data is present."""

import json
import os
import types
from pathlib import Path
from unittest import mock

import jax
import numpy as np
import pytest
from absl.testing import absltest

from bcjax.data import PAD, FeatureBags, PairCorpus, Pairs, synthetic_link_corpus
from experiments.gramian_estimation.__main__ import main as estimation_main
from experiments.gramian_estimation.experiment import EXPERIMENT as estimation
from experiments.gramian_training.__main__ import main as training_main
from experiments.gramian_training.experiment import EXPERIMENT as training
from experiments.gramian_training.experiment import improvements, notes, oracle_gaps, table_2
from experiments.two_tower.data import check_corpus, corpus_notes, load_corpus
from tests._resume import assert_same_results, kill_then_resume
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BCJAX_DATA_DIR", ROOT.parent / "shared" / "data"))


@pytest.mark.heavy
class GramianEstimationTest(absltest.TestCase):
  def test_shard_tables_refuses_a_device_count_that_does_not_divide_the_tables(self):
    # The check runs in load(), before the run directory exists; a mesh of 7 devices stands in for --devices 7.
    _, args, cfg = estimation.parse(["--preset", "test", "--shard-tables"])
    args.mesh = types.SimpleNamespace(devices=np.empty(7))
    with self.assertRaisesRegex(
      ValueError,
      r"--shard-tables: the left side has 300 entities, not divisible by the "
      r"7 devices",
    ):
      estimation.load(args, cfg)
    args.mesh = types.SimpleNamespace(devices=np.empty(4))  # 300 = 4 x 75 rows per device
    self.assertEqual(estimation.load(args, cfg).left.num_entities, 300)

  def test_outputs_and_determinism(self):
    out = Path(self.create_tempdir()) / "run"
    self.assertEqual(estimation_main(["--preset", "test", "--out", str(out), "--no-progress"]), 0)
    for name in ("results.json", "table.md", "figure2a.png", "figure2b.png", "metrics.jsonl", "config.json"):
      self.assertTrue((out / name).exists(), name)
    run = json.loads((out / "results.json").read_text())
    summary = run["mean_error_second_half"]["left"]
    self.assertEqual(len(summary), 13)  # 6 estimators x 2 batch sizes + the one extra alpha
    # SAGA's cache-corrected estimate beats the plain batch estimate of the same size.
    self.assertLess(summary["sagram-saga B=32"], summary["sampling-uniform B=32"])
    table = (out / "table.md").read_text()
    self.assertIn("| sagram-saga |", table)
    # The killed run computed the trajectory's errors in another process from the same seed: the same numbers, bit
    # for bit (the determinism check), and the resumed run finishes with the same results.
    resumed = kill_then_resume(
      "experiments.gramian_estimation",
      estimation_main,
      ["--preset", "test"],
      "trajectory",
      Path(self.create_tempdir()) / "killed",
    )
    self.assertEqual(resumed["errors"], run["errors"])
    assert_same_results(self, resumed, run)

  def test_refuses_a_non_empty_out(self):
    out = Path(self.create_tempdir())
    (out / "keep.txt").write_text("mine")
    self.assertEqual(estimation_main(["--preset", "test", "--out", str(out), "--no-progress"]), 2)
    self.assertEqual((out / "keep.txt").read_text(), "mine")


class ValidationQueriesTest(absltest.TestCase):
  """--eval-queries: a fixed random subset of the validation queries, ranked exactly as if the validation split held
  only their pairs."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    import jax
    from flax import nnx

    from bcjax.models import TwoTower
    from experiments.two_tower.train import make_embedder

    cls.corpus = check_corpus(synthetic_link_corpus(300, 2400, seed=4))
    model = TwoTower(cls.corpus.vocab_size, 8, 3, 3, (16, 8), rngs=nnx.Rngs(params=jax.random.key(0)))
    graphdef, cls.params = nnx.split(model)
    cls.embed = staticmethod(make_embedder(graphdef, chunk_size=64))

  def test_the_subset_is_fixed_sorted_and_limited(self):
    from experiments.gramian_training.run import validation_queries

    every = np.unique(self.corpus.val.left)
    np.testing.assert_array_equal(validation_queries(self.corpus, 0, 0), every)
    np.testing.assert_array_equal(validation_queries(self.corpus, len(every) + 5, 0), every)
    some = validation_queries(self.corpus, 20, 3)
    self.assertLen(some, 20)
    self.assertTrue(np.all(np.diff(some) > 0) and np.all(np.isin(some, every)))
    np.testing.assert_array_equal(validation_queries(self.corpus, 20, 3), some)
    self.assertFalse(np.array_equal(validation_queries(self.corpus, 20, 4), some))

  @pytest.mark.heavy
  def test_a_subset_ranks_like_a_validation_split_of_only_its_pairs(self):
    from bcjax.data import Pairs
    from experiments.gramian_training.run import evaluate, validation_queries

    some = validation_queries(self.corpus, 25, 1)
    keep = np.isin(self.corpus.val.left, some)
    only = self.corpus._replace(val=Pairs(*(x[keep] for x in self.corpus.val)))
    candidates = np.arange(0, 300, 2)
    for exact in (False, True):
      capped = evaluate(self.embed, self.params, self.corpus, candidates, some, exact=exact)
      split = evaluate(self.embed, self.params, only, candidates, np.unique(only.val.left), exact=exact)
      self.assertEqual(sorted(capped), sorted(split))
      for key, value in split.items():
        self.assertEqual(capped[key], value, key)
      every = evaluate(self.embed, self.params, self.corpus, candidates, np.unique(self.corpus.val.left), exact=exact)
      self.assertNotEqual(every["map@10"], capped["map@10"])  # the subset is not the whole split

  @pytest.mark.heavy
  def test_candidate_evaluation_embeds_only_the_ranked_items(self):
    from bcjax.metrics import evaluate_retrieval
    from experiments.gramian_training.run import evaluate

    queries, candidates = np.unique(self.corpus.val.left), np.arange(1, 300, 3)
    embedded = []

    def spy(params, groups, side, idx=None):
      embedded.append((side, None if idx is None else len(idx)))
      return self.embed(params, groups, side, idx)

    got = evaluate(spy, self.params, self.corpus, candidates, queries)
    ranked = np.union1d(candidates, self.corpus.val.right)
    self.assertEqual(embedded, [("left", len(queries)), ("right", len(ranked))])
    u = self.embed(self.params, self.corpus.left.groups, "left")
    v = self.embed(self.params, self.corpus.right.groups, "right")
    want = evaluate_retrieval(
      u,
      v,
      (self.corpus.val.left, self.corpus.val.right),
      exclude=(self.corpus.train.left, self.corpus.train.right),
      candidates=candidates,
    )
    self.assertEqual(got["queries"], want["queries"])
    assert_close(got["map@10"], want["map@10"])
    assert_close(got["recall@10"], want["recall@10"])


class CorpusNotesTest(absltest.TestCase):
  def test_sizes_cold_entities_and_empty_feature_groups_are_noted(self):
    left = FeatureBags((np.arange(3)[:, None], np.array([[5, PAD], [PAD, PAD], [6, 7]])), ("id", "genre"))
    right = FeatureBags((np.arange(4)[:, None],), ("id",))
    pairs = lambda l, r: Pairs(np.array(l), np.array(r), np.ones(len(l), np.float32))
    corpus = PairCorpus(left, right, 8, pairs([0, 1, 2], [0, 0, 1]), pairs([0, 2], [1, 3]), "toy")
    self.assertEqual(
      corpus_notes(corpus),
      (
        "toy: 3 left entities, 4 right entities; 3 training and 2 validation pairs",
        "2 of 4 right entities are in no training pair; 1 of 2 validation pairs have one as their target",
        "1 of 3 left entities have no 'genre' feature",
      ),
    )


class OracleGapsTest(absltest.TestCase):
  """The share of the sampling -> oracle gap SOGram closes, only where the gap is outside the validation queries'
  noise, and never above 100 %."""

  def methods(self, base_ap, ours_map, oracle_ap):
    queries = np.arange(len(base_ap))
    row = lambda ap, final: {"final_ap@10_by_query": (queries, np.asarray(ap)), "final_map@10": final}
    return {
      "sampling-uniform": row(base_ap, float(np.mean(base_ap))),
      "sogram-uniform": row(base_ap, ours_map),
      "exact-uniform": row(oracle_ap, float(np.mean(oracle_ap))),
    }

  def test_resolved_unresolved_and_above_the_oracle(self):
    rng = np.random.default_rng(0)
    base = rng.random(400) * 0.4
    key = jax.random.key(0)
    resolved = oracle_gaps(self.methods(base, float(np.mean(base)) + 0.05, base + 0.1), key)["uniform"]
    assert_close(resolved["oracle_gap"], 0.1, scale=1.0)
    self.assertTrue(resolved["resolved"])
    self.assertGreater(resolved["oracle_gap_ci95"][0], 0)
    assert_close(resolved["gap_closed_pct"], 50.0, scale=100.0)  # 0.05 of a 0.1 gap
    self.assertNotIn("note", resolved)
    noise = rng.normal(0, 0.2, 400)
    noise -= noise.mean() - 0.002  # a gap of 0.002 inside a spread of 0.2 per query
    unresolved = oracle_gaps(self.methods(base, 0.3, base + noise), key)["uniform"]
    self.assertFalse(unresolved["resolved"])
    self.assertIsNone(unresolved["gap_closed_pct"])
    self.assertIn("not resolved, so no share of it is reported", unresolved["note"])
    above = oracle_gaps(self.methods(base, float(np.mean(base)) + 0.231, base + 0.1), key)["uniform"]
    self.assertEqual(above["gap_closed_pct"], 100.0)  # not 231 %
    self.assertIn("above the oracle's by 0.1310", above["note"])
    results = {"methods": self.methods(base, float(np.mean(base)) + 0.231, base + 0.1), "oracle_gaps": {}}
    for m in results["methods"].values():
      m.update(curve=[{"map@10": m["final_map@10"], "train_seconds": 1.0}], train_seconds=1.0, exact={"recall@50": 0})
    for entry, cell in ((above, "100% (SOGram above the oracle)"), (unresolved, "not measurable (oracle gap [")):
      results["oracle_gaps"]["uniform"] = entry
      self.assertIn(cell, table_2(results))


class ImprovementTest(absltest.TestCase):
  """SOGram's relative improvement over the baseline carries its interval over the validation queries, and a change
  inside the queries' noise says so, in the same row where an unresolved oracle gap is withheld."""

  def test_the_movielens_report(self):
    # MAP@10 0.00444 vs 0.00401 over 609 queries (the report's +10.9 %), most queries scoring 0
    rng = np.random.default_rng(2)
    base = np.where(rng.random(609) < 0.03, rng.random(609) * 0.27, 0.0)
    ours = np.where(rng.random(609) < 0.03, rng.random(609) * 0.27, 0.0)
    base *= 0.00401 / base.mean()
    ours *= 0.00444 / ours.mean()
    queries = np.arange(609)
    row = lambda ap: {"final_ap@10_by_query": (queries, ap), "final_map@10": float(ap.mean())}
    methods = {"sampling-uniform": row(base), "sogram-uniform": row(ours)}
    entry = improvements(methods, jax.random.key(0))["uniform"]
    assert_close(entry["estimate"], 100.0 * (0.00444 / 0.00401 - 1.0))
    low, high = entry["ci95"]
    self.assertLess(low, 0.0)  # inside the noise of 609 sparse queries
    self.assertGreater(high, 20.0)
    self.assertFalse(entry["resolved"])
    # the percentile interval against an independent float64 NumPy bootstrap of the same statistic (the upper tail
    # of a ratio of sparse means moves by ~10 points between independent draws of 2,000-4,000 replicates)
    draws = np.random.default_rng(11).integers(0, 609, size=(4000, 609))
    rel = 100.0 * (ours[draws].mean(1) / base[draws].mean(1) - 1.0)
    assert_close(low, float(np.quantile(rel, 0.025)), "statistical", rtol=0.0, atol=6.0)
    assert_close(high, float(np.quantile(rel, 0.975)), "statistical", rtol=0.0, atol=20.0)
    # a change far outside the noise is resolved
    clear = improvements({"sampling-uniform": row(base), "sogram-uniform": row(base * 2.0)}, jax.random.key(0))
    self.assertTrue(clear["uniform"]["resolved"])
    assert_close(clear["uniform"]["estimate"], 100.0)
    self.assertEqual(clear["uniform"]["ci95"], [100.0, 100.0])  # a constant ratio in every redraw
    # the table's cell and the notes under it
    results = {"methods": methods, "improvements": {"uniform": entry}, "data_notes": ["a note"], "oracle_gaps": {}}
    for m in methods.values():
      m.update(curve=[{"map@10": m["final_map@10"], "train_seconds": 1.0}], train_seconds=1.0, exact={"recall@50": 0})
    self.assertIn(f"| +10.7% [{low:+.1f}, {high:+.1f}] (within the noise) |", table_2(results))
    results["oracle_gaps"] = {"uniform": {"note": "not resolved"}}
    self.assertEqual(notes(results), ["Data: a note", "Gap closed (uniform): not resolved."])


class TrainingTableTest(absltest.TestCase):
  def test_table_md_has_its_title_and_says_the_time_column_has_no_interval(self):
    curve = [{"map@10": 0.0, "train_seconds": 0.0}, {"map@10": 0.2, "train_seconds": 2.0}]
    row = lambda final: {
      "final_map@10": final,
      "best_map@10": final,
      "curve": curve,
      "train_seconds": 4.0,
      "exact": {"recall@50": 0.1},
    }
    results = {
      "dataset": "movielens-100k",
      "preset": "quick",
      "seed": 3,
      "corpus": {"right": 1682},
      "methods": {"sampling-uniform": row(0.1), "sogram-uniform": row(0.2)},
      "data_notes": [],
    }
    written = {}
    run = types.SimpleNamespace(write_text=written.__setitem__, out=Path(self.create_tempdir().full_path))
    cfg = types.SimpleNamespace(num_candidates=1000)
    with mock.patch("experiments.gramian_training.experiment.figure_3"):
      printed = training.report(run, types.SimpleNamespace(dataset="movielens-100k"), cfg, results)
    table = written["table.md"]
    self.assertEqual(
      table.splitlines()[0],
      "# SOGram vs candidate sampling on movielens-100k (preset quick, seed 3): final validation MAP@10 against 1000 "
      "candidates (Table 2 layout)",
    )
    self.assertIn("SOGram time to baseline's final (one run: no interval)", table)
    self.assertIn("| 50% |", table)  # its first evaluation at 0.1 or above: 2 s of SOGram's 4 s
    self.assertIn("no interval (one run: 3 runs give one", table)
    self.assertIn(table, printed)


@pytest.mark.heavy
class GramianTrainingTest(absltest.TestCase):
  def test_outputs(self):
    out = Path(self.create_tempdir()) / "run"
    self.assertEqual(training_main(["--preset", "test", "--out", str(out), "--no-progress"]), 0)
    results = json.loads((out / "results.json").read_text())
    self.assertEqual(set(results["methods"]), {"sampling-uniform", "sogram-uniform", "exact-uniform", "softmax-logq"})
    self.assertRegex(results["data_notes"][0], r"^synthetic-\d+: [\d,]+ entities; [\d,]+ training and")
    self.assertEqual(set(results["oracle_gaps"]), {"uniform"})
    self.assertEqual(len(results["oracle_gaps"]["uniform"]["oracle_gap_ci95"]), 2)
    for res in results["methods"].values():
      self.assertEqual([c["step"] for c in res["curve"]], [0, 10, 20])
      self.assertGreater(res["compile_seconds"], 0)
      self.assertBetween(res["exact"]["recall@50"], 0.0, 1.0)
    table = (out / "table.md").read_text()
    self.assertIn("| uniform |", table)
    self.assertIn("gap closed by SOGram", table)
    self.assertIn(f"Data: {results['data_notes'][0]}", table)  # the data notes are in table.md, not only on stdout
    gain = results["improvements"]["uniform"]
    self.assertEqual(gain["over"], "validation queries")
    if gain["ci95"] is None:  # the test preset's few scoring queries may leave the ratio unbounded: said so
      self.assertIn("(no interval: too few scoring queries)", table)
    else:
      self.assertIn(f"[{gain['ci95'][0]:+.1f}, {gain['ci95'][1]:+.1f}]", table)
    uniform = next(line for line in table.splitlines() if line.startswith("| uniform |"))
    oracle = results["methods"]["exact-uniform"]["final_map@10"]
    self.assertIn(f"| {oracle:.4f} |", uniform)  # the oracle's column
    for method in results["methods"]:
      self.assertIn(f"| {method} |", table)  # every method's row
    self.assertTrue((out / "figure3.png").stat().st_size > 0)
    resumed = kill_then_resume(
      "experiments.gramian_training",
      training_main,
      ["--preset", "test"],
      "sampling-uniform",
      Path(self.create_tempdir()) / "killed",
    )
    assert_same_results(self, resumed, results)

  def test_a_corpus_without_validation_pairs_is_refused_before_training(self):
    corpus = synthetic_link_corpus(50, 200, num_clusters=5, seed=0)
    with self.assertRaisesRegex(ValueError, r"200 training and 0 validation pairs"):
      check_corpus(
        corpus._replace(
          train=corpus.train._replace(left=np.zeros(200, np.int32)), val=corpus.val._replace(left=np.zeros(0, np.int32))
        )
      )
    self.assertIs(check_corpus(corpus), corpus)
    with self.assertRaisesRegex(ValueError, "unknown MovieLens variant"):
      load_corpus("movielens-5k", None, num_pages=1, num_links=1, seed=0)

  def test_unknown_method_is_rejected(self):
    with self.assertRaises(SystemExit):
      training_main(["--preset", "test", "--methods", "sogram-zipf", "--out", self.create_tempdir().full_path])

  @absltest.skipUnless((DATA / "movielens" / "ml-100k" / "u.data").exists(), "development ML-100K not present")
  def test_movielens_100k(self):
    out = Path(self.create_tempdir()) / "run"
    self.assertEqual(
      training_main(
        [
          "--dataset",
          "movielens-100k",
          "--data-dir",
          str(DATA / "movielens" / "ml-100k"),
          "--preset",
          "test",
          "--methods",
          "sampling-uniform",
          "--out",
          str(out),
          "--no-progress",
        ]
      ),
      0,
    )
    results = json.loads((out / "results.json").read_text())
    self.assertEqual(results["corpus"]["train_pairs"], 80_000)


if __name__ == "__main__":
  absltest.main()
