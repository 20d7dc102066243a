"""The corpus-size curve (experiments.gramian_scaling) end to end on its test preset: outputs, the summary against a
recomputation from the per-seed runs, and a resumed run that recomputes one lost stage."""

import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest

from experiments.gramian_scaling.__main__ import main
from experiments.gramian_scaling.experiment import best_temperature, map_at, next_temperature, oracle_gap, table
from tests._resume import assert_same_results
from tests._tolerance import assert_close


@pytest.mark.heavy
class GramianScalingTest(absltest.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = Path(tempfile.mkdtemp(prefix="bcjax-gramian-scaling-"))
    cls.out = cls.tmp / "run"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
      cls.code = main(["--preset", "test", "--out", str(cls.out), "--no-progress"])
    cls.printed = printed.getvalue()
    cls.results = json.loads((cls.out / "results.json").read_text())

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def test_outputs(self):
    self.assertEqual(self.code, 0)
    for name in ("config.json", "metrics.jsonl", "results.json", "table.md", "scaling.png"):
      self.assertGreater((self.out / name).stat().st_size, 0, name)
    self.assertEqual(sorted(self.results["summary"]), ["exact-uniform", "sampling-uniform", "sogram-uniform"])
    self.assertLen(list((self.out / "stages").rglob("*.pkl")), 2 * 2 * 3)  # sizes x seeds x methods
    rows = [
      l for l in (self.out / "table.md").read_text().splitlines() if l.startswith("| 300 ") or l.startswith("| 600 ")
    ]
    self.assertLen(rows, 6)
    self.assertIn("Final validation MAP@10 and gains against corpus size", self.printed)

  def test_summary_recomputes_from_the_runs(self):
    for n in ("300", "600"):
      seeds = self.results["runs"][n]
      final = {m: np.array([seeds[s][m]["final_map@10"] for s in sorted(seeds)]) for m in seeds["0"]}
      summary = {m: self.results["summary"][m][n] for m in final}
      for m, values in final.items():
        assert_close(summary[m]["final_mean"], values.mean())
        assert_close(summary[m]["final_std"], values.std(), scale=1.0)
        self.assertEqual(summary[m]["seeds"], 2)
      base, ours, oracle = final["sampling-uniform"], final["sogram-uniform"], final["exact-uniform"]
      assert_close(summary["sogram-uniform"]["improvement_mean"], np.mean(100 * (ours / base - 1)))
      assert_close(summary["exact-uniform"]["improvement_mean"], np.mean(100 * (oracle / base - 1)))
      want = oracle_gap(base, ours, oracle)  # the paired gap (tested against its definition in OracleGapTest)
      for key, value in want.items():
        assert_close(summary["sogram-uniform"][key], value)
      self.assertEqual("gap_closed" in summary["sogram-uniform"], "gap_closed" in want)
      self.assertNotIn("gap_closed_mean", summary["sogram-uniform"])
      self.assertNotIn("improvement_mean", summary["sampling-uniform"])
      for m in ("sampling-uniform", "sogram-uniform"):  # the Gramian error along training, both sides, after step 0
        errors = [np.mean([np.mean(c["gramian_error"]) for c in seeds[s][m]["curve"][1:]]) for s in sorted(seeds)]
        assert_close(summary[m]["gramian_error_mean"], np.mean(errors))
        self.assertTrue(all(0 < e < 10 for e in errors), (m, errors))
      self.assertNotIn("gramian_error_mean", summary["exact-uniform"])  # the oracle estimates nothing

  def test_one_temperature_is_not_swept(self):
    self.assertEqual(self.results["temperature"], 0.1)
    self.assertEqual(self.results["temperature_sweep"], {})

  def test_a_lost_stage_is_recomputed_on_resume(self):
    copy = self.tmp / "copy"
    shutil.copytree(self.out, copy)
    for name in ("results.json", "table.md", "scaling.png"):  # as a run killed before its report leaves it
      (copy / name).unlink()
    lost = next((copy / "stages").rglob("*.pkl"))
    lost.unlink()
    with contextlib.redirect_stdout(io.StringIO()):
      self.assertEqual(main(["--resume", str(copy), "--no-progress"]), 0)
    self.assertTrue(lost.exists())
    assert_same_results(self, json.loads((copy / "results.json").read_text()), self.results)


class MapAtTest(absltest.TestCase):
  def test_interpolates_between_evaluations_and_holds_at_the_ends(self):
    curve = [
      {"train_seconds": 0.0, "map@10": 0.0},
      {"train_seconds": 10.0, "map@10": 0.2},
      {"train_seconds": 30.0, "map@10": 0.1},
    ]
    assert_close([map_at(curve, t) for t in (0.0, 5.0, 10.0, 20.0, 30.0, 45.0)], [0.0, 0.1, 0.2, 0.15, 0.1, 0.1])


class OracleGapTest(absltest.TestCase):
  def test_a_resolved_gap_against_its_definition(self):
    base, ours, oracle = np.array([0.20, 0.22, 0.21]), np.array([0.23, 0.24, 0.22]), np.array([0.25, 0.28, 0.26])
    d = oracle - base  # 0.05, 0.06, 0.05
    got = oracle_gap(base, ours, oracle)
    assert_close(got["oracle_gap_mean"], np.mean(d))
    assert_close(got["oracle_gap_se"], np.sqrt(np.sum((d - d.mean()) ** 2) / 2) / np.sqrt(3))
    assert_close(got["gap_closed"], 100 * np.mean(ours - base) / np.mean(d))  # (0.03+0.02+0.01)/3 / (0.16/3): 37.5 %
    assert_close(got["gap_closed"], 37.5)
    # an estimator below sampling closes a negative share
    assert_close(oracle_gap(base, 2 * base - ours, oracle)["gap_closed"], -37.5)
    self.assertNotIn("above_oracle", got)
    # an estimator above the oracle (0.16 / 3 over sampling is 231 % of the gap's mean) closes all of it, no more
    above = oracle_gap(base, base + np.array([0.12, 0.14, 0.11]), oracle)
    self.assertEqual(above["gap_closed"], 100.0)
    self.assertTrue(above["above_oracle"])

  def test_a_gap_inside_the_seed_noise_gives_no_share(self):
    base, oracle = np.array([0.20, 0.24, 0.18]), np.array([0.23, 0.21, 0.19])  # d = +0.03, -0.03, +0.01
    got = oracle_gap(base, base + 0.01, oracle)
    self.assertNotIn("gap_closed", got)
    assert_close(got["oracle_gap_mean"], 0.01 / 3)
    # an oracle clearly below sampling has no gap to close either
    self.assertNotIn("gap_closed", oracle_gap(base, base, base - np.array([0.05, 0.06, 0.05])))
    # one seed cannot tell the gap from noise
    self.assertEqual(sorted(oracle_gap(base[:1], base[:1], oracle[:1])), ["oracle_gap_mean"])

  def test_two_seeds_resolve_nothing_and_three_give_the_t_interval(self):
    base, ours, oracle = np.array([0.20, 0.22, 0.21]), np.array([0.23, 0.24, 0.22]), np.array([0.25, 0.28, 0.26])
    # two seeds 0.05 and 0.06 apart from the oracle: far beyond 2 SE, yet no interval (2 seeds; 3 give one)
    two = oracle_gap(base[:2], ours[:2], oracle[:2])
    self.assertEqual(sorted(two), ["oracle_gap_mean"])
    text = table({"sogram-uniform": {"1000": {**two, "seeds": 2}}})
    self.assertIn("unresolved (gap +0.0550; no interval: 2 seeds; 3 give one)", text)
    d = oracle - base
    half = 4.302652729911275 * np.sqrt(np.sum((d - d.mean()) ** 2) / 2) / np.sqrt(3)  # t, 2 degrees of freedom
    got = oracle_gap(base, ours, oracle)
    assert_close(got["oracle_gap_ci95"], [d.mean() - half, d.mean() + half], scale=d.mean())
    self.assertIn(
      f"| 37 (gap +0.0533 [{d.mean() - half:+.4f}, {d.mean() + half:+.4f}])",  # 37.5 % closed, shown as 37
      table({"sogram-uniform": {"1000": {**got, "seeds": 3}}}),
    )


class TemperatureSweepTest(absltest.TestCase):
  def test_a_best_tau_on_the_grid_edge_extends_the_grid_past_it(self):
    self.assertEqual(next_temperature({0.1: 0.13, 0.3: 0.15, 1.0: 0.18, 3.0: 0.20}), 9.0)
    self.assertEqual(next_temperature({0.1: 0.2, 0.3: 0.15, 1.0: 0.1}), 0.03333)
    self.assertIsNone(next_temperature({0.1: 0.1, 0.3: 0.2, 1.0: 0.1}))  # an inner optimum
    self.assertIsNone(next_temperature({0.3: 0.2}))  # no grid to extend
    self.assertEqual(next_temperature({1.0: 0.1, 2.0: 0.3}), 4.0)  # the step of the outermost two points

  def test_best_temperature_takes_the_highest_map_and_the_smallest_tau_of_a_tie(self):
    self.assertEqual(best_temperature({0.1: 0.2, 0.3: 0.25, 1.0: 0.1}), 0.3)
    self.assertEqual(best_temperature({1.0: 0.25, 0.3: 0.25, 0.1: 0.2}), 0.3)

  @pytest.mark.heavy
  def test_the_tuned_temperature_trains_every_softmax_run(self):
    with tempfile.TemporaryDirectory() as tmp:
      with contextlib.redirect_stdout(io.StringIO()):
        code = main(
          [
            "--preset",
            "test",
            "--out",
            f"{tmp}/run",
            "--no-progress",
            "--sizes",
            "300",
            "--seeds",
            "1",
            "--methods",
            "sampling-uniform,sagram-uniform,softmax-logq",
            "--temperatures",
            "0.1,1",
            "--temperature-extensions",
            "1",
          ]
        )
      self.assertEqual(code, 0)
      results = json.loads(Path(f"{tmp}/run/results.json").read_text())
      table = Path(f"{tmp}/run/table.md").read_text()
      stages = sorted(str(p.relative_to(f"{tmp}/run/stages")) for p in Path(f"{tmp}/run/stages").rglob("*.pkl"))
    sweep = {float(t): v for t, v in results["temperature_sweep"].items()}
    # the grid's best decides the one extension: 10 past a best 1, 0.01 past a best 0.1
    first = best_temperature({t: sweep[t] for t in (0.1, 1.0)})
    self.assertEqual(sorted(sweep), sorted([0.1, 1.0, 10.0 if first == 1.0 else 0.01]))
    self.assertEqual(results["temperature_on_edge"], next_temperature(sweep) is not None)
    self.assertEqual(results["temperature"], best_temperature(sweep))
    # The curve's softmax run at the smallest n and seed 0 is the sweep's run at the chosen τ (the same config, corpus
    # and keys), reused rather than trained again: no stage of its own.
    self.assertEqual(results["runs"]["300"]["0"]["softmax-logq"]["final_map@10"], sweep[results["temperature"]])
    self.assertNotIn("n=300/seed=0/softmax-logq.pkl", stages)
    self.assertEqual(len(stages), len(sweep) + 2)  # the sweep's runs and the two other methods
    self.assertIn(f"Softmax temperature τ = {results['temperature']}", table)
    sagram = results["summary"]["sagram-uniform"]["300"]  # SAGram's caches, against sampling
    base = results["runs"]["300"]["0"]["sampling-uniform"]["final_map@10"]
    ours = results["runs"]["300"]["0"]["sagram-uniform"]["final_map@10"]
    if base > 0:
      assert_close(sagram["improvement_mean"], 100 * (ours / base - 1))


if __name__ == "__main__":
  absltest.main()
