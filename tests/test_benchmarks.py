"""Smoke test of the benchmarks: they run and write well-formed JSON (timings are measured, never asserted)."""

import json
from pathlib import Path

from absl.testing import absltest

from benchmarks import alignment_losses


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


if __name__ == "__main__":
  absltest.main()
