"""The generated reproduction page: summaries from run folders, measures from results, the page from both, the
check that the committed page is what its summaries give, the protocol audits against the presets, and the one-call
suite at its tiny size."""

import copy
import dataclasses
import json
import math
import re
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


class SeedTest(unittest.TestCase):
  def test_a_run_that_loops_over_its_own_seeds_records_their_range(self):
    from experiments.reproduction.summary import _seed

    self.assertEqual(_seed({"seed": 3}), 3)
    self.assertEqual(_seed({"seeds": 3}), "0–2 (in one run)")  # the scaling runs: 3 seeds inside one run
    self.assertEqual(_seed({"seeds": 1}), "0")
    self.assertIsNone(_seed({}))


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

  def test_bc_over_time_best_share_and_sublinear_growth(self):
    def method(recall, auc, errors):
      return {
        "intended_recall50_by_version": [0.1, *recall],
        "unintended_auc_by_step": {str(v + 1): a for v, a in enumerate(auc)},
        "alignment_error_by_version": [0.0, *errors],
      }

    methods = {
      "bc-aligner": method([0.3, 0.2], [0.8, 0.7], [0.5, 0.6]),
      "joint-lin-sloss": method([0.3, 0.25], [0.7, 0.7], [0.5, 0.9]),  # ties at version 1, ahead on recall at 2
      "fix-m0": method([0.0, 0.0], [0.9, 0.9], [0.0, 0.0]),  # wins by construction: not a competitor
    }
    out = measures._over_time(methods, methods["bc-aligner"])
    # version 1: recall tie (best), AUC best, error tie (best); version 2: recall behind, AUC tie, error best -> 5/6
    assert_close(out["best_share.bc-aligner"].estimate, 5 / 6, op="elementwise", precision="float64")
    assert_close(out["error_growth.bc-aligner"].estimate, 0.6 / (2 * 0.5), op="elementwise", precision="float64")

  def test_a_method_that_did_not_converge_marks_all_its_measures(self):
    runs = {
      "retrain": [{"accuracy": {"all": 70.0}, "train_seconds": 10.0, "epochs": 10, "stopped": "patience"}] * 3,
      "icl": [
        {
          "accuracy": {"all": 70.0},
          "train_seconds": 2.0,
          "epochs": 1,
          "stopped": "patience",
          "loss_status": "did not improve",
        }
      ]
      * 3,
      "lrl": [{"accuracy": {"all": 70.0}, "train_seconds": 4.0, "epochs": 2, "stopped": "patience"}] * 3,
    }
    m = measures.icl({"alpha_sweep": {"0.3": {"methods": {k: {"runs": r} for k, r in runs.items()}}}})
    for key in ("accuracy_gap.icl.a0.3", "epoch_speedup.icl.a0.3"):
      self.assertIn("not converged", m[key].status, key)
    self.assertIsNone(m["epoch_cost.icl.a0.3"].status)  # seconds per epoch do not depend on where the rule stopped
    self.assertIsNone(m["accuracy_gap.lrl.a0.3"].status)
    # ICL against its ablation: the ablation's time over ICL's, with ICL's failure said
    assert_close(m["pair_speedup.icl.lrl.a0.3"].estimate, 2.0, op="elementwise", precision="float64")
    self.assertIn("not converged", m["pair_speedup.icl.lrl.a0.3"].status)

  def test_the_warm_start_bound_counts_flat_runs_at_their_first_epoch(self):
    """Issue 65's "stopped at the warm start": a method whose loss never fell in some runs gets, beside the paper's
    number, the speed-up with those runs converged at their first epoch, against a float64 NumPy ratio of means."""

    def run(seconds, epochs, status="improved", first=0.5):
      return {"accuracy": {"all": 70.0}, "train_seconds": seconds, "epochs": epochs, "stopped": "patience",
              "loss_status": status, "seconds_by_epoch": [first] + [1.0] * (epochs - 1)}  # fmt: skip

    retrain = [run(20.0, 20), run(30.0, 30), run(25.0, 25)]
    icl = [run(10.0, 10), run(8.0, 8, "did not improve", first=0.4), run(12.0, 12, "did not improve", first=0.6)]
    results = {"alpha_sweep": {"0.3": {"methods": {"retrain": {"runs": retrain}, "icl": {"runs": icl}}}}}
    m = measures.icl(results)
    time, epochs = m["time_speedup.icl.a0.3"], m["epoch_speedup.icl.a0.3"]
    assert_close(time.estimate, 75.0 / 30.0, op="elementwise", precision="float64")  # the paper's rule, as it stands
    assert_close(time.bound[0], 75.0 / 11.0, op="elementwise", precision="float64")
    assert_close(epochs.bound[0], 75.0 / 12.0, op="elementwise", precision="float64")
    self.assertLess(time.bound[1], time.bound[0])
    self.assertLess(time.bound[0], time.bound[2])
    self.assertIn("not converged", time.status)
    # no bound where retraining itself did not train (the 1e-5 primary), or where every run of the method trained
    flat_base = [dict(r, loss_status="did not improve") for r in retrain]
    results["alpha_sweep"]["0.3"]["methods"]["retrain"]["runs"] = flat_base
    self.assertIsNone(measures.icl(results)["time_speedup.icl.a0.3"].bound)
    results["alpha_sweep"]["0.3"]["methods"] = {"retrain": {"runs": retrain}, "icl": {"runs": [run(10.0, 10)] * 3}}
    self.assertIsNone(measures.icl(results)["time_speedup.icl.a0.3"].bound)

  def test_icl_quality_block_reaches_the_page(self):
    q = {
      "measures": {"heldout_loss": {"label": "held-out NCE-I loss", "better": "lower"}},
      "encoders": {
        "random": {"heldout_loss": {"mean": 3.3, "ci95": [3.2, 3.4], "runs": 3}},
        "pretrained": {"heldout_loss": {"mean": 2.7, "ci95": [2.6, 2.8], "runs": 3}},
        "retrain": {"heldout_loss": {"mean": 2.7, "ci95": None, "runs": 2}},
      },
      "separation": {"heldout_loss": {"status": "blind", "statement": "time to quality cannot be measured with it"}},
      "moved": {
        "retrain": {
          # the schema experiments.icl.report.quality writes
          "heldout_loss": {"estimate": -0.6, "ci95": [-0.7, -0.4], "over": "runs", "units": 3, "verdict": "improved"}
        }
      },
    }
    m = measures._icl_quality(q, "0.3")
    self.assertEqual((m["quality.heldout_loss.random.a0.3"].low, m["quality.heldout_loss.random.a0.3"].units), (3.2, 3))
    self.assertIsNone(m["quality.heldout_loss.retrain.a0.3"].low)  # two runs: no interval
    self.assertEqual(m["sees.heldout_loss.a0.3"].estimate, 0.0)
    moved = m["moved.heldout_loss.retrain.a0.3"]
    self.assertEqual((moved.note, moved.low, moved.high, moved.units), ("improved", -0.7, -0.4, 3))
    summary = _summary("icl-x", {})
    summary["experiment"] = "icl"
    from experiments.reproduction.summary import measure_json

    summary["measures"] = {k: measure_json(v) for k, v in m.items()}
    text = page.quality_section({"icl-x": summary})
    self.assertIn("| 0.3 | held-out NCE-I loss | random | 3.3 [3.2, 3.4] |", text)
    self.assertIn("time to quality cannot be measured with it", text)
    self.assertIn("-0.6 [-0.7, -0.4] improved", text)
    self.assertIn("No archived ICL run recorded the quality block", page.quality_section({}))

  def test_gramian_estimation_batch_gain(self):
    def errors(b128, b1024):
      return {"sampling-uniform B=128": b128, "sampling-uniform B=1024": b1024}

    results = {
      "mean_error_second_half": {"left": errors(0.4, 0.1), "right": errors(0.2, 0.1)},
      "errors": {"left": {}, "right": {}},
      "steps": [],
    }
    m = measures.gramian_estimation(results)
    assert_close(m["batch_gain.sampling-uniform"].estimate, 0.3 / 0.1, op="elementwise", precision="float64")

  def test_gramian_training_reach_ratio(self):
    rising = [{"step": s, "map@10": v} for s, v in ((0, 0.0), (100, 0.2), (200, 0.35), (400, 0.4))]
    results = {
      "methods": {
        "sampling-uniform": {
          "final_map@10": 0.3,
          "curve": [{"step": s, "map@10": v} for s, v in ((0, 0.0), (100, 0.1), (200, 0.2), (400, 0.3))],
        },
        "sogram-uniform": {"final_map@10": 0.4, "curve": rising},
      },
      "improvements": {"uniform": {"estimate": 33.3, "ci95": [20.0, 40.0], "over": "validation queries"}},
    }
    m = measures.gramian_training(results)
    # a baseline still rising at its end: SOGram's first step at or above 0.3 (200) over the baseline's (400), the
    # paper's share of the budget
    self.assertEqual((m["reach_ratio.uniform"].estimate, m["reach_ratio.uniform"].censored), (200 / 400, 0))
    # one seed: its interval over validation queries misses the noise between seeds, so it is a note, not the interval
    self.assertEqual((m["improvement_pct.uniform"].low, m["improvement_pct.uniform"].high), (None, None))
    self.assertIn("[+20.00, +40.00]", m["improvement_pct.uniform"].note)
    # a baseline that peaked at step 100 and fell back to its final 0.3: it reached 0.3 at step 100 itself, so SOGram
    # reaching it at step 200 is twice as slow (the share of the budget would have said 0.5, "fast")
    peaked = [{"step": s, "map@10": v} for s, v in ((0, 0.0), (100, 0.36), (200, 0.33), (400, 0.3))]
    results["methods"]["sampling-uniform"]["curve"] = peaked
    self.assertEqual(measures.gramian_training(results)["reach_ratio.uniform"].estimate, 200 / 100)

  def test_icl_accuracy_gap_epoch_cost_and_the_papers_rule_with_a_t_interval(self):
    base_t, icl_t = [10.0, 12.0, 11.0], [4.0, 5.0, 6.0]
    runs = {
      "retrain": [{"accuracy": {"all": 70.0}, "train_seconds": t, "epochs": 10, "stopped": "patience"} for t in base_t],
      "icl": [
        {"accuracy": {"all": a}, "train_seconds": t, "epochs": 2, "stopped": "patience"}
        for a, t in zip((71.0, 69.0, 70.0), icl_t)
      ],
      "meta": [
        {"accuracy": {"all": 70.0}, "train_seconds": 1.0, "epochs": 1, "stopped": "patience", "loss_status": s}
        for s in ("did not improve", "improved", "did not improve")
      ],
    }
    results = {"alpha_sweep": {"0.3": {"methods": {m: {"runs": r} for m, r in runs.items()}}}}
    m = measures.icl(results)
    gaps = [1.0, -1.0, 0.0]
    assert_close(m["accuracy_gap.icl.a0.3"].estimate, np.mean(gaps), op="reduction", scale=70.0, precision="float64")
    per_epoch = [(t / 2) / (b / 10) for t, b in zip(icl_t, base_t)]
    assert_close(m["epoch_cost.icl.a0.3"].estimate, np.mean(per_epoch), op="elementwise", precision="float64")
    # the ratio of means and its delta-method t-interval, in float64 here
    a, b = np.asarray(base_t), np.asarray(icl_t)
    r = a.mean() / b.mean()
    spread = stats.t.ppf(0.975, 2) * np.std(a - r * b, ddof=1) / (math.sqrt(3) * b.mean()) / r
    t = m["time_speedup.icl.a0.3"]
    assert_close(
      [t.estimate, t.low, t.high], [r, r * np.exp(-spread), r * np.exp(spread)], op="reduction", precision="float64"
    )
    self.assertGreater(t.low, 0.0)
    self.assertEqual((t.units, t.status), (3, None))
    # a method whose loss never improved: the literal number, marked not converged
    meta = m["time_speedup.meta.a0.3"]
    assert_close(meta.estimate, a.mean() / 1.0, op="elementwise", precision="float64")
    self.assertIn("not converged", meta.status)
    self.assertIn("2 of 3 runs", meta.status)

  def test_replayed_patience_stops_where_the_experiment_would_have(self):
    from collections import namedtuple
    from types import SimpleNamespace

    from experiments.icl.convergence import Rule
    from experiments.icl.methods import converge

    # by hand: patience 2 stops at epoch 4 with E* = 2; patience 3 at epoch 10 with E* = 7 (a tie is a new minimum)
    losses, seconds = [3.0, 2.0, 2.5, 2.6, 1.5, 1.6, 1.5, 1.8, 1.9, 2.0], [float(e + 1) for e in range(10)]
    two = measures.replay_stop(losses, seconds, 2, 0.7)
    self.assertEqual((two["epochs"], two["train_seconds"], two["stopped"]), (2, 2.0, "patience"))
    three = measures.replay_stop(losses, seconds, 3, 0.7)
    self.assertEqual((three["epochs"], three["train_seconds"]), (7, 7.0))
    self.assertIsNone(measures.replay_stop(losses, seconds, 4, 0.7))  # the curve ends before patience 4 stops it
    self.assertIsNone(measures.replay_stop([2.0, float("nan"), 1.0], [1.0, 2.0, 3.0], 1, 0.7))

    # against the experiment's own loop: a run stopped at patience 50, replayed at 20, gives what converge() gives
    # when it runs the same curve at patience 20
    Enc = namedtuple("Enc", "params stats")
    rng = np.random.default_rng(3)

    def run_at(curve, patience):
      trainer = SimpleNamespace(params={}, stats={}, enc=Enc({}, {}), timer=SimpleNamespace(compile_seconds=0.0))
      it = iter(curve)
      return converge(trainer, lambda: next(it), Rule("paper", patience=patience), len(curve), "fake")

    curves = {
      m: [2.6 - d * np.arange(300) + 0.3 * rng.standard_normal(300) for _ in range(3)]
      for m, d in (("retrain", 1e-3), ("icl", 3e-3))
    }
    results, metrics, direct = {"alpha_sweep": {"0.3": {"methods": {}}}}, [], {}
    for m, cs in curves.items():
      long_runs = [run_at(list(c), 50) for c in cs]
      results["alpha_sweep"]["0.3"]["methods"][m] = {
        "runs": [
          {
            "accuracy": {"all": 70.0},
            "epochs": r.epochs,
            "train_seconds": r.seconds[r.epochs - 1],
            "stopped": r.stopped,
            "loss_status": r.curve,
          }
          for r in long_runs
        ]
      }
      for k, r in enumerate(long_runs):  # the metrics.jsonl rows converge() logs, seconds as its own clock gave them
        metrics += [
          {"alpha": 0.3, "run": k, "method": m, "epoch": e + 1, "loss": x, "train_seconds": t}
          for e, (x, t) in enumerate(zip(r.losses, r.seconds))
        ]
        short = run_at(r.losses, 20)
        direct.setdefault(m, []).append((short.epochs, r.seconds[short.epochs - 1]))
    config = {"config": {"convergence": "paper", "patience": 50, "smoothing": 0.7}}
    m = measures.icl(results, metrics, config)
    base, ours = (np.asarray(direct[k], np.float64) for k in ("retrain", "icl"))
    for key, col in (("epoch_speedup_p20.icl.a0.3", 0), ("time_speedup_p20.icl.a0.3", 1)):
      assert_close(m[key].estimate, base[:, col].mean() / ours[:, col].mean(), op="elementwise", precision="float64")
    self.assertLess(
      base[:, 0].mean(),
      np.mean([r["epochs"] for r in results["alpha_sweep"]["0.3"]["methods"]["retrain"]["runs"]]) + 1e-9,
    )
    # replayed at the recorded patience, every run gives back the converged epoch the experiment recorded
    for m_name, block in results["alpha_sweep"]["0.3"]["methods"].items():
      for k, rec in enumerate(block["runs"]):
        curve = [(x["loss"], x["train_seconds"]) for x in metrics if x["method"] == m_name and x["run"] == k]
        again = measures.replay_stop([c[0] for c in curve], [c[1] for c in curve], 50, 0.7)
        if rec["stopped"] == "patience":
          self.assertEqual((again["epochs"], again["train_seconds"]), (rec["epochs"], rec["train_seconds"]))
    # no replay for a run that is not the paper's rule above patience 20, nor where a curve is not logged
    self.assertNotIn("time_speedup_p20.icl.a0.3", measures.icl(results, metrics, {"config": {"patience": 50}}))
    self.assertNotIn("time_speedup_p20.icl.a0.3", measures.icl(results, metrics[:10], config))

  def test_two_runs_give_no_interval(self):
    m = measures.t_interval([1.0, 2.0])
    self.assertEqual((m.estimate, m.low, m.high, m.units), (1.5, None, None, 2))
    self.assertIn("3 runs give one", m.note)
    r = measures.ratio_t_interval([2.0, 3.0], [1.0, 1.0])
    self.assertEqual((r.estimate, r.low), (2.5, None))
    with self.assertRaisesRegex(ValueError, "positive"):
      measures.ratio_t_interval([1.0, 1.0, 1.0], [1.0, 0.0, 1.0])

  def test_welch_interval_against_scipy(self):
    x, y = [3.0, 4.0, 5.5, 4.2], [1.0, 2.5, 1.5]
    m = measures.welch_interval(x, y)
    res = stats.ttest_ind(x, y, equal_var=False)
    low, high = res.confidence_interval(0.95)
    assert_close([m.estimate, m.low, m.high], [np.mean(x) - np.mean(y), low, high], op="reduction", precision="float64")

  def test_censored_reach_is_counted(self):
    curve = [{"step": s, "map@10": v} for s, v in ((0, 0.0), (400, 0.4))]
    results = {
      "methods": {
        "sampling-uniform": {"final_map@10": 0.9, "curve": curve},
        "sogram-uniform": {"final_map@10": 0.4, "curve": curve},
      }
    }
    reach = measures.gramian_training(results)["reach_ratio.uniform"]
    # never reached: its whole run (400) over the steps the baseline took (its last evaluation, 400), censored
    self.assertEqual((reach.estimate, reach.censored), (1.0, 1))


