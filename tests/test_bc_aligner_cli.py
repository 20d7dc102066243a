"""The BC-Aligner command line end to end: cut-offs and presets checked before anything is written, the schema of
a run, kill-and-resume, four devices against one, the transform sweep and bad arguments."""

import contextlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest

from bcjax.alignment import (
  semi_orthogonal,
  single_step_loss,
)
from bcjax.data import TASKS, synthetic_evolving_graph
from bcjax.versioning import Registry
from experiments import harness
from experiments.bc_aligner import __main__ as cli
from experiments.bc_aligner import seeds
from experiments.bc_aligner.configs import KEEP_LATEST, METHODS, PRESETS
from experiments.bc_aligner.data import VersionData, check_cutoffs, version_data
from experiments.bc_aligner.experiment import EXPERIMENT
from experiments.bc_aligner.train import (
  recall,
)
from tests._resume import assert_same_results
from tests._runs import assert_runs_agree
from tests._tolerance import assert_close
from tests.test_parallel import ROOT, forced_device_env

CFG = PRESETS["test"]


@pytest.mark.heavy
class CutoffTest(absltest.TestCase):
  """Recall@K cut-offs are checked against the items of every version before the first step (the test preset's
  synthetic graph ranks 123, 125, 127, 134 and 141 items at versions 0..4)."""

  def run_cli(self, *argv):
    out = Path(self.create_tempdir().full_path) / "run"
    err = io.StringIO()
    with mock.patch("sys.stderr", err), mock.patch("sys.stdout", io.StringIO()):
      code = cli.main(["--preset", "test", *argv, "--out", str(out), "--no-progress"])
    return code, err.getvalue(), out

  def test_a_cut_off_above_the_items_exits_2_before_anything_is_written(self):
    code, err, out = self.run_cli("--ks", "10,20,50,124")
    self.assertEqual(code, 2)
    self.assertFalse(out.exists())
    self.assertIn(
      "--ks: cut-off(s) [124] exceed the ranked items: version 0 ranks 123 items (items by version: "
      "[123, 125, 127, 134, 141]); e.g. --ks 10,20,50",
      err,
    )

  def test_the_intended_metric_needs_its_k_items_at_every_version(self):
    split = lambda n: VersionData(mock.Mock(num_items=n), None)
    check_cutoffs([split(60), split(50), split(70)], (10,), 50)  # 50 items at every version: fine
    with self.assertRaisesRegex(ValueError, r"too small for the intended metric Recall@50: version 1 ranks 49 "):
      check_cutoffs([split(60), split(49), split(70)], (10,), 50)

  def test_the_cut_offs_are_logged_and_recall_at_50_always_computed(self):
    graph = synthetic_evolving_graph(**dict(PRESETS["test"].synthetic), seed=0)
    vd = version_data(graph)[0]
    z = jax.random.normal(jax.random.key(0), (vd.num_nodes, 4))
    n = vd.split.num_items
    self.assertEqual(list(recall(z, vd, (n, 5))), ["recall@5", "recall@50", f"recall@{n}"])
    values = list(recall(z, vd, (n, 5)).values())
    self.assertEqual(values, sorted(values))  # a longer list holds the shorter one's hits
    self.assertEqual(recall(z, vd, (5,))["recall@50"], recall(z, vd)["recall@50"])
    self.assertEqual(EXPERIMENT.parse(["--ks", "5,10"])[2].ks, (5, 10))
    with self.assertRaises(SystemExit):
      EXPERIMENT.parse(["--ks", "0,10"])


