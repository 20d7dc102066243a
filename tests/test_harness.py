"""The experiment harness: configs become validated flags; nothing is written before the flags and the data are
checked; stages make a run resumable after a SIGKILL; a failed stage leaves results.partial.json. Then every real
experiment and benchmark command line refuses each out-of-range flag with status 2 and no run directory."""

import contextlib
import dataclasses
import io
import json
import math
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from absl.testing import absltest, parameterized

from benchmarks import alignment_losses, gnn_step, gramian_vs_sampling
from experiments import common, harness
from experiments.bc_aligner.experiment import EXPERIMENT as BC_ALIGNER
from experiments.conceptors_sts.experiment import EXPERIMENT as CONCEPTORS_STS
from experiments.error_amplification.experiment import EXPERIMENT as ERROR_AMPLIFICATION
from experiments.gramian_estimation.experiment import EXPERIMENT as GRAMIAN_ESTIMATION
from experiments.gramian_training.experiment import EXPERIMENT as GRAMIAN_TRAINING
from experiments.icl.experiment import EXPERIMENT as ICL
from tests import _toy_experiment as toy

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = (
  BC_ALIGNER,
  CONCEPTORS_STS,
  ERROR_AMPLIFICATION,
  GRAMIAN_ESTIMATION,
  GRAMIAN_TRAINING,
  ICL,
  toy.EXPERIMENT,
)
BENCHMARKS = (
  (alignment_losses, alignment_losses.Config),
  (gnn_step, gnn_step.Config),
  (gramian_vs_sampling, gramian_vs_sampling.Config),
)


def quiet(fn, *args):
  """``fn(*args)``'s return value, or the SystemExit code, with stdout and stderr captured."""
  err = io.StringIO()
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try:
      return fn(*args), err.getvalue()
    except SystemExit as e:
      return e.code, err.getvalue()


def bad_values(field: dataclasses.Field) -> list[str]:
  """Flag values outside what the field declares: below/above its bounds, outside its choices, not a number."""
  meta = field.metadata["option"]
  kind, is_tuple, _ = harness._flags._element_type(field.type)
  values = []
  if meta["choices"] is not None:
    values.append("bogus")
  if kind in (int, float) and kind is not bool:
    values.append("x")
    if meta["low"] is not None:
      low = meta["low"]
      values.append(str(kind(low)) if meta["low_open"] else str(kind(low - 1) if kind is int else low - 0.5))
    if meta["high"] is not None:
      high = meta["high"]
      values.append(str(kind(high)) if meta["high_open"] else str(kind(high + 1) if kind is int else high + 0.5))
    if kind is float:
      values.append("nan")
  if is_tuple:
    if meta["nonempty"]:
      values.append(",")
    values = [v if v == "," else f"{_valid_element(field)},{v}" for v in values]
  return values


def _valid_element(field) -> str:
  meta = field.metadata["option"]
  if meta["choices"] is not None:
    return str(meta["choices"][0])
  low = meta["low"]
  kind, _, _ = harness._flags._element_type(field.type)
  value = 1 if low is None else (low + 0.5 if meta["low_open"] else low)
  return str(kind(math.ceil(value) if kind is int else value))


def flag_cases():
  for experiment in EXPERIMENTS:
    for field in dataclasses.fields(experiment.config):
      if "option" in field.metadata:
        for value in bad_values(field):
          yield experiment, harness.flag_name(field), value


class MarkdownTableTest(absltest.TestCase):
  def test_formats_floats_and_keeps_other_cells(self):
    self.assertEqual(
      common.markdown_table(["a", "b"], [[0.5, "x"], [2, None]], floatfmt=".2f"),
      "| a | b |\n|---|---|\n| 0.50 | x |\n| 2 | None |\n",
    )

  def test_a_row_that_does_not_fit_the_header_is_refused(self):
    # A cell without a header column would be dropped by markdown renderers: a silently wrong table.
    with self.assertRaisesRegex(ValueError, r"`rows\[1\]` has 3 cells but the header has 2"):
      common.markdown_table(["a", "b"], [[1, 2], [1, 2, 3]])