class PageTest(unittest.TestCase):
  def test_every_claim_is_on_the_page_with_the_rules_verdicts(self):
    summaries = load_summaries(SUMMARIES)
    text = page.render(summaries)
    for claim in CLAIMS:
      with self.subTest(claim.key):
        self.assertIn(page._quote(claim).replace("|", "\\|"), text)
        for row in page.claim_rows(claim, summaries):
          if row.measurement is not None and not row.measurement.group.startswith("pooled:"):
            self.assertEqual(row.verdict, page.judge(claim, row.measurement, summaries)[1])
    for title in PAPERS.values():
      self.assertIn(title, text)

  def test_the_page_opens_with_what_does_not_reproduce(self):
    summaries = load_summaries(SUMMARIES)
    text = page.render(summaries)
    first = text.index("## ")
    self.assertTrue(text[first:].startswith("## Not reproduced"))
    failed = [c.key for c in CLAIMS if page.standing(c, summaries) in rules.NOT_REPRODUCED]
    section = text[first : text.index("## Not measured at the primary setting")]
    for key in failed:
      self.assertIn(f"`{key}`", section)
    unmeasured = text[text.index("## Not measured at the primary setting") : text.index("## How to read")]
    # the paper's optimiser gives flat retraining curves, the development rate flat ICL curves: the rule times noise
    self.assertIn("`icl.table-4.icl`", unmeasured)
    self.assertIn("`icl.table-4.icl.epochs`", unmeasured)
    self.assertNotIn("**not converged**", section)
    self.assertLess(text.index("## Not reproduced"), text.index("## 1. "))

  def test_a_claims_standing_is_its_primary_rows_verdict(self):
    """Issue 64's standings-by-best-row: a claim with a reproduced sensitivity row and an opposite primary row is
    listed as opposite, with the disagreement counted beside it."""
    claim = next(c for c in CLAIMS if c.key == "gramian.table-2.uniform")
    primary, other = claim.measurements[claim.primary], claim.measurements[1]
    summaries = {
      primary.group: _summary(primary.group, {primary.key: (-5.0, -7.0, -3.0)}),
      other.group: _summary(other.group, {other.key: (6.0, 5.0, 7.0)}),
    }
    self.assertEqual(page.standing(claim, summaries), rules.OPPOSITE)
    text = page.standings("gramian", summaries)
    line = next(x for x in text.splitlines() if "gramian.table-2.uniform" in x)
    self.assertTrue(line.startswith("- **Against the paper"), line)
    self.assertIn("1 reproduced", line)

  def test_a_development_chosen_row_stands_in_only_for_a_primary_that_did_not_converge(self):
    """Issue 65's 10.1×: at Adam 1e-5 retraining does not train, so the rate chosen on development sets stands in;
    it never replaces a primary that converged, and one with no run leaves the primary's "not converged"."""
    claim = next(c for c in CLAIMS if c.key == "icl.table-4.icl")
    primary = claim.measurements[claim.primary]
    stand_in = next(m for m in claim.measurements if m.stands_in)
    self.assertEqual((primary.key, stand_in.key), ("time_speedup.icl.a0.3", "time_speedup.icl.a0.3"))
    flat = _summary(primary.group, {primary.key: (0.34, 0.12, 1.0)}, status="not converged: retraining: ...")
    measured = _summary(stand_in.group, {stand_in.key: (0.5, 0.3, 0.7)})
    rows = page.claim_rows(claim, {primary.group: flat, stand_in.group: measured})
    self.assertEqual([r.measurement.group for r in rows[:2]], [stand_in.group, primary.group])
    self.assertEqual((rows[0].verdict, rows[0].primary, rows[1].verdict), (rules.OPPOSITE, False, "not converged"))
    table = page.claims_table("icl", {primary.group: flat, stand_in.group: measured}, set())
    self.assertIn("**stands in for the primary**, which did not converge", table)
    line = next(
      x
      for x in page.standings("icl", {primary.group: flat, stand_in.group: measured}).splitlines()
      if "`icl.table-4.icl`" in x
    )
    self.assertTrue(line.startswith("- **Against the paper"), line)
    converged = _summary(primary.group, {primary.key: (9.0, 8.0, 12.0)})
    self.assertEqual(page.standing(claim, {primary.group: converged, stand_in.group: measured}), rules.REPRODUCED)
    self.assertEqual(page.standing(claim, {primary.group: flat}), rules.NOT_CONVERGED)

  def test_the_warm_start_reading_is_shown_and_never_judged(self):
    """A referee's read: the bound was defined after the runs it first applied to were read and bounds only the
    ratio of means, so it is shown beside "not converged" and never gives a verdict, however far below the paper."""
    claim = next(c for c in CLAIMS if c.key == "icl.table-4.icl")
    ms = claim.measurements[claim.primary]

    def judged(bound, key=ms.key):
      summary = _summary(ms.group, {key: (0.9, 0.5, 1.7)}, status="not converged: the method: flat", bound=bound)
      return page._at_bound(claim, claim.value, summary["measures"][key], "t", key)

    for bound in ([1.31, 0.32, 5.39], [0.5, 0.3, 0.7], [9.0, 6.0, 14.0]):
      text, v = judged(bound)
      self.assertEqual(v, rules.NOT_CONVERGED)
      self.assertIn("warm-start reading, shown and not judged", text)
      self.assertIn("retraining converged in every run", text)
    self.assertIn("`lrl` converged in every run", judged([1.0, 0.5, 2.0], "pair_speedup.icl.lrl.a0.3")[0])
    self.assertEqual(judged(None), ("t", rules.NOT_CONVERGED))
    self.assertEqual(page.judge(claim, ms, {ms.group: _summary(ms.group, {ms.key: (0.9, 0.5, 1.7)},
                     status="not converged: x", bound=[0.5, 0.3, 0.7])})[1], rules.NOT_CONVERGED)  # fmt: skip

  def test_stand_ins_only_for_the_methods_the_development_rule_judged(self):
    stood = {c.key for c in CLAIMS if any(m.stands_in for m in c.measurements)}
    self.assertEqual(stood, {"icl.table-4.icl", "icl.table-4.icl.epochs", "icl.accuracy-parity", "icl.epoch-cost"})

  def test_refereed_examples_read_the_new_rules(self):
    """Issue 64's table, each example through the page's own judge (kinds from the catalogue)."""

    def verdict(key: str, label_part: str, estimate, low, high, **extra) -> str:
      claim = next(c for c in CLAIMS if c.key == key)
      ms = next(m for m in claim.measurements if label_part in m.label)
      summaries = {ms.group: _summary(ms.group, {ms.keys[0]: (estimate, low, high)}, **extra)}
      return page.judge(claim, ms, summaries)[1]

    self.assertEqual(verdict("bc.finetune-m0.unintended", "quick", -10.7, -12.9, -8.45), rules.LARGER)
    self.assertEqual(verdict("bc.bc-aligner.intended", "quick", -1.36, -5.02, 2.30), rules.CONSISTENT_CROSSES)
    self.assertEqual(verdict("bc.bc-aligner.unintended", "quick", -2.33, -3.29, -1.37), rules.LARGER)
    self.assertEqual(verdict("gramian.table-2.uniform", "1,500 steps", 2.74, 0.08, 5.32), rules.CONSISTENT_SHORT)
    self.assertEqual(verdict("gramian.table-2.linear", "1,500 steps", -4.50, -7.67, -1.33), rules.OPPOSITE)
    # a censored measure: three seeds that never reach read "never reached", not "inconclusive"
    self.assertEqual(verdict("gramian.training-speed", "100K pages", 1.0, 1.0, 1.0, censored=3), rules.NEVER_REACHED)
    self.assertEqual(verdict("icl.table-4.icl", "quick", 0.45, 0.21, 0.63), rules.OPPOSITE)
    # an ICL row whose method never converged shows the paper's number and says so
    self.assertEqual(
      verdict("icl.table-4.icl", "quick", 0.4, 0.2, 0.6, status="not converged: the method: ..."),
      rules.NOT_CONVERGED,
    )
    # one run, no run
    self.assertEqual(verdict("bc.fix-m0.intended", "40 epochs", -18.7, None, None), rules.ONE_RUN)
    claim = next(c for c in CLAIMS if c.key == "icl.table-4.icl")
    text, v = page.judge(claim, claim.measurements[claim.primary], {})
    self.assertEqual(v, rules.NO_RUN)
    self.assertIn("--preset paper", text)
    # BC-Aligner's 3 % / 0.5 % are catalogued as ceilings, Finetune-M0's 5-7 % as a level
    kinds = {c.key: c.kind for c in CLAIMS}
    self.assertEqual(kinds["bc.bc-aligner.intended"], rules.CEILING)
    self.assertEqual(kinds["bc.bc-aligner.unintended"], rules.CEILING)
    self.assertEqual(kinds["bc.finetune-m0.unintended"], rules.LEVEL)

  def test_fixed_values_and_quotes(self):
    """The referee's corrections: Wikipedia's sizes, no Adagrad, uniform SOGram's α, the alignment runner-up, ICL's
    5 runs, and table cells never printed as quotations."""
    from experiments.reproduction.audits import AUDITS
    from experiments.reproduction.claims import PAPER_DATA

    self.assertIn("fr 1.8M, en 5.3M", PAPER_DATA["gramian"])
    every = json.dumps(AUDITS) + json.dumps(PAPER_DATA) + json.dumps([dataclasses.asdict(c) for c in CLAIMS])
    self.assertNotIn("Adagrad", every)
    self.assertNotIn("1.1M", every)
    self.assertNotIn("4.1M", every)
    alpha = next(row for row in AUDITS["gramian_training"] if row[0] == "α")
    self.assertIn("uniform SOGram α = 0.01", alpha[1])
    smallest = next(c for c in CLAIMS if c.key == "bc.alignment-error")  # "smallest among all": an ordering
    self.assertEqual(smallest.kind, rules.ORDERING)
    self.assertIn("alignment_lead.joint-notrans", smallest.measurements[0].keys)
    self.assertIn("Joint-NoTrans, trails by 0.03 … 0.05", smallest.measure)
    runs = next(row for row in AUDITS["icl"] if row[0] == "runs")
    self.assertIn("5 runs", runs[1])
    text = page.render(load_summaries(SUMMARIES))
    for claim in CLAIMS:
      if not claim.verbatim:
        self.assertNotIn(f"“{claim.quote}”", text)
        self.assertTrue("cells:" in page._quote(claim) or page._quote(claim).startswith("(not a quotation)"))

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
    before = page.claim_rows(claim, summaries)[0].verdict
    after = page.claim_rows(claim, flipped)[0].verdict
    self.assertEqual(after, rules.OPPOSITE)
    self.assertNotEqual(before, after)