class DefaultCutoffTest(absltest.TestCase):
  def test_the_default_cut_offs_refuse_a_small_dataset_without_naming_a_flag_never_given(self):
    # the 60-item dataset on the test preset: "--ks: cut-off(s) [100] exceed ..." named a flag the user
    # never gave; the error says the default cut-offs are too many and what to pass instead
    split = lambda n: VersionData(mock.Mock(num_items=n), None)
    with self.assertRaises(ValueError) as error:
      check_cutoffs([split(60)] * 5, (10, 20, 50, 100), 50, given=False)
    self.assertEqual(
      str(error.exception),
      "this dataset is too small for the default Recall@K cut-offs (10,20,50,100): [100] exceed the ranked items: "
      "version 0 ranks 60 items (items by version: [60, 60, 60, 60, 60]); pass --ks 10,20,50 to log only the "
      "cut-offs it has",
    )
    with self.assertRaisesRegex(ValueError, r"^--ks: cut-off\(s\) \[100\] exceed the ranked items"):
      check_cutoffs([split(60)] * 5, (10, 100), 50, given=True)  # a flag the user gave is named

  def test_the_experiment_says_whether_ks_was_given(self):
    for argv, given in ((["--preset", "test"], False), (["--preset", "test", "--ks", "5,10"], True)):
      _, args, cfg = EXPERIMENT.parse(argv)
      with mock.patch("experiments.bc_aligner.experiment.check_cutoffs") as check:
        EXPERIMENT.load(args, cfg)
      self.assertEqual(check.call_args.kwargs, {"given": given}, argv)


class PresetTest(absltest.TestCase):
  def test_quick_widths_are_the_papers_over_eight_at_every_version(self):
    quick, paper = PRESETS["quick"].versions, PRESETS["paper"].versions
    self.assertEqual([layers for layers, _ in quick], [layers for layers, _ in paper])
    self.assertEqual([8 * d for _, d in quick], [d for _, d in paper])

  def test_quick_lambda_pulls_on_the_squared_error_as_the_papers_does(self):
    """λ times the reference-scaled single-step loss of a residual of fixed Euclidean norm is the same at both
    presets' widths, at every version (so λ = 16 at widths ÷ 8 would pull 8x harder)."""
    rng = np.random.default_rng(0)
    pulls = {}
    for name in ("paper", "quick"):
      cfg = PRESETS[name]
      pulls[name] = []
      for (_, d_prev), (_, d_new) in zip(cfg.versions[:-1], cfg.versions[1:]):
        delta = rng.normal(size=(16, d_prev))
        delta *= 3.0 / np.linalg.norm(delta, axis=1, keepdims=True)  # every row's squared error is 9
        loss = single_step_loss(
          jnp.zeros((16, d_new)), jnp.asarray(delta, jnp.float32), jnp.zeros((d_prev, d_new)), per_dim=True
        )
        pulls[name].append(cfg.lam * float(loss))
    self.assertEqual(PRESETS["paper"].lam, 16.0)  # the reference's lam16
    assert_close(np.float32(pulls["quick"]), np.float32(pulls["paper"]), "reduction")
    assert_close(np.float32(pulls["paper"]), np.float32(16.0 * 9.0 / np.array([256, 320, 384, 448])), "reduction")