class ConfigFlagTest(parameterized.TestCase):
  def test_every_option_becomes_a_flag_and_applies(self):
    _, args, cfg = toy.EXPERIMENT.parse(
      ["--steps", "5", "--rate", "1", "--kinds", "c, a", "--widths", "3,4", "--size", "7", "--loud", "--seed", "2"]
    )
    self.assertEqual(cfg, toy.Config(steps=5, rate=1.0, kinds=("c", "a"), widths=(3, 4), size=7, loud=True, seed=2))
    _, _, cfg = toy.EXPERIMENT.parse(["--preset", "test", "--no-loud", "--size", "none"])
    self.assertEqual(cfg, toy.Config(steps=2))  # the preset's value unless a flag is given
    self.assertIsNone(args.resume)

  @parameterized.parameters(
    ("--steps", "0", ">= 1"),
    ("--rate", "0", "> 0 and <= 1"),
    ("--rate", "1.5", "<= 1"),
    ("--rate", "nan", "must be a number"),
    ("--kinds", "a,z", "one of a, b, c"),
    ("--kinds", ",", "at least one"),
    ("--widths", "2,0", ">= 1"),
    ("--steps", "2.5", "must be a int"),
    ("--size", "0", ">= 1"),
  )
  def test_a_bad_value_exits_2_naming_the_flag_and_its_range(self, flag, value, allowed):
    code, err = quiet(toy.EXPERIMENT.parse, [flag, value])
    self.assertEqual(code, 2)
    self.assertIn(flag, err)
    self.assertIn(allowed, err)

  def test_boundaries_are_as_declared(self):
    self.assertEqual(toy.EXPERIMENT.parse(["--rate", "1.0", "--steps", "1", "--widths", ""])[2].rate, 1.0)
    self.assertEqual(quiet(toy.EXPERIMENT.parse, ["--rate", "1e-300"])[0].__class__, tuple)


class LifecycleTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self.tmp = Path(self.create_tempdir().full_path)

  def run_toy(self, *argv, out=None):
    return quiet(toy.main, ["--no-progress", *argv, *(["--out", str(out)] if out else [])])

  def subprocess(self, out, fault, *argv):
    env = dict(os.environ, BCJAX_FAULT=fault)
    return subprocess.run(
      [sys.executable, "-m", "tests._toy_experiment", "--out", str(out), "--no-progress", *argv],
      cwd=ROOT,
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
    )

  def test_nothing_is_written_before_flags_and_data_are_checked(self):
    for argv in (["--steps", "-5"], ["--bad-data"], ["--kinds", "q"]):
      out = self.tmp / "x"
      code, err = self.run_toy(*argv, out=out)
      self.assertEqual(code, 2, err)
      self.assertFalse(out.exists(), argv)
    self.assertIn("toy data is damaged", self.run_toy("--bad-data", out=self.tmp / "y")[1])

  def test_a_finished_run_is_never_overwritten(self):
    out = self.tmp / "done"
    self.assertEqual(self.run_toy(out=out)[0], 0)
    before = (out / "results.json").read_bytes()
    self.assertEqual(self.run_toy(out=out)[0], 2)
    self.assertEqual(quiet(toy.main, ["--resume", str(out)])[0], 2)  # finished: nothing to resume
    self.assertEqual((out / "results.json").read_bytes(), before)

  def test_resume_of_a_folder_without_an_unfinished_run_is_one_line(self):
    # the bc_aligner and icl runs printed 27-30 lines of usage before the error: the flags were right, the
    # folder was not
    done = self.tmp / "finished"
    self.assertEqual(self.run_toy(out=done)[0], 0)
    empty = self.tmp / "empty"
    empty.mkdir()
    for folder, why in (
      (self.tmp / "nowhere", "no such folder"),
      (empty, "no run there (missing config.json)"),
      (done, "that run has finished (results.json exists)"),
    ):
      code, err = quiet(toy.main, ["--resume", str(folder)])
      self.assertEqual((code, err), (2, f"error: --resume {folder}: {why}\n"))
    (empty / "config.json").write_text("{")
    code, err = quiet(toy.main, ["--resume", str(empty)])
    self.assertEqual((code, len(err.splitlines())), (2, 1), err)
    self.assertTrue(err.startswith(f"error: --resume {empty}: config.json is not a run's"), err)

  @pytest.mark.heavy
  def test_sigkill_in_a_late_stage_then_resume_equals_an_uninterrupted_run(self):
    whole = self.tmp / "whole"
    self.assertEqual(self.run_toy("--steps", "4", out=whole)[0], 0)
    killed = self.tmp / "killed"
    proc = self.subprocess(killed, "kill:b/2", "--steps", "4")
    self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr)
    self.assertFalse((killed / "results.json").exists())
    self.assertEqual(sorted(p.name for p in (killed / "stages" / "b").iterdir()), ["0.pkl", "1.pkl", "2.pkl"])
    code, err = quiet(toy.main, ["--resume", str(killed), "--no-progress"])
    self.assertEqual(code, 0, err)
    self.assertEqual(
      json.loads((killed / "results.json").read_text()), json.loads((whole / "results.json").read_text())
    )
    events = [json.loads(line) for line in (killed / "metrics.jsonl").read_text().splitlines()]
    finished = [e for e in events if e.get("event") == "finished"][-1]
    self.assertEqual(finished["stages_computed"], ["b/3", "total"])  # only what the kill lost
    self.assertIn("a/0", finished["stages_read_back"])
    self.assertTrue(any(e.get("event") == "resumed" for e in events))

  def test_a_failure_that_resume_would_repeat_does_not_advise_resume(self):
    """An argument error inside a stage comes from the stored flags and data that --resume reuses."""
    out = self.tmp / "invalid"
    code, err = quiet(toy.main, ["--invalid-in", "b/0", "--out", str(out), "--no-progress"])
    self.assertEqual(code, 1, err)
    self.assertIn("toy: `step` 0 is refused", err)
    self.assertIn("would fail the same way: start a new run with other flags", err)
    self.assertNotIn("--resume", err)
    partial = json.loads((out / "results.partial.json").read_text())
    self.assertIsNone(partial["resume"])
    self.assertEqual(partial["finished_stages"], ["a/0", "a/1", "a/2"])
    diverged = self.tmp / "diverged"
    code, err = quiet(toy.main, ["--diverge-in", "a/1", "--out", str(diverged), "--no-progress"])
    self.assertEqual(code, 1, err)
    self.assertIn("FloatingPointError: toy: non-finite loss at step 1", err)
    self.assertNotIn("--resume", err)

  @pytest.mark.heavy
  def test_a_failed_stage_leaves_partial_results_and_can_be_resumed(self):
    out = self.tmp / "failed"
    proc = self.subprocess(out, "fail:b/1")
    self.assertEqual(proc.returncode, 1, proc.stderr)
    self.assertIn("stage 'b/1' failed", proc.stderr)
    self.assertIn("--resume", proc.stderr)
    partial = json.loads((out / "results.partial.json").read_text())
    self.assertEqual(partial["failed_stage"], "b/1")
    self.assertEqual(partial["finished_stages"], ["a/0", "a/1", "a/2", "b/0"])
    self.assertIn("fault injected", partial["error"])
    self.assertFalse((out / "results.json").exists())
    self.assertEqual(quiet(toy.main, ["--resume", str(out), "--no-progress"])[0], 0)
    self.assertTrue((out / "results.json").is_file())
    self.assertFalse((out / "results.partial.json").exists())  # a finished run no longer claims a failed stage

  @pytest.mark.heavy
  def test_resume_takes_the_run_s_own_flags_only(self):
    out = self.tmp / "run"
    proc = self.subprocess(out, "kill:a/0", "--steps", "2")
    self.assertEqual(proc.returncode, -signal.SIGKILL)
    code, err = quiet(toy.main, ["--resume", str(out), "--steps", "3"])
    self.assertEqual(code, 2)
    self.assertIn("takes no other flag", err)
    self.assertEqual(quiet(toy.main, ["--resume", str(self.tmp / "nowhere")])[0], 2)
    self.assertEqual(quiet(toy.main, ["--resume", str(out), "--no-progress"])[0], 0)
    results = json.loads((out / "results.json").read_text())
    self.assertEqual(sorted(results["sums"]), ["a/0", "a/1", "b/0", "b/1"])  # --steps 2 from the stored flags

  def test_stored_command_line_has_absolute_paths_so_resume_works_from_anywhere(self):
    absolute = harness._launch._absolute_paths
    stored = absolute(["--data-dir", "d", "--out=o", "--steps", "2", "--data-dir"], ("--data-dir", "--out"))
    self.assertEqual(
      stored, ["--data-dir", os.path.abspath("d"), f"--out={os.path.abspath('o')}", "--steps", "2", "--data-dir"]
    )
    out = self.tmp / "abs"
    self.assertEqual(self.run_toy(out=out)[0], 0)
    argv = json.loads((out / "config.json").read_text())["argv"]
    self.assertEqual(argv[argv.index("--out") + 1], str(out.resolve()))

  def test_config_records_where_the_run_came_from(self):
    import jax

    import bcjax
    from experiments.provenance import git_state

    out = self.tmp / "prov"
    self.assertEqual(self.run_toy(out=out)[0], 0)
    p = json.loads((out / "config.json").read_text())["provenance"]
    self.assertEqual(p["git"], git_state())  # this checkout's commit (None outside one)
    self.assertEqual(p["bcjax_version"], bcjax.__version__)
    self.assertEqual(p["devices"]["platform"], jax.devices()[0].platform)
    self.assertGreaterEqual(p["cpu"]["cores"], 1)
    self.assertEqual(git_state(self.tmp), {"commit": None, "dirty": None})  # not a checkout: said so

  def test_published_folders_are_complete_or_absent(self):
    out = self.tmp / "pub"
    out.mkdir()
    run = harness.Run(out, resumed=False, progress=False)
    scratch = out / "reg" / ".a.partial"
    scratch.mkdir(parents=True)
    (scratch / "junk").write_text("left by a killed run")

    def build(path):
      path.mkdir(parents=True)
      (path / "v0").write_text("complete")

    final = run.publish_dir("reg/a", build)
    self.assertEqual(sorted(p.name for p in final.iterdir()), ["v0"])
    self.assertFalse(scratch.exists())
    self.assertEqual(run.publish_dir("reg/a", lambda path: self.fail("rebuilt a published folder")), final)
    with self.assertRaisesRegex(ValueError, "stage name"):
      run.stage("../escape", lambda: 1)
    run.close()

  def test_a_checkpointed_stage_is_an_orbax_folder_read_back_through_its_restore(self):
    out = self.tmp / "ckpt"
    out.mkdir()
    value = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "layers": (np.ones(2, np.int32),), "error": 0.125}
    # save keeps what is stored; restore rebuilds the tuple that orbax reads back as a list, as a config would
    checkpoint = harness.Checkpoint(
      lambda v: dict(v, layers=list(v["layers"])), lambda tree: dict(tree, layers=tuple(tree["layers"]))
    )
    run = harness.Run(out, resumed=False, progress=False)
    first = run.stage("fit/B1", lambda: value, checkpoint)
    self.assertTrue((out / "stages" / "fit" / "B1.orbax").is_dir())
    self.assertFalse((out / "stages" / "fit" / "B1.pkl").exists())
    self.assertEqual(run.finished_stages(), ["fit/B1"])
    run.close()
    # a killed save leaves orbax's temporary folder; a resumed run discards it and writes the stage again
    leftover = out / "stages" / "fit" / "B2.orbax.orbax-checkpoint-tmp-1"
    (leftover / "d").mkdir(parents=True)
    # a stage that an earlier version of the experiment pickled is read back as it was written
    (out / "stages" / "fit" / "B0.pkl").write_bytes(pickle.dumps({"w": np.zeros(1)}))
    resumed = harness.Run(out, resumed=True, progress=False)
    again = resumed.stage("fit/B1", lambda: self.fail("recomputed a checkpointed stage"), checkpoint)
    for got in (first, again):
      self.assertIsInstance(got["layers"], tuple)
      np.testing.assert_array_equal(got["w"], value["w"])
      self.assertEqual(got["w"].dtype, np.float32)
      np.testing.assert_array_equal(got["layers"][0], value["layers"][0])
      self.assertEqual(got["error"], 0.125)
    old = resumed.stage("fit/B0", lambda: self.fail("recomputed a pickled stage"), checkpoint)
    np.testing.assert_array_equal(old["w"], np.zeros(1))
    resumed.stage("fit/B2", lambda: value, checkpoint)
    self.assertFalse(leftover.exists())
    self.assertEqual(resumed.finished_stages(), ["fit/B0", "fit/B1", "fit/B2"])
    self.assertEqual(resumed.loaded, ["fit/B1", "fit/B0"])
    resumed.close()

  def test_a_method_module_drives_its_stage_through_stored_computing_and_store(self):
    """The harness never runs a method module's code: the module asks ``stored``, computes inside ``computing`` and
    hands the value to ``store``, which returns what a resumed run reads back."""
    out = self.tmp / "drive"
    out.mkdir()
    run = harness.Run(out, resumed=False, progress=False)
    self.assertIs(run.stored("m0"), harness.MISSING)
    failed = r"stage 'm0' failed: ZeroDivisionError.*raised at test_harness"
    with self.assertRaisesRegex(harness.StageFailed, failed), run.computing("m0"):
      _ = 1 / 0
    self.assertIs(run.stored("m0"), harness.MISSING)  # a failed computation stores nothing
    with run.computing("m0"):
      value = {"z": np.arange(3.0), "none": None}
    stored = run.store("m0", value)
    self.assertIsNot(stored, value)  # the copy a resumed run would read, not the caller's object
    np.testing.assert_array_equal(stored["z"], value["z"])
    self.assertIs(run.stored("m0"), stored)
    self.assertIsNone(run.store("nothing", None))  # a stage may hold None: MISSING is not None
    self.assertIsNone(run.stored("nothing"))
    run.close()
    resumed = harness.Run(out, resumed=True, progress=False)
    np.testing.assert_array_equal(resumed.stored("m0")["z"], value["z"])
    self.assertEqual(resumed.loaded, ["m0"])
    with self.assertRaisesRegex(ValueError, "stage name"):
      resumed.stored("a//b")
    resumed.close()

  def test_a_process_that_writes_nothing_continues_with_what_orbax_reads_back(self):
    """Processes 1.. of a multi-process run checkpoint nothing; they must continue with the values process 0 reads
    back from its checkpoint, or the processes' programs would differ."""
    rng = np.random.default_rng(0)
    tree = {
      "params": {"layers": {0: {"kernel": rng.normal(size=(3, 2)).astype(np.float32)}, 1: {"bias": np.zeros(2)}}},
      "history": (rng.normal(size=4), np.arange(3, dtype=np.int32)),
      "recall": {"recall@10": 0.1 + 0.2, "recall@50": 1 / 3},
      "epoch": 7,
    }
    path = self.tmp / "tree.orbax"
    harness._stages._write_checkpoint(path, tree)
    read, emulated = harness._stages._read_checkpoint(path), harness.as_read_back(tree)
    self.assertEqual(jax.tree.structure(read), jax.tree.structure(emulated))
    for a, b in zip(jax.tree.leaves(read), jax.tree.leaves(emulated)):
      self.assertIs(type(a), type(b))
      self.assertEqual(np.asarray(a).dtype, np.asarray(b).dtype)
      np.testing.assert_array_equal(a, b)

  @pytest.mark.heavy
  def test_compiled_programs_go_to_the_download_cache_unless_a_folder_is_set(self):
    code = (
      "import sys, jax; from bcjax._compile_cache import use_compilation_cache; "
      "use_compilation_cache(sys.argv[1] == 'on'); c = jax.config; "
      "print(c.jax_enable_compilation_cache, c.jax_compilation_cache_dir, "
      "c.jax_persistent_cache_min_compile_time_secs, c.jax_persistent_cache_min_entry_size_bytes)"
    )
    clean = _without_cache_settings(os.environ)
    for given, switch, want in (
      (None, "on", f"True {self.tmp / 'data' / 'xla'} 0.0 0"),  # every program kept, however quick to compile
      (str(self.tmp / "mine"), "on", f"True {self.tmp / 'mine'} 0.0 0"),
      (None, "off", "False None 1.0 0"),  # --no-compile-cache
    ):
      env = {**clean, "BCJAX_DATA": str(self.tmp / "data")}
      env.update({} if given is None else {"JAX_COMPILATION_CACHE_DIR": given})
      out = subprocess.run(
        [sys.executable, "-c", code, switch],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
      )
      self.assertEqual(out.stdout.strip(), want)

  @pytest.mark.heavy
  def test_a_second_command_reads_its_programs_back(self):
    # bcjax fit twice in fresh processes: the second builds its programs from the cache the first one filled, and
    # --no-compile-cache neither reads nor writes it
    rng = np.random.default_rng(0)
    old = rng.normal(size=(120, 6)).astype(np.float32)
    np.save(self.tmp / "old.npy", old)
    np.save(self.tmp / "new.npy", (old @ rng.normal(size=(6, 6))).astype(np.float32))
    code = (
      "import sys, jax; hits = []; "
      "jax.monitoring.register_event_listener(lambda e, **k: hits.append(e) if e.endswith('cache_hits') else None); "
      "from bcjax import cli; sys.argv = sys.argv[1:]; "
      "assert cli.main(sys.argv) in (0, 3, 4, 5); print('HITS', len(hits))"  # a verdict, whichever
    )
    env = {**_without_cache_settings(os.environ), "BCJAX_DATA": str(self.tmp / "data")}
    hits = []
    for i, extra in enumerate(([], [], ["--no-compile-cache"])):
      argv = [*extra, "fit", "--old", str(self.tmp / "old.npy"), "--new", str(self.tmp / "new.npy")]
      argv += ["--kind", "linear", "--out", str(self.tmp / f"map{i}.bcmap")]
      out = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
      )
      self.assertEqual(out.returncode, 0, out.stderr[-2000:])
      hits.append(int(out.stdout.split("HITS")[-1]))
    self.assertEqual(hits[0], 0)
    self.assertGreater(hits[1], 0)
    self.assertEqual(hits[2], 0)
    self.assertTrue(any((self.tmp / "data" / "xla").iterdir()))