class LoadFlagTest(unittest.TestCase):
  def test_a_timing_taken_beside_other_load_says_so(self):
    claim = next(c for c in CLAIMS if c.key == "icl.epoch-cost")
    ms = next(m for m in claim.measurements if m.group == "icl-proteins-quick")
    summary = _summary(ms.group, {ms.keys[0]: (2.0, 1.5, 2.5)})
    unknown = page.judge(claim, ms, {ms.group: summary})[0]
    self.assertIn("the load beside the run was not recorded", unknown)
    summary["runs"][0].update(other_cpu_share=0.35, concurrent_runs=1)
    busy = page.judge(claim, ms, {ms.group: summary})[0]
    self.assertIn("timed beside other load: others up to 35% of the CPU, 1 overlapping run(s)", busy)
    summary["runs"][0].update(other_cpu_share=0.02, concurrent_runs=0)
    self.assertNotIn("other load", page.judge(claim, ms, {ms.group: summary})[0])
    # a count of epochs does not depend on the load
    epochs = next(c for c in CLAIMS if c.key == "icl.table-4.icl.epochs")
    ems = next(m for m in epochs.measurements if m.group == "icl-proteins-quick")
    summary = _summary(ems.group, {ems.keys[0]: (2.0, 1.5, 2.5)})
    summary["runs"][0].update(other_cpu_share=0.35, concurrent_runs=1)
    self.assertNotIn("other load", page.judge(epochs, ems, {ems.group: summary})[0])


