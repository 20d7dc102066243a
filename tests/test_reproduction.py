"""The generated reproduction page: summaries from run folders, measures from results, the page from both, the
check that the committed page is what its summaries give, the protocol audits against the presets, and the one-call
suite at its tiny size."""

import copy
import dataclasses
import json
import math
import tempfile
import unittest
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from experiments.reproduction import cli, measures, page, rules, suite
from experiments.reproduction.claims import CLAIMS, PAPERS
from experiments.reproduction.summary import command, find_groups, group_name, load_summaries, summarise_group
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]
SUMMARIES = ROOT / "docs" / "reproduction" / "summaries"


def _ca_results(ca_minus_sif: float, low: float, high: float) -> dict:
  genres = ["news", "captions"]
  course = {"pcc_by_step": [[60.0, 70.0], [61.0, 71.0]], "time_course_average": {"news": 60.5, "captions": 70.5}}
  sif = {"pcc_by_step": [[59.0, 69.0], [59.0, 69.0]], "time_course_average": {"news": 59.0, "captions": 69.0}}
  return {
    "genres": genres,
    "methods": {"ca": course, "sif": sif, "zero-shot-ca": sif},
    "differences": {
      "ca_minus_sif": {"estimate": ca_minus_sif, "low": low, "high": high, "over": "sentence pairs", "units": 500},
    },
  }


def _write_run(folder: Path, experiment: str, results: dict, seed: int = 0, **config) -> Path:
  folder.mkdir(parents=True)
  (folder / "results.json").write_text(json.dumps(results))
  (folder / "config.json").write_text(
    json.dumps(
      {
        "experiment": experiment,
        "argv": ["--vectors", "/data/deep/glove/vectors", "--out", str(folder), "--no-progress"],
        "preset": "quick",
        "config": {"seed": seed, **config},
      }
    )
  )
  return folder


class SummaryTest(unittest.TestCase):
  def setUp(self):
    self.tmp = Path(tempfile.mkdtemp())

  def test_groups_by_seed_suffix(self):
    for name in ("bc-quick-s1", "bc-quick-s2", "ca-glove-a1"):
      _write_run(self.tmp / name, "conceptors_sts", _ca_results(1.0, 0.5, 1.5))
    (self.tmp / "unfinished").mkdir()
    groups = find_groups(self.tmp)
    self.assertEqual(sorted(groups), ["bc-quick", "ca-glove-a1"])
    self.assertEqual([p.name for p in groups["bc-quick"]], ["bc-quick-s1", "bc-quick-s2"])
    self.assertEqual(group_name(Path("x-s12")), "x")
    self.assertEqual(group_name(Path("x-seed")), "x-seed")

  def test_one_run_keeps_its_own_interval(self):
    run = _write_run(self.tmp / "ca", "conceptors_sts", _ca_results(4.3, 3.7, 5.0))
    m = summarise_group("ca", [run])["measures"]["ca_minus_sif"]
    self.assertEqual((m["estimate"], m["low"], m["high"], m["over"]), (4.3, 3.7, 5.0, "sentence pairs"))

  def test_seeds_give_the_mean_and_its_t_interval(self):
    values = [1.0, 2.5, 0.5]
    runs = [
      _write_run(self.tmp / f"g-s{i}", "conceptors_sts", _ca_results(v, v - 1, v + 1), seed=i)
      for i, v in enumerate(values)
    ]
    m = summarise_group("g", runs)["measures"]["ca_minus_sif"]
    half = stats.t.ppf(0.975, 2) * np.std(values, ddof=1) / math.sqrt(3)
    assert_close(
      [m["estimate"], m["low"], m["high"]],
      [np.mean(values), np.mean(values) - half, np.mean(values) + half],
      op="reduction",
    )
    self.assertEqual((m["over"], m["units"], m["per_run"]), ("seeds", 3, values))

  def test_runs_of_a_group_may_differ_only_in_their_seed(self):
    a = _write_run(self.tmp / "g-s1", "conceptors_sts", _ca_results(1.0, 0, 2), seed=1, alpha="1")
    b = _write_run(self.tmp / "g-s2", "conceptors_sts", _ca_results(1.0, 0, 2), seed=2, alpha="4")
    with self.assertRaisesRegex(ValueError, "differs from g-s1 in alpha"):
      summarise_group("g", [a, b])

  def test_provenance_and_command(self):
    run = _write_run(self.tmp / "ca", "conceptors_sts", _ca_results(1.0, 0, 2))
    summary = summarise_group("ca", [run])
    self.assertEqual(summary["runs"][0]["commit"], None)  # written before config.json recorded it: said so
    config = json.loads((run / "config.json").read_text())
    self.assertEqual(command(config), "python -m experiments.conceptors_sts --vectors .../glove/vectors")

  def test_unknown_experiment_is_refused(self):
    run = _write_run(self.tmp / "u", "error_amplification", {})
    with self.assertRaisesRegex(ValueError, "no measures are defined for experiment 'error_amplification'"):
      summarise_group("u", [run])


