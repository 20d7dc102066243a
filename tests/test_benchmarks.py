"""Smoke test of the benchmarks: they run and write well-formed JSON (timings are measured, never asserted)."""

import contextlib
import importlib.util
import io
import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from absl.testing import absltest

from benchmarks import (
  alignment_losses,
  gnn_step,
  gramian_vs_sampling,
  scaling,
  upgrade_fit_load,
  upgrade_peers,
  upgrade_serving,
)
from benchmarks import compile as compile_benchmark
from benchmarks import upgrade as upgrade_benchmark
from tests._tolerance import assert_close


@pytest.mark.heavy
class BenchmarkSmokeTest(absltest.TestCase):
  def test_upgrade_quick_writes_the_documented_fields(self):
    out = Path(self.create_tempdir().full_path) / "upgrade.json"
    self.assertEqual(
      upgrade_benchmark.main(
        [
          "--out",
          str(out),
          "--quick",
          "--rows",
          "5000",
          "--widths",
          "16",
          "--repeats",
          "1",
          "--query-repeats",
          "20",
          "--pairs",
          "600",
          "--command-pairs",
          "200",
          "--command-index-rows",
          "1200",
          "--command-kinds",
          "linear",
        ]
      ),
      0,
    )
    report = json.loads(out.read_text())
    self.assertEqual(sorted(report["fit"]), ["affine", "linear", "mlp", "orthogonal"])
    command = report["command"]
    self.assertEqual((command["pairs"], command["index_rows"]), (200, 1400))
    phases = [command["linear"][name] for name in ("import_s", "fit_s", "report_s", "write_s")]
    self.assertTrue(all(p > 0 for p in phases), phases)
    self.assertGreater(command["linear"]["command_median_s"], command["linear"]["fit_s"])
    (row,) = report["transform"]
    self.assertEqual((row["rows"], row["width"], row["input_bytes"]), (5000, 16, 5000 * 16 * 4 + 128))
    for name in ("bcjax", "numpy"):
      self.assertGreater(row[name]["median_s"], 0)
      self.assertGreaterEqual(row[name]["peak_rss_bytes"], row[name]["after_import_rss_bytes"])
    assert_close(row["time_ratio"], row["bcjax"]["median_s"] / row["numpy"]["median_s"])
    self.assertGreater(report["query"]["bcjax_median_us"], 0)
    self.assertIn("model", report["cpu"])

  def test_serving_benchmark_times_each_store_beside_its_own_search(self):
    out = Path(self.create_tempdir().full_path) / "serving.json"
    argv = ["--out", str(out), "--quick", "--rows", "300", "--pairs", "100", "--one-query-repeats", "3"]
    with contextlib.redirect_stderr(io.StringIO()):
      self.assertEqual(upgrade_serving.main([*argv, "--batch", "20", "--batch-repeats", "1", "--stores", "faiss"]), 0)
    report = json.loads(out.read_text())
    (row,) = report["stores"].values()
    self.assertEqual(list(report["stores"]), ["faiss"])
    for side in ("bridged_ms", "raw_ms"):
      self.assertGreater(row["one_query"][side], 0)
    assert_close(row["one_query"]["ratio"], row["one_query"]["bridged_ms"] / row["one_query"]["raw_ms"])
    self.assertEqual(row["batch"]["queries"], 20)
    self.assertGreater(row["first_call_s"], 0)
    self.assertIn("model", report["cpu"])
    self.assertNotIn("migration", report)  # LanceDB's row only

  def test_serving_benchmark_reads_real_embeddings_and_refuses_bad_files_before_work(self):
    tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(0)
    items = rng.standard_normal((500, 8))
    np.save(tmp / "old.npy", (items @ rng.standard_normal((8, 12)) + 1.0).astype(np.float32))
    np.save(tmp / "new.npy", (items @ rng.standard_normal((8, 12)) - 2.0).astype(np.float32))
    np.save(tmp / "short.npy", np.ones((40, 12), np.float32))
    out = tmp / "serving.json"
    base = ["--out", str(out), "--quick", "--rows", "300", "--pairs", "100", "--one-query-repeats", "3"]
    base += ["--batch", "20", "--batch-repeats", "1", "--stores", "faiss"]
    for extra, pattern in (
      (["--old", str(tmp / "old.npy")], "--new is missing"),
      (["--old", str(tmp / "old.npy"), "--new", str(tmp / "short.npy")], "--new 40 rows against --old's 500"),
      (["--old", str(tmp / "old.npy"), "--new", str(tmp / "old.npy"), "--rows", "450"], "--old 500 rows; .* needs 570"),
    ):
      err = io.StringIO()
      with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as exit_:
        upgrade_serving.main([*base, *extra])
      self.assertEqual(exit_.exception.code, 2)
      self.assertRegex(err.getvalue(), pattern)
      self.assertFalse(out.exists())
    with contextlib.redirect_stderr(io.StringIO()):
      self.assertEqual(upgrade_serving.main([*base, "--old", str(tmp / "old.npy"), "--new", str(tmp / "new.npy")]), 0)
    report = json.loads(out.read_text())
    self.assertEqual(report["source"], f"{tmp / 'old.npy'} / {tmp / 'new.npy'}")
    self.assertEqual(report["stores"]["faiss"]["rows"], 300)

  @pytest.mark.heavy
  def test_serving_benchmark_times_a_migration_beside_lancedbs_own_searches(self):
    if importlib.util.find_spec("lancedb") is None:
      self.skipTest("lancedb is not installed (the stores extra)")
    out = Path(self.create_tempdir().full_path) / "serving.json"
    argv = ["--out", str(out), "--quick", "--rows", "300", "--pairs", "100", "--one-query-repeats", "3"]
    with contextlib.redirect_stderr(io.StringIO()):
      self.assertEqual(upgrade_serving.main([*argv, "--batch", "20", "--batch-repeats", "1", "--stores", "lancedb"]), 0)
    migration = json.loads(out.read_text())["migration"]
    self.assertEqual((migration["rows"], migration["re_embedded"], migration["batch"]["queries"]), (300, 150, 20))
    for side in ("served_ms", "raw_ms"):
      self.assertGreater(migration["one_query"][side], 0)
    assert_close(
      migration["one_query"]["ratio"], migration["one_query"]["served_ms"] / migration["one_query"]["raw_ms"]
    )

  def test_peers_benchmark_scores_every_tool_on_the_same_queries(self):
    out = Path(self.create_tempdir().full_path) / "peers.json"
    argv = ["--out", str(out), "--quick", "--items", "600", "--pairs", "100", "--queries", "100"]
    with contextlib.redirect_stderr(io.StringIO()):
      self.assertEqual(upgrade_peers.main(argv), 0)
    report = json.loads(out.read_text())
    (row,) = report["rows"]
    tools = row["tools"]
    for kind in upgrade_peers.KINDS:
      self.assertGreater(tools[f"bcjax {kind}"]["fit_s"], 0)
      self.assertGreaterEqual(tools[f"bcjax {kind}"]["r@10"], tools[f"bcjax {kind}"]["r@1"])
    self.assertLess(tools["no map"]["r@10"], 0.2)  # two unrelated spaces: the measure is far from saturated
    self.assertGreater(tools["bcjax linear"]["r@10"], 0.5)
    self.assertEqual("isotrieve ridge" in tools, report["isotrieve"])
    self.assertIn("model", report["cpu"])

  def test_fit_load_times_both_thread_policies_beside_busy_processes(self):
    out = Path(self.create_tempdir().full_path) / "fit_load.json"
    argv = ["--out", str(out), "--quick", "--pairs", "60", "--busy", "0,1"]
    with contextlib.redirect_stderr(io.StringIO()):
      self.assertEqual(upgrade_fit_load.main(argv), 0)
    report = json.loads(out.read_text())
    self.assertEqual([(r["pairs"], r["busy"]) for r in report["rows"]], [(60, 0), (60, 1)])
    for row in report["rows"]:
      for policy in ("idle cores (bcjax)", "one per core"):
        self.assertGreater(row[policy]["median_s"], 0)
      self.assertBetween(row["threads_chosen"], 1, report["cores"])
    self.assertIn("model", report["cpu"])

  def test_compile_budget_counts_a_fit_cold_and_warm(self):
    # bcjax fit on 200 pairs of 16-d embeddings, in two fresh processes sharing one persistent cache
    out = Path(self.create_tempdir().full_path) / "compile.json"
    with contextlib.redirect_stderr(io.StringIO()):
      self.assertEqual(compile_benchmark.main(["--out", str(out), "--quick"]), 0)
    report = json.loads(out.read_text())
    self.assertIn("model", report["cpu"])
    runs = report["targets"]["fit-linear"]
    for name in ("cold", "warm"):
      run = runs[name]
      self.assertIn(run["exit_code"], (0, 3, 4, 5))  # bcjax fit ran to a verdict (200 pairs: not measurable)
      self.assertGreater(run["wall_s"], 0)
      self.assertGreaterEqual(run["wall_s"], run["compile_s"])
      self.assertEqual(
        run["eager_primitive_calls"],
        sum(run["eager_top"].values()) if len(run["eager_top"]) < 10 else run["eager_primitive_calls"],
      )
    self.assertGreater(runs["cold"]["programs_compiled"], 0)  # a fit compiles something, and the count sees it
    self.assertEqual(runs["cold"]["programs"], runs["cold"]["programs_compiled"] + runs["cold"]["programs_from_cache"])
    # an empty cache: the cold run reads back only a program it built twice itself (one HLO from two maps of a
    # cross-validation); the warm run reads the cold run's programs back
    self.assertLess(runs["cold"]["programs_from_cache"], runs["cold"]["programs_compiled"])
    self.assertGreater(runs["warm"]["programs_from_cache"], runs["cold"]["programs_from_cache"])
    self.assertGreater(runs["cold"]["trace_s"], 0)
    # a target outside the list is a usage error, before any run
    with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
      compile_benchmark.main(["--out", str(out.with_name("x.json")), "--targets", "nothing"])

  def test_alignment_losses_quick_writes_json(self):
    out = Path(self.create_tempdir().full_path) / "bench.json"
    self.assertEqual(alignment_losses.main(["--out", str(out), "--quick"]), 0)
    report = json.loads(out.read_text())
    self.assertLen(report["results"], 4)
    for row in report["results"]:
      for kind in ("single", "multi"):
        self.assertGreater(row[kind]["median_s"], 0)
        self.assertGreater(row[kind]["compile_s"], 0)
    with self.assertRaises(SystemExit) as ctx:  # an existing report is refused before any work
      alignment_losses.main(["--out", str(out), "--quick"])
    self.assertEqual(ctx.exception.code, 2)
    self.assertEqual(json.loads(out.read_text()), report)

  def test_gramian_vs_sampling_quick_writes_the_documented_fields(self):
    out = Path(self.create_tempdir().full_path) / "gram.json"
    # the equal-cost comparison on a smaller trajectory: its fields, not its numbers, are under test here
    self.assertEqual(
      gramian_vs_sampling.main(
        [
          "--out",
          str(out),
          "--quick",
          "--step-pages",
          "3000",
          "--step-repeats",
          "1",
          "--n",
          "1000",
          "--steps",
          "100",
          "--alphas",
          "0.2",
        ]
      ),
      0,
    )
    report = json.loads(out.read_text())
    steps = report["train_steps"]
    self.assertEqual(steps["pages"], 3000)
    self.assertEqual(steps["optimizer"], "lazy-adam")
    self.assertEqual(
      sorted(steps["methods"]),
      ["exact-uniform", "sagram-uniform", "sampling-uniform", "softmax-logq", "sogram-uniform"],
    )
    for method, row in steps["methods"].items():
      self.assertGreater(row["median_s"], 0.0, method)
      self.assertGreater(row["compile_s"], 0.0, method)
      self.assertTrue(row["finite"], method)
      self.assertGreaterEqual(row["state_bytes"], 3 * steps["param_bytes"], method)  # parameters and Adam's moments
      self.assertGreater(row["xla_peak_bytes"], row["state_bytes"] // 2, method)
    k = steps["k"]
    self.assertEqual(
      steps["methods"]["sogram-uniform"]["state_bytes"] - steps["methods"]["exact-uniform"]["state_bytes"],
      2 * (4 * k * k + 4),
    )  # per side a float32 k x k Gramian and an int32 count
    sagram_extra = steps["methods"]["sagram-uniform"]["state_bytes"] - steps["methods"]["exact-uniform"]["state_bytes"]
    self.assertEqual(sagram_extra, 2 * (4 * 3000 * k + 4 * k * k + 4))  # per side the n x k cache, S and a count
    for row in report["cost"]:
      self.assertEqual(
        set(row) >= {"batch", "k", "double_sum_s", "gramian_s", "sogram_update_s", "ratio", "flop_ratio"}, True
      )
      assert_close(row["ratio"], row["double_sum_s"] / row["gramian_s"])
    equal = report["equal_cost"]
    for key in ("sogram_b128_error", "sampling_b1024_error"):
      self.assertGreater(equal[key], 0.0)
      self.assertLess(equal[key], 2.0)

  def test_gnn_step_quick_writes_timings(self):
    out = Path(self.create_tempdir().full_path) / "gnn.json"
    self.assertEqual(gnn_step.main(["--out", str(out), "--quick", "--steps", "2"]), 0)
    report = json.loads(out.read_text())
    self.assertLen(report["results"], 2)
    sizes = report["sizes"]
    nodes = sizes["users"] + sizes["items"]
    self.assertEqual(report["threads"]["torch_threads"], 2)
    for row in report["results"]:
      bc = row["bcjax"]
      self.assertGreater(bc["median_s"], 0)
      self.assertGreater(bc["compile_s"], 0)
      # Each SAGE layer's two [N, d] x [d, d] products, forward and both backward products: 12 N d^2 FLOPs at least.
      self.assertGreaterEqual(bc["xla_flops"], 12 * nodes * row["dim"] ** 2 * row["layers"])
      assert_close(bc["floor_s"], bc["xla_flops"] / bc["gemm_flops_per_s"])
      assert_close(bc["achieved_flops_per_s"], bc["xla_flops"] / bc["median_s"])
      if "pyg" in row:  # only where torch_geometric is installed
        assert_close(row["pyg_over_bcjax"], row["pyg"]["median_s"] / bc["median_s"])
        assert_close(row["pyg_over_floor"], row["pyg"]["median_s"] / bc["floor_s"])
        self.assertGreater(row["pyg"]["gemm_flops_per_s"], 0)

  def test_gnn_step_on_an_accelerator_times_no_cpu_pyg_step(self):
    """PyG's step runs on the CPU; beside a bcjax step on a GPU its ratio would compare machines."""
    out = Path(self.create_tempdir().full_path) / "gnn.json"
    err = io.StringIO()
    cpu_only = mock.Mock(side_effect=AssertionError("PyG timed beside an accelerator"))
    with (
      mock.patch.object(gnn_step.jax, "default_backend", return_value="gpu"),
      mock.patch.object(gnn_step, "time_pyg", cpu_only),
      contextlib.redirect_stderr(err),
    ):
      self.assertEqual(gnn_step.main(["--out", str(out), "--quick", "--steps", "1"]), 0)
    cpu_only.assert_not_called()
    for row in json.loads(out.read_text())["results"]:
      self.assertNotIn("pyg", row)
      self.assertNotIn("pyg_over_bcjax", row)
    self.assertIn("bcjax on gpu; PyG runs on the CPU: no comparison", err.getvalue())

  def test_scaling_quick_shards_the_table_by_one_over_n(self):
    out = Path(self.create_tempdir().full_path) / "scaling.json"
    self.assertEqual(scaling.main(["--out", str(out), "--quick", "--devices", "1,4"]), 0)
    report = json.loads(out.read_text())
    rows = report["by_devices"]
    self.assertEqual([r["devices"] for r in rows], [1, 4])
    for r in rows:
      self.assertEqual(r["table"]["bytes_per_device"] * r["devices"], r["table"]["total_bytes"])
      self.assertGreater(r["two_tower_step"]["median_s"], 0)
      self.assertGreater(r["two_tower_step"]["compile_s"], 0)
      # the same global batches on every device count: the same loss up to float32 summation order
      assert_close(
        np.float32(r["two_tower_step"]["final_loss"]), np.float32(rows[0]["two_tower_step"]["final_loss"]), "reduction"
      )
    with self.assertRaises(SystemExit) as ctx:  # a batch not divisible by a device count is refused before work
      scaling.main(["--out", str(out.with_name("x.json")), "--quick", "--devices", "3"])
    self.assertEqual(ctx.exception.code, 2)


if __name__ == "__main__":
  absltest.main()