class PairedDifferenceTest(unittest.TestCase):
  def test_two_groups_paired_by_seed(self):
    a = _summary("a", {"k": (0.0, None, None)}, per_run=[1.0, 2.0, 4.0, 3.0])
    b = _summary("b", {"j": (0.0, None, None)}, per_run=[0.5, 1.0, 1.5, 9.0])
    a["seeds"], b["seeds"] = [0, 1, 2, 3], [1, 2, 3, 4]
    m = page.paired_difference(a, b, "k", "j")["measures"]["k"]
    diffs = [2.0 - 0.5, 4.0 - 1.0, 3.0 - 1.5]  # seeds 1, 2, 3
    half = stats.t.ppf(0.975, 2) * np.std(diffs, ddof=1) / math.sqrt(3)
    assert_close(
      [m["estimate"], m["low"], m["high"]],
      [np.mean(diffs), np.mean(diffs) - half, np.mean(diffs) + half],
      op="reduction",
      precision="float64",
    )
    b["seeds"] = [2, 3, 4, 5]
    self.assertIsNone(page.paired_difference(a, b, "k", "j")["measures"]["k"]["low"])  # two seeds: no interval
    self.assertIsNone(page.paired_difference(a, None, "k"))

  def test_a_row_across_two_groups_is_no_run_until_both_ran(self):
    claim = next(c for c in CLAIMS if c.key == "gramian.appendix-e.alpha-trajectory")
    ms = claim.measurements[0]
    text, verdict = page.judge(claim, ms, {ms.group: _summary(ms.group, {ms.keys[0]: (1.0, 0.5, 1.5)})})
    self.assertEqual(verdict, rules.NO_RUN)
    self.assertIn(ms.minus, text)


