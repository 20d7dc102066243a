"""Smoke test of the benchmarks: they run and write well-formed JSON (timings are measured, never asserted)."""

import json
from pathlib import Path

from absl.testing import absltest

from benchmarks import alignment_losses, gramian_vs_sampling


class BenchmarkSmokeTest(absltest.TestCase):

  def test_alignment_losses_quick_writes_json(self):
    out = Path(self.create_tempdir().full_path) / "bench.json"
    self.assertEqual(alignment_losses.main(["--out", str(out), "--quick"]), 0)
    report = json.loads(out.read_text())
    self.assertLen(report["results"], 4)
    for row in report["results"]:
      for kind in ("single", "multi"):
        self.assertGreater(row[kind]["median_s"], 0)
        self.assertGreater(row[kind]["compile_s"], 0)
    self.assertRaises(FileExistsError, alignment_losses.main, ["--out", str(out), "--quick"])

  def test_gramian_vs_sampling_quick_writes_the_documented_fields(self):
    out = Path(self.create_tempdir().full_path) / "gram.json"
    self.assertEqual(gramian_vs_sampling.main(["--out", str(out), "--quick"]), 0)
    report = json.loads(out.read_text())
    for row in report["cost"]:
      self.assertEqual(set(row) >= {"batch", "k", "double_sum_s", "gramian_s", "sogram_update_s", "ratio",
                                    "flop_ratio"}, True)
      self.assertAlmostEqual(row["ratio"], row["double_sum_s"] / row["gramian_s"])
    equal = report["equal_cost"]
    for key in ("sogram_b128_error", "sampling_b1024_error"):
      self.assertGreater(equal[key], 0.0)
      self.assertLess(equal[key], 2.0)


if __name__ == "__main__":
  absltest.main()
