"""End-to-end test of the demo experiment on its tiny ``test`` preset: outputs, registries, determinism, CLI."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from absl.testing import absltest

from bcjax.versioning import Registry
from experiments.error_amplification.__main__ import main
from experiments.error_amplification.configs import PRESETS
from tests._resume import assert_same_results, kill_then_resume
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]


def run(out: Path, *flags: str) -> dict:
  code = main(["--preset", "test", "--out", str(out), "--no-progress", *flags])
  assert code == 0, code
  return json.loads((out / "results.json").read_text())


@pytest.mark.heavy
class ErrorAmplificationTest(absltest.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.cfg = PRESETS["test"]
    cls.tmp = Path(tempfile.mkdtemp(prefix="bcjax-error-amplification-"))
    cls.out = cls.tmp / "run1"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
      cls.results = run(cls.out)
    cls.printed = printed.getvalue()

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def test_writes_every_output(self):
    for name in ("config.json", "metrics.jsonl", "results.json", "table.md", "alignment_error.png"):
      self.assertTrue((self.out / name).is_file(), name)
    self.assertEqual((self.out / "alignment_error.png").read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
    results = json.loads((self.out / "results.json").read_text())
    self.assertEqual(set(results["methods"]), set(self.cfg.methods))
    for method, res in results["methods"].items():
      for key in (
        "alignment_error_to_v0",
        "single_step_error",
        "intended_mse",
        "composed_gain",
        "intended_degradation_pct",
      ):
        self.assertLen(res[key], len(self.cfg.dims) - 1, f"{method}/{key}")
        self.assertTrue(np.all(np.isfinite(res[key])), f"{method}/{key}")
    self.assertEqual(results["methods"]["non-bc"]["intended_degradation_pct"], [0.0, 0.0])
    table = (self.out / "table.md").read_text()
    self.assertIn("| bc-aligner |", table)

  def test_metrics_are_logged_and_loss_decreases(self):
    records = [json.loads(line) for line in (self.out / "metrics.jsonl").read_text().splitlines()]
    v0 = [r for r in records if r.get("method") == "non-bc" and r.get("version") == 0]
    self.assertGreaterEqual(len(v0), 2)
    self.assertLess(v0[-1]["loss"], v0[0]["loss"])

  def test_registries_reproduce_the_reported_alignment_error(self):
    for method in ("post-lin-sloss", "post-lin-mloss", "joint-lin-sloss", "bc-aligner"):
      reg = Registry(self.out / "registries" / method)
      infos = reg.versions()
      self.assertEqual([i.dim for i in infos], list(self.cfg.dims))
      gain = np.linalg.norm(reg.compose(0), ord=2)
      assert_close(gain, self.results["methods"][method]["composed_gain"][-1])

  def test_notrans_methods_have_unit_gain_and_post_hoc_shares_non_bc_models(self):
    methods = self.results["methods"]
    self.assertEqual(methods["joint-notrans"]["composed_gain"], [1.0, 1.0])
    self.assertEqual(methods["post-lin-sloss"]["intended_mse"], methods["non-bc"]["intended_mse"])

  def test_same_seed_gives_same_numbers_and_other_seed_differs(self):
    again = run(self.tmp / "run2")
    self.assertEqual(again["methods"], self.results["methods"])
    other = run(self.tmp / "run3", "--seed", "1", "--methods", "bc-aligner")
    self.assertNotEqual(other["methods"]["bc-aligner"], self.results["methods"]["bc-aligner"])

  def test_transform_kinds_and_sweep(self):
    """--transform mlp with a sweep over linear and mlp: the sweep's linear runs are the default run's numbers (the
    same models, bit for bit), its mlp runs the run's own; the registries store each kind."""
    methods = ("non-bc", "post-lin-sloss", "bc-aligner")
    res = run(
      self.tmp / "sweep", "--transform", "mlp", "--transform-sweep", "linear,mlp", "--methods", ",".join(methods)
    )
    sweep = res["transform_sweep"]
    self.assertEqual(list(sweep), ["linear", "mlp"])
    self.assertEqual(sweep["mlp"]["transform"], "mlp(hidden=64)")
    for m in ("post-lin-sloss", "bc-aligner"):
      self.assertEqual(sweep["linear"]["methods"][m], self.results["methods"][m])
      self.assertEqual(sweep["mlp"]["methods"][m], res["methods"][m])
      self.assertEqual(res["methods"][m]["composed_gain"], [None, None])  # no matrix represents an MLP chain
      self.assertNotEqual(
        res["methods"][m]["alignment_error_to_v0"], self.results["methods"][m]["alignment_error_to_v0"]
      )
      reg = Registry(self.tmp / "sweep" / "registries" / m)
      self.assertEqual([reg.backward_map(k)[0].kind for k in (1, 2)], ["mlp", "mlp"])
      self.assertEqual(
        Registry(self.tmp / "sweep" / "registries" / "transform=linear" / m).backward_map(2)[0].kind, "linear"
      )
    self.assertEqual(res["methods"]["post-lin-sloss"]["intended_mse"], res["methods"]["non-bc"]["intended_mse"])
    table = (self.tmp / "sweep" / "table.md").read_text()
    self.assertIn("| bc-aligner | mlp(hidden=64) |", table)
    self.assertIn("| non-bc | NoTrans |", table)
    self.assertEqual(table.count("| bc-aligner |"), 3)  # the main table and the sweep's two kinds

  def test_bad_transform_flags_exit_2_before_writing(self):
    out = self.tmp / "bad-transform"
    for flags in (
      ["--transform-sweep", "linear,affine", "--transform-rank", "7"],  # the test preset's dims: 6, 8, 8
      ["--transform-sweep", "mlp", "--methods", "non-bc,joint-notrans"],
      ["--transform", "rotation"],
    ):
      with self.assertRaises(SystemExit, msg=flags) as ctx, contextlib.redirect_stderr(io.StringIO()):
        main(["--preset", "test", "--out", str(out), "--no-progress", *flags])
      self.assertEqual(ctx.exception.code, 2, flags)
      self.assertFalse(out.exists(), flags)

  def test_refuses_a_non_empty_output_directory(self):
    before = (self.out / "results.json").read_bytes()
    self.assertEqual(main(["--preset", "test", "--out", str(self.out), "--no-progress"]), 2)
    self.assertEqual((self.out / "results.json").read_bytes(), before)

  def test_unknown_method_is_rejected(self):
    with self.assertRaises(SystemExit) as ctx:
      main(["--preset", "test", "--out", str(self.tmp / "run4"), "--methods", "nope"])
    self.assertEqual(ctx.exception.code, 2)
    self.assertFalse((self.tmp / "run4").exists())

  def test_killed_in_a_late_stage_resumes_to_the_same_results(self):
    resumed = kill_then_resume(
      "experiments.error_amplification", main, ["--preset", "test"], "post-lin-sloss/B2", self.tmp / "killed"
    )
    assert_same_results(self, resumed, self.results)
    self.assertEqual(len(list((self.tmp / "killed" / "registries" / "post-lin-mloss").iterdir())), 3)

  def test_a_failing_stage_leaves_partial_results_then_resumes(self):
    out = self.tmp / "failing"
    with (
      mock.patch.dict(os.environ, {"BCJAX_FAULT": "fail:bc-aligner/v2"}),
      contextlib.redirect_stderr(io.StringIO()) as err,
    ):
      self.assertEqual(main(["--preset", "test", "--out", str(out), "--no-progress"]), 1)
    self.assertIn("stage 'bc-aligner/v2' failed", err.getvalue())
    partial = json.loads((out / "results.partial.json").read_text())
    self.assertEqual(partial["failed_stage"], "bc-aligner/v2")
    self.assertIn("bc-aligner/v1", partial["finished_stages"])
    self.assertFalse((out / "results.json").exists())
    self.assertEqual(main(["--resume", str(out), "--no-progress"]), 0)
    assert_same_results(self, json.loads((out / "results.json").read_text()), self.results)

  def test_command_line_help_and_printed_table(self):
    """``python -m`` prints the usage; a run prints its table (the kill-and-resume test runs ``python -m`` too)."""
    proc = subprocess.run(
      [sys.executable, "-m", "experiments.error_amplification", "--help"],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=120,
    )
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertIn("--preset", proc.stdout)
    self.assertIn("| bc-aligner | linear |", self.printed)
    self.assertIn(f"outputs in {self.out}", self.printed)


if __name__ == "__main__":
  absltest.main()