class LeadSpreadTest(unittest.TestCase):
  def test_the_leads_variance_split_by_task(self):
    intended, unintended = [0.4, 2.2, -1.1, 0.5], [0.0, 0.7, 0.1, -0.2]
    summary = _summary(
      "bc-quick",
      {"lead.intended.joint-lin-sloss": (0.0, None, None), "lead.unintended.joint-lin-sloss": (0.0, None, None)},
    )
    summary["measures"]["lead.intended.joint-lin-sloss"]["per_run"] = intended
    summary["measures"]["lead.unintended.joint-lin-sloss"]["per_run"] = unintended
    text = page.lead_spread(summary)
    total = np.var(np.add(intended, unintended), ddof=1)  # var(a + b) = var a + var b + 2 cov
    self.assertIn(f"variance {total:.2f} pts²: {np.var(intended, ddof=1):.2f} from its intended part", text)
    self.assertIn("The intended side dominates", text)
    summary["measures"]["lead.intended.joint-lin-sloss"]["per_run"] = intended[:2]
    summary["measures"]["lead.unintended.joint-lin-sloss"]["per_run"] = unintended[:2]
    self.assertEqual(page.lead_spread(summary), "")  # two seeds: no variance worth printing


class LegacyTest(unittest.TestCase):
  def test_local_changes_are_said(self):
    claim = next(c for c in CLAIMS if c.key == "gramian.training-speed")
    ms = next(m for m in claim.measurements if m.group == "gramian-scaling-quick" and "100K" in m.label)
    summary = _summary(ms.group, {ms.keys[0]: (0.4, 0.3, 0.5)})
    summary["runs"][0]["dirty"] = True
    text, _ = page.judge(claim, ms, {ms.group: summary})
    self.assertIn("from a tree with local changes", text)