@pytest.mark.heavy
class CommandLineTest(absltest.TestCase):
  ARGV = [
    "--preset",
    "test",
    "--methods",
    "bc-aligner,post-lin-mloss,keep-all",
    "--epochs",
    "2",
    "--transform-sweep",
    "linear,orthogonal",
    # M_0 at 10x the test preset's rate and consumers trained for 10 epochs: four of the five version-0
    # consumers clearly above chance, so the unintended side is measured (at the preset's own settings every
    # consumer is at chance and the run says the unintended side is not measurable).
    "--learning-rate",
    "0.01",
    "--consumer-epochs",
    "10",
    # Seed 1: version 0's model scores Recall@50 0.307 at version 0 against a random ranking's 0.227 ± 0.029, clearly
    # above chance, so the intended side is measured (the preset's seed 42 leaves it at 0.313 against 0.269 ± 0.029,
    # at chance, and the run says the intended side is not measurable).
    "--seed",
    "1",
  ]

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = Path(tempfile.mkdtemp(prefix="bcjax-bc-aligner-"))
    cls.code = cli.main([*cls.ARGV, "--out", str(cls.tmp / "run"), "--no-progress"])

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def test_a_run_stopped_while_training_consumers_resumes_to_the_same_results(self):
    """The third consumer task raises (exit 1, partial results naming it); ``--resume`` reads back every trained
    method and the first two tasks, trains the rest and gives the uninterrupted run's results. The run goes on in
    this process, whose compiled steps setUpClass left warm; a SIGKILL right after an orbax stage is saved is resumed
    in a fresh process by test_error_amplification."""
    out, failing = self.tmp / "stopped", f"consumers/{TASKS[2]}"
    with (
      mock.patch.dict("os.environ", {harness.FAULT_ENV: f"fail:{failing}"}),
      contextlib.redirect_stderr(io.StringIO()) as err,
    ):
      self.assertEqual(cli.main([*self.ARGV, "--out", str(out), "--no-progress"]), 1)
    self.assertIn(f"stage {failing!r} failed", err.getvalue())
    partial = json.loads((out / "results.partial.json").read_text())
    self.assertEqual(partial["failed_stage"], failing)
    self.assertTrue({f"consumers/{t}" for t in TASKS[:2]} <= set(partial["finished_stages"]), partial)
    self.assertIn("bc-aligner/v4", partial["finished_stages"])
    self.assertFalse((out / "results.json").exists())
    self.assertEqual(cli.main(["--resume", str(out), "--no-progress"]), 0)
    resumed = json.loads((out / "results.json").read_text())
    assert_same_results(self, resumed, json.loads((self.tmp / "run" / "results.json").read_text()))

  def test_end_to_end_schema(self):
    out = self.tmp / "run"
    self.assertEqual(self.code, 0)
    results = json.loads((out / "results.json").read_text())
    self.assertEqual(set(results["methods"]), {"keep-all", "fix-m0", "non-bc", "post-lin-mloss", "bc-aligner"})
    self.assertIsNone(results["unintended_not_measurable"])
    self.assertIsNone(results["intended_not_measurable"])
    level = results["intended_chance"]["recall@50"]
    self.assertEqual((len(level["mean_by_version"]), len(level["sd_by_version"])), (5, 5))
    assert_close(level["mean"], np.mean(level["mean_by_version"]))
    for m, r in results["methods"].items():  # the models at chance are those at most 2 sd above a random ranking
      at = r["intended_recall50_mean"] <= level["mean"] + 2 * level["sd"]
      self.assertEqual(m in results["intended_at_chance"], at, m)
    self.assertIn(f"| {level['mean']:.4f} ± {level['sd']:.4f}: ", (out / "table.md").read_text())
    measured = {t for t, c in results["consumers"].items() if c["reference_auc_ci95"][0] > 0.5}
    self.assertGreaterEqual(len(measured), 2)
    self.assertEqual(set(results["consumers"]) - measured, set(results["consumers_at_chance"]))
    for r in results["methods"].values():  # the unintended side averages the measured tasks only
      assert_close(r["unintended_auc_mean"], np.mean([r["unintended_auc_by_task"][t] for t in measured]), scale=1.0)
    for m, r in results["methods"].items():
      self.assertEqual(len(r["intended_recall50_by_version"]), 5)
      self.assertEqual(len(r["alignment_error_by_version"]), 5)
      self.assertEqual(len(r["unintended_auc_by_task"]), 5)
      for key in (
        "intended_degradation_pct",
        "unintended_degradation_pct",
        "combined_degradation_pct",
        "alignment_error",
        "negative_flip_pct",
        "recall_recovery_pct",
      ):
        self.assertTrue(np.isfinite(r[key]), (m, key))
      self.assertEqual(len(r["published_recall50_by_version"]), 5)
    self.assertEqual(results["methods"]["fix-m0"]["negative_flip_pct"], 0.0)  # its published embeddings are M_0's
    fix = results["methods"]["fix-m0"]  # its published embeddings are M_0's own: its index recovers its own recall
    assert_close(
      fix["recall_recovery_pct"],
      100 * np.mean(fix["intended_recall50_by_version"]) / results["methods"]["non-bc"]["intended_recall50_mean"],
      scale=100.0,
    )
    self.assertEqual(results["methods"]["fix-m0"]["alignment_error"], 0.0)
    self.assertEqual(results["methods"]["keep-all"]["unintended_degradation_pct"], 0.0)
    self.assertEqual(results["methods"]["non-bc"]["intended_degradation_pct"], 0.0)
    for name in ("table.md", "figure3.png", "metrics.jsonl", "config.json"):
      self.assertTrue((out / name).stat().st_size > 0, name)
    self.assertEqual(len(list((out / "registries" / "bc-aligner").iterdir())), 5)  # versions 0..4
    self.assertIn("| bc-aligner |", (out / "table.md").read_text())
    self.assertIn("neg. flips %", (out / "table.md").read_text())
    for m in ("fix-m0", "post-lin-mloss", "bc-aligner"):  # val-user intervals around each intended degradation
      low, high = results["methods"][m]["intended_degradation_ci95"]
      self.assertLessEqual(low, results["methods"][m]["intended_degradation_pct"] + 1e-9)
      self.assertLessEqual(results["methods"][m]["intended_degradation_pct"] - 1e-9, high)
    self.assertEqual(results["methods"]["post-lin-mloss"]["intended_degradation_ci95"], [0.0, 0.0])  # Non-BC's M_k
    for m in ("post-lin-mloss", "bc-aligner"):  # the chain's statistics against its maps multiplied in float64
      registry, product, expected = Registry(out / "registries" / m), None, []
      ws = [np.float64(registry.backward(k)) for k in range(1, 5)]
      for w in ws:
        product = w if product is None else product @ w
        expected.append(np.linalg.svd(product, compute_uv=False)[0])
      # the run computes in float32 (the harness turns x64 off, as the command line has it), the references in float64
      assert_close(results["methods"][m]["chain_norm_by_version"], expected, "linalg", precision="float32")
      # κ_k = (1/k) Σ_j ‖W_(j+1)⋯W_(k-1)‖_F² / D_j (the empty product is I_(D_(k-1)): that term is 1)
      # and R_k's eigenvalues from the same products: R_k = (1/k) Σ_j (D_(k-1)/D_j) (W^j_(k-1))ᵀ W^j_(k-1)
      kappa, ranges = [], []
      for k in range(1, 5):
        d = ws[k - 1].shape[0]
        terms, carried, r = [1.0], np.eye(d), np.eye(d)
        for w in reversed(ws[: k - 1]):
          carried = w @ carried
          terms.append(np.sum(carried**2) / carried.shape[0])
          r = r + d / carried.shape[0] * carried.T @ carried
        kappa.append(np.mean(terms))
        ranges.append(np.linalg.eigvalsh(r / k)[[0, -1]])
      assert_close(results["methods"][m]["multistep_weight_by_version"], kappa, precision="float32")
      assert_close(results["methods"][m]["multistep_pull_range_by_version"], ranges, "linalg", precision="float32")
      self.assertEqual(results["methods"][m]["multistep_weight_by_version"][0], 1.0)
      self.assertIn(f"| {expected[-1]:.2f} | {kappa[-1]:.2f} |", (out / "table.md").read_text())
    for m in ("keep-all", "fix-m0", "non-bc"):  # no backward chain
      self.assertIsNone(results["methods"][m]["chain_norm_by_version"])
      self.assertIsNone(results["methods"][m]["multistep_weight_by_version"])
      self.assertIsNone(results["methods"][m]["multistep_pull_range_by_version"])
    self.assertEqual(
      {results["gap"]["best"], results["gap"]["next"]},
      {"fix-m0", "post-lin-mloss", "bc-aligner"} & {results["gap"]["best"], results["gap"]["next"]},
    )
    self.assertEqual(cli.main(["--preset", "test", "--out", str(out), "--no-progress"]), 2)  # never overwrites

  def test_four_devices_give_the_one_device_run(self):
    """The whole run (M_0, Non-BC, post-hoc fits, BC-Aligner's joint steps with both B_k kinds of the sweep,
    registries, consumers, report) on 4 forced CPU devices, every batch split over them, against setUpClass's run on
    one device. Every logged number (losses, Recall@K) and every continuous result agrees to float32 rounding (the
    policy's deep-composition tolerance: each is the end of a chain of Adam steps through GraphSAGE); an AUC counts
    ordered pairs of examples, so it may move by a pair or two whose logits lie within the runs' rounding of each
    other (one pair is 1/(n+ n-), about 3e-5 here), and what is computed from AUCs with it."""
    out = self.tmp / "four-devices"
    proc = subprocess.run(
      [
        sys.executable,
        "-m",
        "experiments.bc_aligner",
        *self.ARGV,
        "--devices",
        "4",
        "--out",
        str(out),
        "--no-progress",
      ],
      env=forced_device_env(4),
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=540,
    )
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    one = self.tmp / "run"
    records = [[json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()] for d in (one, out)]
    self.assertEqual(len(records[0]), len(records[1]))
    continuous = sum(assert_runs_agree(self, a, b, "metrics.jsonl") for a, b in zip(*records))
    self.assertGreater(continuous, 100)
    results = [json.loads((d / "results.json").read_text()) for d in (one, out)]
    self.assertGreater(assert_runs_agree(self, *results, "results.json"), 100)

  def test_the_seeds_report_reads_finished_runs(self):
    other = self.tmp / "run-next-seed"
    shutil.copytree(self.tmp / "run", other)
    config = json.loads((other / "config.json").read_text())
    config["config"]["seed"] += 1  # the same numbers under another seed: every std is 0
    (other / "config.json").write_text(json.dumps(config))
    with mock.patch("sys.stdout", new_callable=io.StringIO) as stdout:
      self.assertEqual(seeds.main([str(self.tmp / "run"), str(other)]), 0)
    results = json.loads((self.tmp / "run" / "results.json").read_text())
    bc = results["methods"]["bc-aligner"]
    self.assertIn(
      f"| bc-aligner | {bc['combined_degradation_pct']:+.2f} ± 0.00 | {bc['intended_degradation_pct']:+.2f} ± 0.00 |",
      stdout.getvalue(),
    )
    self.assertIn("Finetune-M0 not run; BC-Aligner has the best combined degradation on", stdout.getvalue())

  def test_the_transform_sweep_reruns_the_transformed_methods_with_each_kind(self):
    out = self.tmp / "run"
    results = json.loads((out / "results.json").read_text())
    sweep = results["transform_sweep"]
    self.assertEqual(list(sweep), ["linear", "orthogonal"])
    self.assertEqual(
      {k: set(s["methods"]) for k, s in sweep.items()}, {k: {"post-lin-mloss", "bc-aligner"} for k in sweep}
    )
    for m in ("post-lin-mloss", "bc-aligner"):  # the run's own kind is the main table's row, not a rerun
      self.assertEqual(sweep["linear"]["methods"][m], results["methods"][m])
      self.assertNotEqual(
        sweep["orthogonal"]["methods"][m]["alignment_error"], results["methods"][m]["alignment_error"]
      )
    # the post-hoc kinds fit B_k on the shared Non-BC models: same intended recall, different published embeddings
    self.assertEqual(
      sweep["orthogonal"]["methods"]["post-lin-mloss"]["intended_recall50_by_version"],
      results["methods"]["non-bc"]["intended_recall50_by_version"],
    )
    registry = Registry(out / "registries" / "transform=orthogonal" / "bc-aligner")
    for k in range(1, 5):
      transform, params = registry.backward_map(k)
      self.assertEqual(transform.kind, "orthogonal")
      q = np.asarray(semi_orthogonal(np.float64(params["a"])))  # the registry applies its maps in float64
      assert_close(q @ q.T, np.eye(q.shape[0]), "linalg", scale=1.0)  # D_(k-1) <= D_k: orthonormal rows
    for m in ("post-lin-mloss", "bc-aligner"):  # products of matrices with orthonormal rows keep them: norm 1
      assert_close(sweep["orthogonal"]["methods"][m]["chain_norm_by_version"], [1.0] * 4, "linalg", precision="float32")
      # and with the per-coordinate scaling each carried term keeps the residual's mean pull: κ = 1
      assert_close(
        sweep["orthogonal"]["methods"][m]["multistep_weight_by_version"], [1.0] * 4, "linalg", precision="float32"
      )
    self.assertEqual(Registry(out / "registries" / "bc-aligner").backward_map(1)[0].kind, "linear")
    table = (out / "table.md").read_text()
    self.assertIn("| orthogonal | bc-aligner | joint |", table)
    self.assertIn("| post-lin-mloss | linear |", table)  # the main table's B_k column
    self.assertEqual((out / "transforms.png").read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

  def test_bad_arguments(self):
    with self.assertRaises(SystemExit):
      cli.main(["--methods", "magic"])
    with self.assertRaises(SystemExit):
      cli.main(["--lambda-sweep", "1,x"])
    for flag, value in (
      ("--consumer-hidden", "0"),
      ("--consumer-dropout", "1.0"),
      ("--consumer-seeds", "0"),
      ("--consumer-epochs", "-1"),
      ("--lambda-sweep", "0"),
    ):
      with self.assertRaises(SystemExit, msg=flag):
        EXPERIMENT.parse([flag, value])

  def test_bad_transform_flags_exit_2_before_writing(self):
    out = Path(self.create_tempdir().full_path) / "run"
    for flags in (
      ["--transform", "affine", "--transform-rank", "100"],
      ["--transform-sweep", "linear,affine", "--transform-rank", "100"],
      ["--transform-sweep", "linear,mlp", "--lambda-sweep", "1,4"],
      ["--transform-sweep", "linear,mlp", "--methods", "finetune-m0,joint-notrans"],
      ["--transform-sweep", "linear,rotation"],
    ):
      with self.assertRaises(SystemExit, msg=flags) as exit_:
        cli.main(["--preset", "test", *flags, "--out", str(out), "--no-progress"])
      self.assertEqual(exit_.exception.code, 2, flags)
      self.assertFalse(out.exists(), flags)

  def test_consumer_overrides(self):
    _, _, cfg = EXPERIMENT.parse(
      [
        "--preset",
        "paper",
        "--consumer-hidden",
        "128,256",
        "--consumer-dropout",
        "0,0.5",
        "--consumer-seeds",
        "3",
        "--consumer-epochs",
        "50",
      ]
    )
    self.assertEqual(
      (cfg.consumer_hidden, cfg.consumer_dropout, cfg.consumer_seeds, cfg.consumer_epochs),
      ((128, 256), (0.0, 0.5), 3, 50),
    )
    self.assertEqual(cfg.epochs, PRESETS["paper"].epochs)

  def test_epochs_scale_the_schedule(self):
    _, _, cfg = EXPERIMENT.parse(["--preset", "paper", "--epochs", "100"])
    self.assertEqual((cfg.epochs, cfg.finetune_epochs, cfg.eval_every, cfg.select_after), (100, 50, 2, 10))

  def test_method_keys(self):
    self.assertEqual(len(METHODS), 9)
    self.assertTrue(set(KEEP_LATEST) <= set(METHODS))


if __name__ == "__main__":
  absltest.main()