def _bc_results() -> dict:
  def method(intended, unintended, errors):
    return {
      "intended_degradation_pct": intended,
      "unintended_degradation_pct": unintended,
      "combined_degradation_pct": intended + unintended,
      "alignment_error": float(np.mean(errors)),
      "alignment_error_by_version": errors,
    }

  return {
    "methods": {
      "bc-aligner": method(-3.0, -0.6, [0.1, 0.2, 0.3]),
      "joint-lin-sloss": method(-3.6, -1.1, [0.1, 0.3, 0.6]),
      "post-lin-sloss": method(0.0, -10.0, [1.0, 1.2, 1.4]),
      "post-lin-mloss": method(0.0, -14.0, [1.1, 1.3, 1.5]),
    },
    "lambda_sweep": {
      "0.5": method(-1.0, -3.0, [0.5]),
      "2": method(-3.0, -0.6, [0.2]),
      "8": method(-7.0, -0.2, [0.1]),
    },
  }


class MeasuresTest(unittest.TestCase):
  """Each extracted number against the paper's definition, computed here by hand."""

  def test_bc_aligner(self):
    m = measures.bc_aligner(_bc_results())
    # BC-Aligner's combined degradation minus the other's: positive = BC-Aligner degrades less
    assert_close(m["lead.combined.joint-lin-sloss"].estimate, (-3.6) - (-4.7), op="elementwise", precision="float64")
    assert_close(m["lead.unintended.joint-lin-sloss"].estimate, -0.6 - (-1.1), op="elementwise", precision="float64")
    assert_close(
      m["alignment_lead.joint-lin-sloss"].estimate,
      np.mean([0.1, 0.3, 0.6]) - 0.2,
      op="elementwise",
      precision="float64",
    )
    assert_close(
      m["error_growth_gap.joint-lin-sloss"].estimate, (0.6 - 0.1) - (0.3 - 0.1), op="elementwise", precision="float64"
    )
    assert_close(m["mloss_minus_sloss.unintended"].estimate, -4.0, op="elementwise", precision="float64")
    # slopes per doubling of λ: log2 λ = -1, 1, 3
    assert_close(
      m["lambda_slope.intended"].estimate,
      np.polyfit([-1, 1, 3], [-1.0, -3.0, -7.0], 1)[0],
      op="elementwise",
      precision="float64",
    )
    assert_close(
      m["lambda_slope.unintended"].estimate,
      np.polyfit([-1, 1, 3], [-3.0, -0.6, -0.2], 1)[0],
      op="elementwise",
      precision="float64",
    )

  def test_gramian_training_reach_fraction(self):
    curve = [{"step": s, "map@10": v} for s, v in ((0, 0.0), (100, 0.2), (200, 0.35), (400, 0.4))]
    results = {
      "methods": {
        "sampling-uniform": {"final_map@10": 0.3, "curve": curve},
        "sogram-uniform": {"final_map@10": 0.4, "curve": curve},
      },
      "improvements": {"uniform": {"estimate": 33.3, "ci95": [20.0, 40.0], "over": "validation queries"}},
    }
    m = measures.gramian_training(results)
    self.assertEqual(m["reach_fraction.uniform"].estimate, 200 / 400)  # first evaluation at or above 0.3
    self.assertEqual((m["improvement_pct.uniform"].low, m["improvement_pct.uniform"].high), (20.0, 40.0))
    never = copy.deepcopy(results)
    never["methods"]["sampling-uniform"]["final_map@10"] = 0.9
    self.assertEqual(measures.gramian_training(never)["reach_fraction.uniform"].estimate, 1.0)

  def test_icl_accuracy_gap_and_epoch_cost(self):
    runs = {
      "retrain": [{"accuracy": {"all": 70.0}, "train_seconds": 10.0, "epochs": 10} for _ in range(3)],
      "icl": [
        {"accuracy": {"all": a}, "train_seconds": t, "epochs": 2} for a, t in ((71.0, 4.0), (69.0, 5.0), (70.0, 6.0))
      ],
    }
    results = {
      "alpha_sweep": {
        "0.3": {
          "methods": {
            "retrain": {"runs": runs["retrain"]},
            "icl": {"runs": runs["icl"], "time_speedup": 2.0, "time_speedup_ci95": [1.5, 2.5], "epoch_speedup": 5.0},
            "meta": {"runs": runs["icl"], "time_speedup": None, "epoch_speedup": None, "speedup_status": "diverged"},
          }
        }
      }
    }
    m = measures.icl(results)
    gaps = [1.0, -1.0, 0.0]
    assert_close(m["accuracy_gap.icl.a0.3"].estimate, np.mean(gaps), op="reduction", scale=70.0, precision="float64")
    assert_close(m["epoch_cost.icl.a0.3"].estimate, np.mean([2.0, 2.5, 3.0]), op="elementwise", precision="float64")
    self.assertEqual((m["time_speedup.icl.a0.3"].low, m["time_speedup.icl.a0.3"].high), (1.5, 2.5))
    self.assertIsNone(m["epoch_speedup.icl.a0.3"].low)  # no interval stored: none invented
    self.assertIsNone(m["time_speedup.meta.a0.3"].estimate)  # no speed-up, and the report's reason why
    self.assertIn("diverged", m["time_speedup.meta.a0.3"].note)