class PoolingTest(unittest.TestCase):
  """Two groups that ran one setting and disagree beyond their intervals are pooled on the page, and it says so."""

  def _rows(self, a: dict, b: dict):
    claim = next(c for c in CLAIMS if c.key == "icl.epoch-cost")
    summaries = {}
    for group, m in (("icl-proteins-quick", a), ("icl-budget-p10", b)):
      summaries[group] = _summary(group, {"epoch_cost.icl.a0.3": (m["e"], m["lo"], m["hi"])}, per_run=m["v"])
      summaries[group]["experiment"] = "icl"
    return [r for r in page.claim_rows(claim, summaries) if r.measurement and r.measurement.group.startswith("pooled")]

  def test_disagreeing_replicates_are_pooled_over_all_their_runs(self):
    a = {"e": 1.83, "lo": 1.40, "hi": 2.26, "v": [1.7, 1.8, 2.0]}
    b = {"e": 2.59, "lo": 2.15, "hi": 3.02, "v": [2.5, 2.6, 2.67]}
    (row,) = self._rows(a, b)
    values = a["v"] + b["v"]
    half = stats.t.ppf(0.975, 5) * np.std(values, ddof=1) / math.sqrt(6)
    self.assertIn("disagree beyond their intervals", row.measurement.label)
    self.assertIn(
      page._interval_text(
        {
          "estimate": np.mean(values),
          "low": np.mean(values) - half,
          "high": np.mean(values) + half,
          "over": "runs",
          "units": 6,
        },
        next(c for c in CLAIMS if c.key == "icl.epoch-cost"),
      ),
      row.text,
    )
    self.assertEqual(row.verdict, rules.REPRODUCED)

  def test_agreeing_replicates_are_pooled_and_said_to_agree(self):
    a = {"e": 2.0, "lo": 1.5, "hi": 2.5, "v": [1.8, 2.0, 2.2]}
    (row,) = self._rows(a, dict(a))
    self.assertIn("agree within their intervals", row.measurement.label)

  def test_a_member_that_did_not_converge_keeps_the_pooled_row_not_converged(self):
    """The pooled quick rows of ICL's 10.1× read "reproduced" while one member's ICL runs never trained: pooling
    must not wash out a member's "not converged"."""
    claim = next(c for c in CLAIMS if c.key == "icl.table-4.icl")
    summaries = {}
    for group, status in (("icl-proteins-quick", None), ("icl-budget-p10", "not converged: the method: flat")):
      extra = {"pairs": [[10.0, 1.0], [9.0, 1.0], [11.0, 1.0]]} | ({"status": status} if status else {})
      summaries[group] = _summary(group, {"time_speedup.icl.a0.3": (10.0, 9.0, 11.0)}, **extra)
      summaries[group]["experiment"] = "icl"
    (row,) = [r for r in page.claim_rows(claim, summaries) if r.measurement.group.startswith("pooled")]
    self.assertEqual(row.verdict, rules.NOT_CONVERGED)
    self.assertIn("`icl-budget-p10`: the method: flat", row.text)
    del summaries["icl-budget-p10"]["measures"]["time_speedup.icl.a0.3"]["status"]
    (row,) = [r for r in page.claim_rows(claim, summaries) if r.measurement.group.startswith("pooled")]
    self.assertEqual(row.verdict, rules.REPRODUCED)


