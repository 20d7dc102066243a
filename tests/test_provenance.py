"""Where a run came from: package versions, data-file hashes against hashlib, the load beside the run measured
against a busy process, the runs that overlapped it, and the archive that keeps only runs of committed code."""

import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from experiments import provenance
from experiments.reproduction import archive


class DataFilesTest(unittest.TestCase):
  def test_every_file_of_a_folder_with_its_sha256(self):
    with tempfile.TemporaryDirectory() as d:
      root = Path(d) / "PROTEINS"
      (root / "sub").mkdir(parents=True)
      (root / "a.txt").write_bytes(b"1 2\n3 4\n")
      (root / "sub" / "b.txt").write_bytes(b"x" * 5000)
      (single,) = provenance.data_files([root])
      self.assertEqual(single["input"], "PROTEINS")
      self.assertIsNone(single["package"])
      self.assertEqual([f["path"] for f in single["files"]], ["a.txt", "sub/b.txt"])
      self.assertEqual(single["files"][0]["sha256"], hashlib.sha256(b"1 2\n3 4\n").hexdigest())
      self.assertEqual(single["files"][1]["bytes"], 5000)
      (one,) = provenance.data_files([root / "a.txt"])
      self.assertEqual(one["files"], [{"path": ".", "bytes": 8, "sha256": hashlib.sha256(b"1 2\n3 4\n").hexdigest()}])

  def test_a_file_inside_an_installed_package_names_it(self):
    import numpy

    (entry,) = provenance.data_files([Path(numpy.__file__).parent / "version.py"])
    self.assertEqual(entry["package"], f"numpy=={numpy.__version__}")

  def test_package_versions_name_what_is_installed_only(self):
    versions = provenance.package_versions(("numpy", "no-such-package-bcjax"))
    import numpy

    self.assertEqual(versions, {"numpy": numpy.__version__})


class LoadMonitorTest(unittest.TestCase):
  def test_the_share_of_other_processes(self):
    # two cores for 10 s: the machine busy 14 CPU-seconds, 4 of them this process's -> others kept half the cores
    self.assertEqual(provenance.other_cpu_share(14.0, 4.0, 10.0, 2), 0.5)
    self.assertEqual(provenance.other_cpu_share(4.0, 4.0, 10.0, 2), 0.0)  # only this process: an idle neighbourhood
    self.assertEqual(provenance.other_cpu_share(3.9, 4.0, 10.0, 2), 0.0)  # jiffy rounding never goes negative
    self.assertEqual(provenance.other_cpu_share(40.0, 0.0, 10.0, 2), 1.0)
    self.assertIsNone(provenance.other_cpu_share(1.0, 0.0, 0.0, 2))

  @unittest.skipUnless(Path("/proc/stat").is_file(), "the load monitor reads /proc/stat")
  def test_this_processs_own_work_is_counted_as_its_own(self):
    monitor = provenance.LoadMonitor()
    t0 = os.times()
    while (lambda t: t.user + t.system - t0.user - t0.system)(os.times()) < 0.3:
      pass
    s = monitor.summary()
    self.assertGreaterEqual(s["own_cpu_seconds"], 0.3)
    self.assertGreaterEqual(s["wall_seconds"], 0.0)
    self.assertTrue(0.0 <= s["other_cpu_share"] <= 1.0)
    self.assertEqual(len(s["load_at_start"]), 3)


class ActivityTest(unittest.TestCase):
  def test_overlapping_runs_name_each_other_and_finished_ones_do_not(self):
    with tempfile.TemporaryDirectory() as d:
      log = Path(d) / "runs.jsonl"
      earlier = provenance.Activity("runs/earlier", log)
      earlier.finish()
      time.sleep(0.01)
      first = provenance.Activity("runs/first", log)
      second = provenance.Activity("runs/second", log)
      self.assertEqual([r["out"] for r in first.overlapping()], ["runs/second"])
      ended = second.finish()
      self.assertEqual([r["out"] for r in ended], ["runs/first"])
      self.assertIsNone(ended[0]["ended"])
      overlapped = first.finish()  # second ran during first and has ended: still named
      self.assertEqual([r["out"] for r in overlapped], ["runs/second"])
      self.assertIsNotNone(overlapped[0]["ended"])
      later = provenance.Activity("runs/later", log)
      self.assertEqual(later.overlapping(), [])

  def test_a_killed_run_without_an_end_line_is_not_running(self):
    with tempfile.TemporaryDirectory() as d:
      log = Path(d) / "runs.jsonl"
      dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
      pid = int(dead.stdout)
      log.write_text(json.dumps({"event": "start", "token": "x", "pid": pid, "out": "killed", "time": 1.0}) + "\n")
      self.assertEqual(provenance.Activity("runs/now", log).overlapping(), [])


def _run(folder: Path, dirty, commit="a" * 40) -> Path:
  folder.mkdir(parents=True)
  config = {
    "experiment": "bc_aligner",
    "argv": [],
    "config": {"seed": 1},
    "provenance": {"git": {"commit": commit, "dirty": dirty}},
  }
  (folder / "config.json").write_text(json.dumps(config))
  (folder / "results.json").write_text(json.dumps({"x": 1.5}))
  (folder / "metrics.jsonl").write_text('{"event": "finished"}\n')
  return folder


class ArchiveTest(unittest.TestCase):
  def test_a_clean_run_is_archived_gzipped_and_reads_back_the_same(self):
    with tempfile.TemporaryDirectory() as d:
      run = _run(Path(d) / "bc-quick-s1", dirty=False)
      target = archive.archive_run(run, Path(d) / "archive" / "bc-quick")
      self.assertEqual(
        sorted(p.name for p in target.iterdir()), ["config.json.gz", "metrics.jsonl.gz", "results.json.gz"]
      )
      back, orig = archive.read_run(target), archive.read_run(run)
      self.assertEqual(back, orig)
      self.assertEqual(back.metrics, [{"event": "finished"}])
      first = (target / "results.json.gz").read_bytes()
      archive.archive_run(run, Path(d) / "archive" / "bc-quick")  # deterministic bytes: no time in the header
      self.assertEqual((target / "results.json.gz").read_bytes(), first)
      self.assertEqual(json.loads(gzip.decompress(first)), {"x": 1.5})
      self.assertEqual(archive.archived_groups(Path(d) / "archive"), {"bc-quick": [target]})

  def test_local_changes_or_no_commit_are_refused(self):
    with tempfile.TemporaryDirectory() as d:
      for name, dirty, commit, words in (
        ("dirty", True, "b" * 40, "bbbbbbb with local changes"),
        ("nocommit", None, None, "no git commit"),
      ):
        run = _run(Path(d) / name, dirty, commit)
        with self.assertRaisesRegex(ValueError, words):
          archive.archive_run(run, Path(d) / "archive")
      self.assertFalse((Path(d) / "archive").exists())

  def test_an_unfinished_run_is_not_read(self):
    with tempfile.TemporaryDirectory() as d:
      run = _run(Path(d) / "r", dirty=False)
      (run / "results.json").unlink()
      self.assertFalse(archive.is_run(run))
      with self.assertRaisesRegex(FileNotFoundError, "results.json"):
        archive.read_run(run)