class PageTest(unittest.TestCase):
  def test_every_claim_is_on_the_page_with_the_rules_verdicts(self):
    summaries = load_summaries(SUMMARIES)
    text = page.render(summaries)
    for claim in CLAIMS:
      with self.subTest(claim.key):
        self.assertIn(f"“{claim.quote}”".replace("|", "\\|"), text)
        for measurement, _, _, verdict in page.claim_rows(claim, summaries):
          if measurement is None:
            continue
          interval, _ = page.measured(summaries.get(measurement.group), measurement.key)
          self.assertEqual(verdict, page.verdict(claim, measurement, interval))
    for title in PAPERS.values():
      self.assertIn(title, text)

  def test_reviewed_rows_carry_the_rules_verdicts(self):
    """The rows issue 54 read against the papers, as the committed runs measure them."""
    got = page.verdicts(load_summaries(SUMMARIES))
    ca = next(c for c in CLAIMS if c.key == "conceptors.table-1.ca")
    chosen = [i for i, m in enumerate(ca.measurements) if m.chosen_on_test]
    self.assertTrue(chosen)
    for i in chosen:  # an aperture chosen on the test genres never earns reproduced
      self.assertNotEqual(got["conceptors.table-1.ca"][i], rules.REPRODUCED)
    for key in (
      "bc.lead.joint-lin-sloss",
      "gramian.table-2.improvement",
      "icl.table-4.time",
      "icl.epoch-cost",
      "conceptors.table-1.ca",
      "upgrade.drift-adapter",
      "gramian.exact-oracle",
    ):
      with self.subTest(key):
        self.assertIn(key, got)
        self.assertTrue(all(v in rules.VERDICTS for v in got[key]))
    # The upgrade row the issue quoted (93.8 % [92.6, 94.9] at 5 % pairs, old index MiniLM-L6) is a smaller effect
    # than Drift-Adapter's 95-99 %, not "reproduced"; with 20 % of the index paired it is reproduced.
    upgrade = next(c for c in CLAIMS if c.key == "upgrade.drift-adapter")
    by_label = dict(zip((m.label for m in upgrade.measurements), got["upgrade.drift-adapter"]))
    quoted = next(label for label in by_label if "old index all-MiniLM-L6-v2" in label and "5 %" in label)
    self.assertEqual(by_label[quoted], rules.SMALLER)
    self.assertEqual(by_label[quoted.replace("5 %", "20 %").replace("892", "3,566")], rules.REPRODUCED)

  def test_a_summary_changes_the_verdict(self):
    """Flip the sign of a measured interval: the page's verdict follows (the verdicts are not typed in)."""
    summaries = load_summaries(SUMMARIES)
    claim = next(c for c in CLAIMS if c.key == "conceptors.table-1.ca")
    measurement = claim.measurements[0]
    if measurement.group not in summaries:
      self.skipTest(f"no committed summary {measurement.group}")
    flipped = copy.deepcopy(summaries)
    m = flipped[measurement.group]["measures"][measurement.key]
    m["estimate"], m["low"], m["high"] = -m["estimate"], -m["high"], -m["low"]
    before = page.claim_rows(claim, summaries)[0][3]
    after = page.claim_rows(claim, flipped)[0][3]
    self.assertEqual(after, rules.OPPOSITE)
    self.assertNotEqual(before, after)


