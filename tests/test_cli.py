"""Tests of the ``bcjax`` console script (init, append, versions, transform)."""

import contextlib
import io
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import jax
import numpy as np
from absl.testing import absltest

from bcjax.alignment import affine_transform
from bcjax.cli import main
from bcjax.versioning import Registry
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]


def run(*argv: str) -> tuple[int, str, str]:
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = main(list(argv))
  return code, out.getvalue(), err.getvalue()


class CliTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = Path(self.create_tempdir().full_path)
    self.reg = str(self.tmp / "reg")
    rng = np.random.default_rng(0)
    self.w1, self.w2 = rng.normal(size=(3, 5)), rng.normal(size=(5, 4))
    np.save(self.tmp / "w1.npy", self.w1)
    np.save(self.tmp / "w2.npy", self.w2)
    self.z = rng.normal(size=(8, 4)).astype(np.float32)
    np.save(self.tmp / "z.npy", self.z)
    self.assertEqual(run("init", "--registry", self.reg, "--dim", "3", "--notes", "base")[0], 0)
    self.assertEqual(run("append", "--registry", self.reg, str(self.tmp / "w1.npy"))[0], 0)
    self.assertEqual(run("append", "--registry", self.reg, str(self.tmp / "w2.npy"), "--notes", "v2")[0], 0)

  def test_transform_writes_the_composed_embeddings(self):
    out = self.tmp / "z0.npy"
    code, stdout, _ = run("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "z.npy"), str(out))
    self.assertEqual(code, 0)
    self.assertIn("version 2 (D=4) -> version 0 (D=3)", stdout)
    got = np.load(out)
    assert_close(got, self.z.astype(np.float64) @ (self.w1 @ self.w2).T)
    self.assertEqual(got.dtype, np.float32)

  def test_transform_from_an_older_version(self):
    np.save(self.tmp / "z1.npy", self.z[:, :1] @ np.ones((1, 5)))
    out = self.tmp / "z1to0.npy"
    self.assertEqual(run("transform", "--registry", self.reg, "--to", "0", "--from", "1",
                         str(self.tmp / "z1.npy"), str(out))[0], 0)
    assert_close(np.load(out), np.load(self.tmp / "z1.npy") @ self.w1.T)

  def test_transform_never_overwrites_without_flag(self):
    out = self.tmp / "keep.npy"
    out.write_bytes(b"user data")
    code, _, err = run("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "z.npy"), str(out))
    self.assertEqual(code, 2)
    self.assertIn("refusing to overwrite", err)
    self.assertEqual(out.read_bytes(), b"user data")
    self.assertEqual(run("transform", "--registry", self.reg, "--to", "1", "--overwrite", str(self.tmp / "z.npy"),
                         str(out))[0], 0)
    self.assertEqual(np.load(out).shape, (8, 5))

  def test_versions_table_and_json(self):
    code, stdout, _ = run("versions", "--registry", self.reg)
    self.assertEqual(code, 0)
    self.assertEqual(len(stdout.strip().splitlines()), 4)
    self.assertIn("v2", stdout)
    code, stdout, _ = run("versions", "--registry", self.reg, "--json")
    listed = json.loads(stdout)
    self.assertEqual([(v["version"], v["dim"], v["prev_dim"]) for v in listed], [(0, 3, None), (1, 5, 3), (2, 4, 5)])

  def test_transform_applies_a_mixed_chain_and_versions_names_each_map(self):
    t = affine_transform(rank=2)
    p = {k: np.asarray(v, np.float64) + 0.5 for k, v in t.init(jax.random.key(0), 4, 6).items()}
    Registry(self.reg).append(p, transform=t, notes="adapter")
    z = np.random.default_rng(1).normal(size=(3, 6))
    np.save(self.tmp / "z3.npy", z)
    out = self.tmp / "z3to0.npy"
    self.assertEqual(run("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "z3.npy"), str(out))[0], 0)
    z2 = z @ p["v"] @ p["u"].T + p["b"]
    assert_close(np.load(out), z2 @ (self.w1 @ self.w2).T)
    code, stdout, _ = run("versions", "--registry", self.reg)
    self.assertEqual(code, 0)
    self.assertIn("affine(rank=2)", stdout.splitlines()[-1])
    self.assertIn("linear", stdout.splitlines()[2])

  def test_errors_exit_with_a_message(self):
    """Registry state errors exit 1; bad input files and arguments exit 2; neither writes anything."""
    z = str(self.tmp / "z.npy")
    np.save(self.tmp / "bad.npy", np.ones((2, 7)))
    cases = [
        (("transform", "--registry", self.reg, "--to", "9", z, str(self.tmp / "o1.npy")), "`to`=9", 1),
        (("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "bad.npy"), str(self.tmp / "o2.npy")),
         "D_2=4", 2),
        (("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "nope.npy"), str(self.tmp / "o3.npy")),
         "does not exist", 2),
        (("versions", "--registry", str(self.tmp / "nowhere")), "no bcjax registry", 1),
        (("append", "--registry", self.reg, str(self.tmp / "bad.npy")), "version 2 has dimension 4", 1),
        (("init", "--registry", self.reg, "--dim", "3"), "version 0 already exists", 1),
    ]
    for argv, fragment, expected in cases:
      code, _, err = run(*argv)
      self.assertEqual(code, expected, argv)
      self.assertIn(fragment, err)
    self.assertFalse(any(self.tmp.glob("o*.npy")))
    self.assertEqual(Registry(self.reg).latest, 2)

  def test_module_entry_point_runs_in_a_subprocess(self):
    proc = subprocess.run([sys.executable, "-m", "bcjax.cli", "versions", "--registry", self.reg], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertIn("base", proc.stdout)

  def test_console_script_is_declared(self):
    try:
      scripts = metadata.entry_points(group="console_scripts")
    except metadata.PackageNotFoundError:  # pragma: no cover
      scripts = []
    declared = [ep.value for ep in scripts if ep.name == "bcjax"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    self.assertIn('bcjax = "bcjax.cli:main"', pyproject)
    if declared:  # installed (as `make test` does): the installed script points at the same function
      self.assertEqual(declared, ["bcjax.cli:main"])


if __name__ == "__main__":
  absltest.main()