SETTING = [
  (re.compile(r"\.a\d+(\.\d+)?$"), ""),  # a growth ratio
  (re.compile(r"\.B\d+$"), ""),  # a batch size
  (re.compile(r"\.n\d+$"), ""),  # a corpus size
  (re.compile(r"^target_"), ""),  # the same speed-up under bcjax's target rule
  (re.compile(r"^(\w+)_p\d+\."), r"\1."),  # the same speed-up replayed at another patience
]


def _family(key: str) -> str:
  for pattern, repl in SETTING:
    key = pattern.sub(repl, key)
  return key


class NothingLeftOutTest(unittest.TestCase):
  def test_every_measure_of_a_catalogued_family_has_a_row(self):
    """A committed summary's measure that is a catalogued measure at another setting (growth ratio, batch, corpus
    size, rule) must have a row: nothing is left off the page by hand."""
    summaries = load_summaries(SUMMARIES)
    catalogued = {(m.group, k) for c in CLAIMS for m in c.measurements for k in m.keys}
    # a row across two groups measures a difference: its inputs (e.g. each method's final MAP@10) are not a family
    families = {_family(k) for c in CLAIMS for m in c.measurements if m.minus is None for k in m.keys}
    missing = [
      f"{group}: {key}"
      for group, s in summaries.items()
      for key in s["measures"]
      if _family(key) in families and (group, key) not in catalogued
    ]
    self.assertEqual(missing, [])

  def test_every_summary_feeds_the_page(self):
    summaries = load_summaries(SUMMARIES)
    used = {m.group for c in CLAIMS for m in c.measurements}
    self.assertEqual(sorted(set(summaries) - used), [])


