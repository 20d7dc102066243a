"""End-to-end test of the conceptor STS experiment on its embedded synthetic corpus, and of the loaders on the
development data when it is present (BCJAX_DATA_DIR, or ../shared/data next to the repository)."""

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest

from bcjax.sentence import load_sts_genres
from experiments.conceptors_sts.__main__ import main
from experiments.conceptors_sts.pipeline import check_inputs, run_time_course
from experiments.conceptors_sts.synthetic import make_synthetic_sts
from tests._resume import assert_same_results, kill_then_resume
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BCJAX_DATA_DIR", ROOT.parent / "shared" / "data"))


@pytest.mark.heavy
class ConceptorsStsTest(absltest.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = Path(tempfile.mkdtemp(prefix="bcjax-conceptors-sts-"))
    cls.out = cls.tmp / "run"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
      cls.code = main(["--out", str(cls.out), "--no-progress"])
    cls.stdout = buf.getvalue()
    cls.results = json.loads((cls.out / "results.json").read_text())

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def test_killed_after_its_stage_resumes_to_the_same_results(self):
    resumed = kill_then_resume("experiments.conceptors_sts", main, [], "time_course/*", self.tmp / "killed")
    assert_same_results(self, resumed, self.results)

  def test_writes_outputs_in_the_paper_layouts(self):
    self.assertEqual(self.code, 0)
    for name in ("config.json", "metrics.jsonl", "results.json", "table.md", "figure2.png"):
      self.assertTrue((self.out / name).is_file(), name)
    self.assertEqual(self.results["genres"], ["news", "captions", "WordNet", "forums", "tweets"])
    for method in ("sif", "zero-shot-ca", "ca"):
      steps = np.asarray(self.results["methods"][method]["pcc_by_step"])
      self.assertEqual(steps.shape, (5, 5))
      self.assertTrue(np.all(np.isfinite(steps)) and np.all(np.abs(steps) <= 100))
      avg = self.results["methods"][method]["time_course_average"]
      assert_close([avg[g] for g in self.results["genres"]], steps.mean(axis=0))
    zero_shot = np.asarray(self.results["methods"]["zero-shot-ca"]["pcc_by_step"])
    np.testing.assert_array_equal(zero_shot, np.broadcast_to(zero_shot[0], zero_shot.shape))
    table = (self.out / "table.md").read_text().splitlines()
    self.assertEqual(table[0], "| method | news | captions | WordNet | forums | tweets | mean |")
    self.assertLen(table, 7)
    self.assertTrue(table[-1].startswith("Apertures, α = 1: stopwords 1, news 1,"), table[-1])
    self.assertEqual(self.results["alpha_spread"]["max_over_min"], 1.0)
    self.assertIn("CA beats train-from-scratch SIF on", self.stdout)
    records = [json.loads(line) for line in (self.out / "metrics.jsonl").read_text().splitlines()]
    self.assertLen([r for r in records if "event" not in r], 10)  # one per (step, method); the harness adds events

  def test_ca_beats_sif_on_planted_common_directions(self):
    ca = self.results["methods"]["ca"]["time_course_average"]
    sif = self.results["methods"]["sif"]["time_course_average"]
    self.assertGreaterEqual(sum(ca[g] > sif[g] for g in ca), 4)
    # Accumulating corpora helps CA: its last step is at least as good as zero-shot on average.
    last = np.mean(self.results["methods"]["ca"]["pcc_by_step"][-1])
    self.assertGreater(last, np.mean(self.results["methods"]["zero-shot-ca"]["pcc_by_step"][0]))

  def test_same_seed_same_numbers(self):
    out = self.tmp / "again"
    with contextlib.redirect_stdout(io.StringIO()):
      self.assertEqual(main(["--out", str(out), "--no-progress"]), 0)
    again = json.loads((out / "results.json").read_text())
    self.assertEqual(again["methods"], self.results["methods"])

  def test_paths_go_together_and_existing_output_is_kept(self):
    with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as ctx:
      main(["--vectors", "v.txt", "--out", str(self.tmp / "x")])
    self.assertEqual(ctx.exception.code, 2)
    before = (self.out / "results.json").read_bytes()
    with contextlib.redirect_stderr(io.StringIO()):
      self.assertEqual(main(["--out", str(self.out), "--no-progress"]), 2)
    self.assertEqual((self.out / "results.json").read_bytes(), before)

  def test_degenerate_inputs_are_refused_before_anything_is_computed(self):
    vectors, _, genres = make_synthetic_sts(0)
    g = next(iter(genres))
    flat = dict(genres)
    flat[g] = genres[g]._replace(scores=np.full(len(genres[g].scores), 3.0))
    with self.assertRaisesRegex(ValueError, f"genre '{g}' has .* scores spanning 0.0; Pearson's r"):
      check_inputs(vectors, flat)
    empty = dict(genres)
    empty[g] = genres[g]._replace(
      sentence1=("zzzz qqqq",) * len(genres[g].scores), sentence2=("xxxx",) * len(genres[g].scores)
    )
    with self.assertRaisesRegex(ValueError, "no sentence has a word in the word-vector vocabulary"):
      check_inputs(vectors, empty)
    with self.assertRaisesRegex(ValueError, "none of the stop words"):
      check_inputs(vectors, genres, stopwords=("notaword",))
    check_inputs(vectors, genres)

  def test_alpha_flag_is_validated_before_anything_is_written(self):
    for bad in ("automatic", "0", "-2", "nan", "inf"):
      out = self.tmp / f"bad-{bad}"
      with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as ctx:
        main(["--alpha", bad, "--out", str(out), "--no-progress"])
      self.assertEqual(ctx.exception.code, 2)
      self.assertIn("--alpha", err.getvalue())
      self.assertFalse(out.exists())
    out = self.tmp / "bad-rule"  # a rule with a fixed aperture would be silently ignored
    with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as ctx:
      main(["--alpha", "2", "--alpha-rule", "relative", "--out", str(out), "--no-progress"])
    self.assertEqual(ctx.exception.code, 2)
    self.assertIn("--alpha-rule 'relative' applies only with --alpha auto", err.getvalue())
    self.assertFalse(out.exists())

  @absltest.skipUnless((DATA / "sts" / "STSBenchmark").is_dir(), "development STS data not present")
  def test_real_sts_genres_have_the_reference_counts(self):
    genres = load_sts_genres(DATA / "sts")
    self.assertEqual(
      {g: len(p.scores) for g, p in genres.items()},
      {"news": 4299, "captions": 3250, "WordNet": 2061, "forums": 1079, "tweets": 750},
    )


def _ca_pccs(vectors, counts, genres, alpha) -> tuple[np.ndarray, dict]:
  results = run_time_course(vectors, counts, genres, alpha=alpha, progress=False)
  pccs = np.array([results["methods"][m]["pcc_by_step"] for m in ("ca", "zero-shot-ca", "sif")])
  return pccs, results


@pytest.mark.heavy
class AutomaticApertureTest(absltest.TestCase):
  """--alpha auto makes CA independent of the word vectors' scale: C(c²R, α*(c²R)) = C(R, α*(R)); a fixed α does
  not (C(c²R, α) = C(R, cα))."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.vectors, cls.counts, cls.genres = make_synthetic_sts(0)

  def scaled(self, c):
    return self.vectors._replace(vectors=self.vectors.vectors * c)

  def test_automatic_apertures_are_scale_invariant(self):
    for rule, scales in (("jaeger", (0.1, 10.0)), ("relative", (10.0,))):
      base, results = _ca_pccs(self.vectors, self.counts, self.genres, rule)
      self.assertEqual(results["alpha"], rule)
      self.assertEqual(list(results["alpha_by_step"]), ["stopwords"] + results["genres"])
      self.assertGreater(results["alpha_spread"]["max_over_min"], 1.0)
      for c in scales:
        pccs, scaled = _ca_pccs(self.scaled(c), self.counts, self.genres, rule)
        # PCCs are x 100 with entries up to 100: compare at that scale.
        assert_close(pccs, base, "linalg", scale=100.0, err_msg=f"{rule}, c = {c}")
        assert_close(
          list(scaled["alpha_by_step"].values()),
          [a / c for a in results["alpha_by_step"].values()],
          "linalg",
          err_msg=f"{rule}, c = {c}",
        )

  def test_a_fixed_aperture_is_not(self):
    base, _ = _ca_pccs(self.vectors, self.counts, self.genres, 1.0)
    pccs, _ = _ca_pccs(self.scaled(10.0), self.counts, self.genres, 1.0)
    self.assertGreater(np.abs(pccs[:2] - base[:2]).max(), 0.5)  # CA and zero-shot CA move by PCC points
    assert_close(pccs[2], base[2], "linalg", scale=100.0)  # SIF is scale-free either way

  def test_unknown_rule_is_refused(self):
    with self.assertRaisesRegex(ValueError, "`alpha` must be a positive number or one of"):
      run_time_course(self.vectors, self.counts, self.genres, alpha="jager", progress=False)


class PccDifferenceTest(absltest.TestCase):
  """The bootstrap interval of Table 1's CA - SIF difference, against scipy's Pearson and a float64 NumPy redraw."""

  def setUp(self):
    rng = np.random.default_rng(0)
    self.gold = {g: rng.uniform(0, 5, n) for g, n in (("news", 300), ("tweets", 120))}
    self.a = [{g: y + rng.normal(0, 1.0, len(y)) for g, y in self.gold.items()} for _ in range(2)]
    self.b = [{g: y + rng.normal(0, 2.0, len(y)) for g, y in self.gold.items()} for _ in range(2)]

  def test_estimate_is_the_difference_of_time_course_averaged_pearson(self):
    from scipy.stats import pearsonr

    from experiments.conceptors_sts.pipeline import mean_pcc_difference

    d = mean_pcc_difference(self.a, self.b, self.gold, seed=1, num_samples=400)
    want = np.mean(
      [
        np.mean([pearsonr(s[g], y)[0] for s in self.a]) - np.mean([pearsonr(s[g], y)[0] for s in self.b])
        for g, y in self.gold.items()
      ]
    )
    assert_close(d["estimate"], 100 * want, op="reduction", precision="float64")
    self.assertLess(d["low"], d["estimate"])
    self.assertGreater(d["high"], d["estimate"])
    self.assertGreater(d["low"], 0)  # A's noise is half B's: a clear lead
    self.assertEqual(d["units"], 420)

  def test_interval_matches_a_plain_redraw(self):
    """The same redraws done the obvious way (one replicate at a time) give the same interval."""
    from experiments.conceptors_sts.pipeline import mean_pcc_difference

    d = mean_pcc_difference(self.a, self.b, self.gold, seed=3, num_samples=300)
    rng = np.random.default_rng(3)
    reps = np.zeros(300)
    for g, y in self.gold.items():
      idx = rng.integers(0, len(y), size=(256, len(y)))
      idx = np.concatenate([idx, rng.integers(0, len(y), size=(44, len(y)))])
      for r in range(300):
        i = idx[r]
        ca = np.mean([np.corrcoef(s[g][i], y[i])[0, 1] for s in self.a])
        sif = np.mean([np.corrcoef(s[g][i], y[i])[0, 1] for s in self.b])
        reps[r] += 100 * (ca - sif) / len(self.gold)
    low, high = np.percentile(reps, [2.5, 97.5])
    assert_close([d["low"], d["high"]], [low, high], op="reduction", precision="float64")

  def test_identical_methods_differ_by_nothing(self):
    from experiments.conceptors_sts.pipeline import mean_pcc_difference

    d = mean_pcc_difference(self.a, self.a, self.gold, seed=0, num_samples=100)
    self.assertEqual((d["estimate"], d["low"], d["high"]), (0.0, 0.0, 0.0))


if __name__ == "__main__":
  absltest.main()
