"""The README's Python example runs as written, and its two commands exist in the Makefile and CI."""

import contextlib
import io
import re
from pathlib import Path

from absl.testing import absltest

ROOT = Path(__file__).resolve().parents[1]


class ReadmeTest(absltest.TestCase):

  def test_python_examples_run(self):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    self.assertNotEmpty(blocks)
    out = io.StringIO()
    for block in blocks:
      with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})  # pylint: disable=exec-used
    self.assertIn("multi-step", out.getvalue())
    self.assertIn("de Morgan holds", out.getvalue())
    self.assertIn("SOGram-trained all-pairs penalty", out.getvalue())
    self.assertRegex(out.getvalue(), r"joint training: B_k\(z_new\) is [0-9]% of an old embedding's norm")

  def test_two_commands_are_make_targets_and_ci_runs_the_test_command(self):
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
      self.assertIn(f"make {target}", readme)
      self.assertRegex(makefile, rf"(?m)^{target}:")
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    self.assertEqual(ci[-1], "make test")


if __name__ == "__main__":
  absltest.main()