def _without_cache_settings(environ) -> dict:
  """``environ`` less the variables that set JAX's persistent cache (the suite's own cache folder among them), so a
  child process shows the defaults bcjax picks."""
  return {k: v for k, v in environ.items() if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}


class EveryCommandLineTest(parameterized.TestCase):
  """Each validated flag of each experiment, given a value outside its declared range, exits 2 before anything is
  written."""

  @parameterized.parameters(*flag_cases())
  def test_out_of_range_value_exits_2_and_creates_nothing(self, experiment, flag, value):
    out = Path(self.create_tempdir().full_path) / "run"
    code, err = quiet(harness.main, experiment, [flag, value, "--out", str(out), "--no-progress"])
    self.assertEqual(code, 2, f"{experiment.name} {flag} {value!r}: {err}")
    self.assertIn(flag, err)
    self.assertFalse(out.exists())

  @parameterized.parameters(
    (BC_ALIGNER, ["--lambda", "-5"]),
    (GRAMIAN_TRAINING, ["--steps", "-5"]),
    (GRAMIAN_TRAINING, ["--alpha", "0"]),
    (GRAMIAN_TRAINING, ["--alpha", "2.0"]),
    (CONCEPTORS_STS, ["--alpha", "0"]),
    (ERROR_AMPLIFICATION, ["--steps", "0"]),
    (ICL, ["--alpha", "1.5"]),
    (ICL, ["--methods", "icl,bogus"]),
    (BC_ALIGNER, ["--dataset", "imagenet"]),
    (GRAMIAN_ESTIMATION, ["--dataset", "movielens-99k"]),
  )
  def test_the_reported_bugs(self, experiment, argv):
    out = Path(self.create_tempdir().full_path) / "run"
    self.assertEqual(quiet(harness.main, experiment, [*argv, "--out", str(out)])[0], 2)
    self.assertFalse(out.exists())

  def test_a_missing_input_path_is_named_the_same_way_by_every_experiment(self):
    tmp = Path(self.create_tempdir().full_path)
    checked = 0
    for experiment in EXPERIMENTS:
      for flag in ("--data-dir", *experiment.path_flags):
        if flag not in experiment.parser().format_help():
          continue
        code, err = quiet(harness.main, experiment, [flag, str(tmp / "nowhere"), "--out", str(tmp / "run")])
        self.assertEqual(code, 2, (experiment.name, flag))
        self.assertIn(f"{flag} {tmp / 'nowhere'} does not exist", err, (experiment.name, flag))
        self.assertEqual(err.strip(), f"error: {flag} {tmp / 'nowhere'} does not exist")  # one line, no usage text
        self.assertFalse((tmp / "run").exists())
        checked += 1
    self.assertGreaterEqual(checked, 9)  # five experiments' --data-dir, --reviews/--meta, the conceptors' three

  def test_every_experiment_has_help_presets_and_resume(self):
    for experiment in EXPERIMENTS:
      text = experiment.parser().format_help()
      for flag in ("--preset", "--out", "--resume", "--no-progress"):
        self.assertIn(flag, text, experiment.name)
      if experiment is not toy.EXPERIMENT:
        self.assertTrue({"quick", "paper", "test"} <= set(experiment.presets), experiment.name)

  @parameterized.parameters(*BENCHMARKS)
  def test_benchmarks_refuse_bad_flags_and_existing_reports_before_any_work(self, module, config):
    tmp = Path(self.create_tempdir().full_path)
    for field in dataclasses.fields(config):
      for value in bad_values(field) if "option" in field.metadata else ():
        code, err = quiet(module.main, ["--out", str(tmp / "r.json"), harness.flag_name(field), value])
        self.assertEqual(code, 2, f"{field.name}={value}: {err}")
    (tmp / "r.json").write_text("{}")
    self.assertEqual(quiet(module.main, ["--out", str(tmp / "r.json"), "--quick"])[0], 2)
    self.assertEqual((tmp / "r.json").read_text(), "{}")


if __name__ == "__main__":
  absltest.main()
