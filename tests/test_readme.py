"""The README's examples run as written, in float32 (the precision users get), and print what the README shows
under each; its two commands exist in the Makefile and CI runs the test command."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from absl.testing import absltest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150


def examples(text: str) -> list[tuple[str, str]]:
  """(code, printed) pairs: every ```python block and the ```text block that follows it."""
  return re.findall(r"```python\n(.*?)```\s*\n```text\n(.*?)```", text, flags=re.S)


def run_float32(code: str) -> subprocess.CompletedProcess:
  """Runs ``code`` in a fresh interpreter with JAX's defaults (float32), not the suite's float64."""
  env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
  env.update(JAX_PLATFORMS="cpu", JAX_ENABLE_X64="0", PYTHONPATH=str(ROOT))
  return subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False
  )


class ReadmeTest(absltest.TestCase):
  def test_every_python_block_shows_its_output(self):
    text = README.read_text(encoding="utf-8")
    self.assertLen(examples(text), text.count("```python"), "every ```python block is followed by a ```text block")
    self.assertGreaterEqual(len(examples(text)), 4)

  @pytest.mark.heavy
  def test_examples_print_what_the_readme_shows_in_float32(self):
    for code, printed in examples(README.read_text(encoding="utf-8")):
      with self.subTest(first_line=printed.splitlines()[0]):
        run = run_float32(code)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        self.assertEqual(run.stdout, printed)

  def test_the_float32_run_is_float32(self):
    run = run_float32("import jax.numpy as jnp; print(jnp.ones(1).dtype)")
    self.assertEqual(run.stdout.strip(), "float32", run.stderr[-2000:])

  def test_front_page_is_short_and_starts_with_install_and_code(self):
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    self.assertLessEqual(len(lines), MAX_LINES)
    self.assertRegex(text, r"(?m)^pip install ")
    self.assertLess(lines.index("```sh"), 40, "code on the first screen")

  def test_two_commands_are_make_targets_and_ci_runs_the_test_command(self):
    readme = README.read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test", "test-fast", "docs", "lint"):
      self.assertIn(f"make {target}", readme)
      self.assertRegex(makefile, rf"(?m)^{target}:")
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    self.assertEqual(ci[-1], "make test")

  def test_links_resolve(self):
    for target in re.findall(r"\]\(([^)#]+)\)", README.read_text(encoding="utf-8")):
      if "://" not in target:
        self.assertTrue((ROOT / target).exists(), target)


if __name__ == "__main__":
  absltest.main()