def _summary(group: str, measures: dict, **extra) -> dict:
  return {
    "group": group,
    "experiment": "x",
    "seeds": [1],
    "commands": ["python -m experiments.x"],
    "runs": [{"commit": None, "dirty": None, "cpu": None, "devices": None}],
    "figures": [],
    "measures": {
      k: {"estimate": e, "low": lo, "high": hi, "over": "seeds", "units": 3, **extra}
      for k, (e, lo, hi) in measures.items()
    },
  }


class TrendTest(unittest.TestCase):
  """A budget trend is fitted only on points with an interval, and printed with its slope's interval."""

  KEY = "lead.combined.joint-lin-sloss"

  def test_points_without_an_interval_give_no_trend(self):
    three = {
      "bc-quick": _summary("bc-quick", {self.KEY: (0.1, -0.2, 0.4)}),
      "bc-budget-e40": _summary("bc-budget-e40", {self.KEY: (-0.3, None, None)}),
      "bc-budget-e160": _summary("bc-budget-e160", {self.KEY: (0.5, None, None)}),
    }
    self.assertNotIn("bc.lead.joint-lin-sloss", page.trends("bc", three))

  def test_a_trend_with_its_slopes_interval_and_no_extrapolation(self):
    z = stats.norm.ppf(0.975)
    three = {
      g: _summary(g, {self.KEY: (e, e - z * 0.1, e + z * 0.1)})
      for g, e in (("bc-budget-e40", -0.3), ("bc-quick", 0.1), ("bc-budget-e160", 0.5))
    }
    text = page.trends("bc", three)
    line = next(x for x in text.splitlines() if x.startswith("- `bc.lead.joint-lin-sloss`"))
    # estimates -0.3, 0.1, 0.5 at 40, 80, 160 epochs, equal errors 0.1: +0.40 per doubling, se 0.1 / sqrt(2)
    half = z * 0.1 / math.sqrt(2)
    self.assertIn(f"Per doubling of epochs per version: +0.40 pts [{page._num(0.4 - half, ' pts')}", line)
    self.assertIn("moves with the budget", line)
    self.assertNotIn("doublings", line.split("Per doubling")[1])


class CheckTest(unittest.TestCase):
  def test_the_committed_page_is_what_its_summaries_give(self):
    self.assertEqual(cli.main(["--check"]), 0)

  def test_a_hand_edit_fails_the_check(self):
    tmp = Path(tempfile.mkdtemp())
    edited = (ROOT / "docs" / "reproduction.md").read_text().replace("**opposite**", "**reproduced**", 1)
    edited = edited if edited != (ROOT / "docs" / "reproduction.md").read_text() else edited + "\nhand edit\n"
    (tmp / "page.md").write_text(edited)
    self.assertEqual(cli.main(["--check", "--page", str(tmp / "page.md")]), 1)

  def test_a_stale_summary_fails_the_check_and_resummarise_mends_it(self):
    import shutil

    tmp = Path(tempfile.mkdtemp())
    for name in ("summaries", "figures", "runs"):
      shutil.copytree(ROOT / "docs" / "reproduction" / name, tmp / "reproduction" / name)
    shutil.copyfile(ROOT / "docs" / "reproduction.md", tmp / "reproduction.md")
    flags = ["--summaries", str(tmp / "reproduction" / "summaries"), "--archive", str(tmp / "reproduction" / "runs")]
    group = sorted(p.name for p in (tmp / "reproduction" / "runs").iterdir())[0]
    path = tmp / "reproduction" / "summaries" / f"{group}.json"
    summary = json.loads(path.read_text())
    key = next(iter(summary["measures"]))
    summary["measures"][key]["estimate"] = 123.0  # a summary no longer what its archived runs give
    path.write_text(json.dumps(summary))
    self.assertEqual(cli.main(["--check", *flags, "--page", str(tmp / "reproduction.md")]), 1)
    self.assertEqual(cli.main(["--resummarise", *flags, "--page", str(tmp / "reproduction.md")]), 0)
    self.assertEqual(cli.main(["--check", *flags, "--page", str(tmp / "reproduction.md")]), 0)

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
    with self.assertRaisesRegex(ValueError, "--parallel must be at least 1, got 0"):
      suite.run_suite(tmp / "a", "tiny", None, 10, parallel=0)
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
    self.assertEqual(suite.main(["--size", "tiny", "--out", str(tmp / "out"), "--parallel", "2"]), 0)
    record = json.loads((tmp / "out" / "suite.json").read_text())
    status = {r["name"]: r["status"] for r in record["runs"]}
    ran = [r for r in record["runs"] if r["status"] == "finished"]
    untimed = [r for r in ran if not r["timing"]]
    # two untimed runs shared the start; the timing run began only after every untimed one had ended
    first, second = sorted(r["started_s"] for r in untimed)[:2]
    self.assertLess(second - first, 1.0)
    (timed,) = [r for r in ran if r["timing"]]
    self.assertGreaterEqual(timed["started_s"], max(r["started_s"] + r["seconds"] for r in untimed) - 0.5)
    self.assertEqual(status.pop("missing-data"), "skipped")
    self.assertEqual(set(status.values()), {"finished"})
    summaries = load_summaries(tmp / "out" / "summaries")
    self.assertEqual(sorted(summaries), ["ca-synthetic", "gramian-estimation-test", "icl-test"])
    self.assertEqual(summaries["gramian-estimation-test"]["seeds"], [1, 2])
    self.assertEqual(summaries["gramian-estimation-test"]["measures"]["sampling_over_sogram.B16"]["units"], 2)
    self.assertIn("# Reproduction report", (tmp / "out" / "reproduction.md").read_text())


if __name__ == "__main__":
  unittest.main()
