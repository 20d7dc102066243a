"""The install tiers: every library bcjax imports is declared (in the core or in an extra) and every declared one is
imported; the core runs the README's examples, the upgrade tool and its command with every other library blocked,
and each support-tier name then raises an ImportError naming its extra (.ci/core_check.py, which `make test-core`
also runs in a fresh environment holding the core install alone)."""

import ast
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from absl.testing import absltest

import bcjax
from bcjax import _extras

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
  spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _canonical(distribution: str) -> str:
  return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirement_name(requirement: str) -> str:
  return _canonical(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))


def imported_modules() -> dict[str, set[str]]:
  """Each top-level third-party module bcjax/ imports (statements anywhere, and the names given to
  ``importlib.import_module`` / ``_extras.require``), with the files that import it."""
  found: dict[str, set[str]] = {}
  for path in (ROOT / "bcjax").rglob("*.py"):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      names = []
      if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [node.module]
      elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = getattr(node.func, "attr", getattr(node.func, "id", None))
        if func in ("import_module", "require") and isinstance(node.args[0].value, str):
          names = [node.args[0].value]
      for name in names:
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and top != "bcjax":
          found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
  return found


class DeclaredTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self.project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    self.core = {_requirement_name(r) for r in self.project["dependencies"]}
    self.extras = {
      extra: {_requirement_name(r) for r in requirements if not r.startswith("bcjax[")}
      for extra, requirements in self.project["optional-dependencies"].items()
    }

  def test_every_import_is_declared_by_the_distribution_that_provides_it(self):
    providers = metadata.packages_distributions()  # module -> the installed distributions that provide it
    declared = self.core.union(*self.extras.values())
    for module, files in imported_modules().items():
      distributions = {_canonical(d) for d in providers.get(module, [])}
      self.assertTrue(distributions, f"{module} (imported by {sorted(files)}) is not installed here")
      self.assertTrue(
        distributions & declared,
        f"{module} (imported by {sorted(files)}) comes from {sorted(distributions)}, declared nowhere in pyproject",
      )

  def test_every_declared_library_of_the_core_and_of_the_extras_modules_is_imported(self):
    providers = metadata.packages_distributions()
    imported = {_canonical(d) for module in imported_modules() for d in providers.get(module, [])}
    imported.add("jaxlib")  # jax's runtime, imported through jax
    for name in self.core | self.extras["models"] | self.extras["stores"]:
      self.assertIn(name, imported, f"{name} is declared but bcjax never imports it")

  def test_the_extras_table_matches_pyproject(self):
    providers = metadata.packages_distributions()
    for extra, modules in _extras.EXTRAS.items():
      for module in modules:
        self.assertTrue({_canonical(d) for d in providers.get(module, [])} & self.extras[extra], (extra, module))
    self.assertIn("bcjax[models]", self.project["optional-dependencies"]["experiments"])

  def test_the_floors_pin_the_core_and_the_models_extra(self):
    pins = _load("floors").floors(ROOT / "pyproject.toml")
    self.assertEqual({_canonical(p.split("==")[0]) for p in pins}, self.core | self.extras["models"])
    self.assertIn("jax==0.8.1", pins)  # jax.enable_x64 (0.8), and the jax that flax 0.12.1 needs
    self.assertIn("flax==0.12.1", pins)  # nnx.List and nnx.Dict (0.12), without jax.array_ref (0.12.1)
    self.assertIn("ml_dtypes==0.5.0", pins)  # the floor jax 0.8.1 itself requires


class CoreAloneTest(absltest.TestCase):
  def run_check(self, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run(
      [sys.executable, str(ROOT / ".ci" / "core_check.py"), str(ROOT / "README.md"), *flags],
      capture_output=True,
      text=True,
      env=env,
      cwd=self.create_tempdir().full_path,
      timeout=600,
      check=False,
    )

  @pytest.mark.heavy
  def test_the_core_runs_the_readme_and_names_the_extras(self):
    run = self.run_check("--block")
    self.assertEqual(run.returncode, 0, run.stdout + run.stderr[-3000:])
    self.assertIn("core_check: ok", run.stdout)

  @pytest.mark.heavy
  def test_the_check_fails_where_the_extras_are_installed(self):
    """Without the block this environment has every extra: each support-tier name then loads, and the check says
    so (it can fail)."""
    run = self.run_check()
    self.assertEqual(run.returncode, 1, run.stderr[-3000:])
    self.assertIn("import bcjax.models: ran without the models extra's libraries", run.stderr)

  def test_import_bcjax_loads_no_support_or_product_tier(self):
    code = (
      "import sys, bcjax; "
      "print(sorted(m for m in ('flax', 'jraph', 'dm_pix', 'bcjax.models', 'bcjax.data', 'bcjax.upgrade', "
      "'bcjax.versioning') if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    self.assertEqual(run.returncode, 0, run.stderr[-3000:])
    self.assertEqual(run.stdout.strip(), "[]")
    self.assertIs(bcjax.TwoTower, bcjax.models.TwoTower)  # then loaded on first use


if __name__ == "__main__":
  absltest.main()