def _summary(group: str, measures: dict) -> dict:
  return {
    "group": group,
    "seeds": [1],
    "commands": ["python -m experiments.x"],
    "runs": [{"commit": None, "dirty": None, "cpu": None, "devices": None}],
    "figures": [],
    "measures": {
      k: {"estimate": e, "low": lo, "high": hi, "over": "seeds", "units": 3} for k, (e, lo, hi) in measures.items()
    },
  }


class TrendTest(unittest.TestCase):
  """A claim that no measurement reproduces is listed until three budgets are measured; then its trend is shown."""

  KEY = "lead.combined.joint-lin-sloss"

  def test_listed_without_a_trend_then_traced(self):
    one = {"bc-quick": _summary("bc-quick", {self.KEY: (0.1, -0.2, 0.4)})}
    self.assertIn("bc.lead.joint-lin-sloss", page.not_reproduced("bc", one))
    self.assertNotIn("bc.lead.joint-lin-sloss", page.trends("bc", one))
    three = dict(
      one,
      **{
        "bc-budget-e40": _summary("bc-budget-e40", {self.KEY: (-0.3, None, None)}),
        "bc-budget-e160": _summary("bc-budget-e160", {self.KEY: (0.5, None, None)}),
      },
    )
    self.assertNotIn("bc.lead.joint-lin-sloss", page.not_reproduced("bc", three))
    text = page.trends("bc", three)
    # estimates -0.3, 0.1, 0.5 at 40, 80, 160 epochs: +0.4 per doubling, towards the paper's 1.07
    self.assertIn("`bc.lead.joint-lin-sloss` (lead.combined.joint-lin-sloss): 40 epochs per version: −0.30 pts", text)
    self.assertIn("Per doubling of epochs per version: +0.40 pts", text)
    self.assertIn("reaches it after 1.4 more doublings", text)  # (1.07 - 0.5) / 0.4

  def test_a_reproduced_claim_needs_no_trend(self):
    held = {"bc-quick": _summary("bc-quick", {self.KEY: (1.3, 1.1, 1.5)})}
    self.assertNotIn("bc.lead.joint-lin-sloss", page.not_reproduced("bc", held))


class CheckTest(unittest.TestCase):
  def test_the_committed_page_is_what_its_summaries_give(self):
    self.assertEqual(cli.main(["--check"]), 0)

  def test_a_hand_edit_fails_the_check(self):
    tmp = Path(tempfile.mkdtemp())
    edited = (ROOT / "docs" / "reproduction.md").read_text().replace("**opposite**", "**reproduced**", 1)
    edited = edited if edited != (ROOT / "docs" / "reproduction.md").read_text() else edited + "\nhand edit\n"
    (tmp / "page.md").write_text(edited)
    self.assertEqual(cli.main(["--check", "--page", str(tmp / "page.md")]), 1)

  def test_check_takes_no_runs(self):
    with self.assertRaises(SystemExit):
      cli.main(["--check", "--runs", "x"])


