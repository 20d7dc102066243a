"""Kill-and-resume checks shared by the experiments' tests."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parents[1]


def run_until_killed(command: list[str], stage: str) -> subprocess.CompletedProcess:
  """Runs ``command`` in a subprocess that SIGKILLs itself at ``stage`` (``BCJAX_FAULT``); checks that it was killed.

  The subprocess computes in this process's precision, so what it wrote compares with an in-process run.
  """
  env = dict(os.environ, BCJAX_FAULT=f"kill:{stage}", JAX_ENABLE_X64=str(jax.config.jax_enable_x64))
  proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-3000:])
  return proc


def kill_then_resume(module: str, main, argv: list[str], stage: str, out: Path) -> dict:
  """Runs ``python -m module argv`` in a subprocess that SIGKILLs itself right after ``stage`` is saved, checks what
  the kill left, resumes the run in this process with ``--resume`` and returns its results.json."""
  run_until_killed([sys.executable, "-m", module, *argv, "--out", str(out), "--no-progress"], stage)
  assert not (out / "results.json").exists(), "a killed run must not have results"
  saved = [p for p in (out / "stages").glob(f"{stage}.*") if p.suffix in (".pkl", ".orbax")]
  assert saved, f"stage {stage} was not saved before the kill"
  code = main(["--resume", str(out), "--no-progress"])
  assert code == 0, code
  return json.loads((out / "results.json").read_text())


def without_timings(tree):
  """``tree`` without wall-clock fields (seconds, times), which differ between any two runs."""
  if isinstance(tree, dict):
    return {
      k: without_timings(v) for k, v in tree.items() if "seconds" not in k and k != "time" and not k.startswith("time_")
    }
  if isinstance(tree, list):
    return [without_timings(v) for v in tree]
  return tree


def assert_same_results(testcase, resumed: dict, uninterrupted: dict) -> None:
  """The same keys and values, floats to the network-level float tolerance (timings left out)."""
  from tests._tolerance import assert_close

  def walk(a, b, where):
    if isinstance(b, dict):
      testcase.assertEqual(sorted(a), sorted(b), where)
      for k in b:
        walk(a[k], b[k], f"{where}/{k}")
    elif isinstance(b, list):
      testcase.assertLen(a, len(b), where)
      for i, (x, y) in enumerate(zip(a, b)):
        walk(x, y, f"{where}[{i}]")
    elif isinstance(b, float) and not isinstance(a, bool):
      assert_close(a, b, "network", scale=max(abs(b), 1e-12), err_msg=where)
    else:
      testcase.assertEqual(a, b, where)

  walk(without_timings(resumed), without_timings(uninterrupted), "results")
