"""``--dry-run``'s wall-time estimate: the work units of each experiment, the seconds per unit read off archived
runs at the same model and data settings, the leave-one-out error, and a refusal where nothing comparable ran."""

import gzip
import json
import tempfile
import unittest
from pathlib import Path

from experiments.harness import _estimate
from tests._tolerance import assert_close


def _archive(root: Path, name: str, experiment: str, cfg: dict, wall: float, cpu: str = "CPU A", metrics=()) -> None:
  folder = root / name.rsplit("-s", 1)[0] / name
  folder.mkdir(parents=True)
  config = {"experiment": experiment, "dataset": "synthetic", "config": cfg, "provenance": {"cpu": {"model": cpu}}}
  lines = [*metrics, {"event": "finished", "load": {"wall_seconds": wall}}]
  (folder / "config.json.gz").write_bytes(gzip.compress(json.dumps(config).encode()))
  (folder / "metrics.jsonl.gz").write_bytes(gzip.compress("\n".join(json.dumps(x) for x in lines).encode()))


class WorkTest(unittest.TestCase):
  def test_units_of_each_experiment(self):
    self.assertEqual(_estimate.work("gramian_training", {"steps": 3000, "methods": ["a", "b"]}), (6000.0, 6000.0))
    self.assertEqual(_estimate.work("bc_aligner", {"epochs": 80, "lambda_sweep": [0.5, 2, 8]}), (960.0, 960.0))
    icl = {
      "methods": ["retrain", "icl"],
      "alpha_sweep": [0.5],
      "runs": 5,
      "patience": 50,
      "max_epochs": 1000,
      "convergence": "paper",
    }
    # (2 methods + pre-training) x 2 growth ratios x 5 runs, from patience + 1 to the cap epochs each
    self.assertEqual(_estimate.work("icl", icl), (3 * 2 * 5 * 51.0, 3 * 2 * 5 * 1000.0))
    done = [{"method": "retrain", "epoch": e} for e in range(1, 8)] + [{"event": "finished"}]
    self.assertEqual(_estimate.work("icl", icl, done), (7.0, 7.0))
    self.assertIsNone(_estimate.work("error_amplification", {}))


class EstimateTest(unittest.TestCase):
  def test_seconds_per_unit_from_comparable_runs_with_the_leave_one_out_error(self):
    with tempfile.TemporaryDirectory() as d:
      root = Path(d)
      base = {"epochs": 80, "lambda_sweep": [], "hidden": 32}
      for i, wall in enumerate((72.0, 90.0, 108.0)):  # 720 units each: 0.1, 0.125, 0.15 s per unit
        _archive(root, f"bc-s{i}", "bc_aligner", {**base, "seed": i}, wall)
      _archive(root, "wide-s0", "bc_aligner", {**base, "hidden": 256}, 9999.0)  # another width: not used
      got = _estimate.estimate("bc_aligner", "synthetic", {**base, "epochs": 160}, "CPU A", root)
      assert_close(got.low, 1440 * 0.125, op="elementwise", precision="float64")
      self.assertEqual(got.low, got.high)
      self.assertIn("3 archived run(s) on this CPU", got.basis)
      # leaving out 0.1 predicts 0.1375 (+37.5 %), out 0.125 predicts 0.125, out 0.15 predicts 0.1125 (-25 %)
      self.assertIn("up to 38%", got.basis)

  def test_no_comparable_run_is_said_with_the_fields_that_differ(self):
    with tempfile.TemporaryDirectory() as d:
      root = Path(d)
      _archive(root, "bc-s0", "bc_aligner", {"epochs": 80, "hidden": 32}, 60.0)
      got = _estimate.estimate("bc_aligner", "synthetic", {"epochs": 500, "hidden": 256}, "CPU A", root)
      self.assertIsNone(got.low)
      self.assertIn("differ in hidden", got.text())
      self.assertIn("no cost model", _estimate.estimate("error_amplification", None, {}, "CPU A", root).text())

  def test_a_convergence_run_gets_a_range(self):
    with tempfile.TemporaryDirectory() as d:
      root = Path(d)
      cfg = {
        "methods": ["retrain"],
        "alpha_sweep": [],
        "runs": 1,
        "patience": 5,
        "max_epochs": 100,
        "convergence": "paper",
      }
      _archive(root, "icl-s0", "icl", cfg, 20.0, metrics=[{"method": "retrain", "epoch": e} for e in range(1, 21)])
      got = _estimate.estimate("icl", "synthetic", {**cfg, "patience": 50}, "CPU A", root)
      # 1 s per method-epoch; (1 + pre-training) x [51, 100] epochs
      self.assertEqual((got.low, got.high), (102.0, 200.0))
      self.assertTrue(got.text().startswith("about 2 min to 3 min"))


class DryRunTest(unittest.TestCase):
  def test_dry_run_prints_an_estimate_and_writes_nothing(self):
    import contextlib
    import io

    from tests import _toy_experiment as toy

    with tempfile.TemporaryDirectory() as d:
      out = Path(d) / "run"
      printed = io.StringIO()
      with contextlib.redirect_stdout(printed):
        code = toy.main(["--dry-run", "--out", str(out), "--steps", "5"])
      self.assertEqual(code, 0)
      self.assertFalse(out.exists())
      self.assertIn("toy --preset quick: no estimate: no cost model for the toy experiment", printed.getvalue())
      errors = io.StringIO()
      with contextlib.redirect_stderr(errors):
        self.assertEqual(toy.main(["--dry-run", "--resume", str(out)]), 2)
      self.assertIn("--dry-run", errors.getvalue())
      with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
        toy.main(["--dry-run", "--steps", "0"])  # the flags are still validated