class AuditTest(unittest.TestCase):
  """The audits quote the presets the reproduction runs use."""

  def test_values_quoted_are_the_presets(self):
    from experiments.bc_aligner.configs import PRESETS as BC
    from experiments.gramian_training.configs import PRESETS as GT
    from experiments.icl.configs import PRESETS as ICL
    from experiments.reproduction.audits import AUDITS

    def ours(experiment, setting):
      return next(row[2] for row in AUDITS[experiment] if row[0] == setting)

    bc = BC["quick"]
    self.assertIn(f"{bc.epochs}, Adam, learning rate {bc.learning_rate:g}", ours("bc_aligner", "epochs per version"))
    self.assertIn(f"λ = {bc.lam:g}", ours("bc_aligner", "λ"))
    icl = ICL["quick"]
    self.assertIn(f"patience {icl.patience}", ours("icl", "convergence"))
    self.assertIn(f"at most {icl.max_epochs} epochs", ours("icl", "convergence"))
    self.assertIn(f"{GT['quick'].steps:,} steps", ours("gramian_training", "budget"))
    for experiment, rows in AUDITS.items():
      for row in rows:
        self.assertEqual(len(row), 4, f"{experiment}: {row}")


class SuiteTest(unittest.TestCase):
  def test_bad_flags_are_refused_before_any_run(self):
    tmp = Path(tempfile.mkdtemp())
    with self.assertRaisesRegex(ValueError, "--size"):
      suite.run_suite(tmp / "a", "huge", None, 10)
    with self.assertRaisesRegex(ValueError, "--budget-s"):
      suite.run_suite(tmp / "a", "tiny", None, 0)
    (tmp / "b").mkdir()
    (tmp / "b" / "kept.txt").write_text("a user's file")
    with self.assertRaisesRegex(FileExistsError, "not empty"):
      suite.run_suite(tmp / "b", "tiny", None, 10)
    self.assertEqual((tmp / "b" / "kept.txt").read_text(), "a user's file")
    self.assertFalse((tmp / "a").exists())

  def test_a_spent_budget_skips_every_run_and_says_so(self):
    tmp = Path(tempfile.mkdtemp())
    result = suite.run_suite(tmp / "out", "tiny", None, 1.0)
    self.assertTrue(all(r["status"] == "skipped" for r in result["runs"]))
    self.assertTrue(any("budget" in r["reason"] for r in result["runs"]))
    self.assertTrue((tmp / "out" / "reproduction.md").is_file())

  def test_plans_name_known_experiments(self):
    import importlib

    for size, plans in suite.PLANS.items():
      for plan in plans:
        with self.subTest(size=size, run=plan.name):
          importlib.import_module(f"experiments.{plan.experiment}")
          self.assertTrue(dataclasses.is_dataclass(plan))

  @pytest.mark.heavy
  def test_the_tiny_suite_runs_end_to_end(self):
    tmp = Path(tempfile.mkdtemp())
    self.assertEqual(suite.main(["--size", "tiny", "--out", str(tmp / "out")]), 0)
    record = json.loads((tmp / "out" / "suite.json").read_text())
    status = {r["name"]: r["status"] for r in record["runs"]}
    self.assertEqual(status.pop("missing-data"), "skipped")
    self.assertEqual(set(status.values()), {"finished"})
    summaries = load_summaries(tmp / "out" / "summaries")
    self.assertEqual(sorted(summaries), ["ca-synthetic", "gramian-estimation-test", "icl-test"])
    self.assertEqual(summaries["gramian-estimation-test"]["seeds"], [1, 2])
    self.assertEqual(summaries["gramian-estimation-test"]["measures"]["sampling_over_sogram.B16"]["units"], 2)
    self.assertIn("# Reproduction report", (tmp / "out" / "reproduction.md").read_text())


if __name__ == "__main__":
  unittest.main()
