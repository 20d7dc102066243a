"""The documentation: every public name has an API page, and every example in the guides runs as written, in
float32, and prints what the page shows under it."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from absl.testing import absltest

import bcjax
from bcjax import _extras
from tests.test_readme import examples, run_float32

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def documented_names(api_dir: Path) -> dict[str, set[str]]:
  """sub-package -> the names its API page lists in an autosummary directive."""
  out = {}
  for page in sorted(api_dir.glob("*.md")):
    module = re.search(r"\.\. currentmodule:: bcjax\.(\w+)", page.read_text(encoding="utf-8"))
    if module is None:
      continue
    listing = re.search(r"\.\. autosummary::\n(?:   :[^\n]*\n)*\n((?:   \S+\n)+)", page.read_text(encoding="utf-8"))
    out[module.group(1)] = set(listing.group(1).split()) if listing else set()
  return out


def missing_pages(documented: dict[str, set[str]]) -> list[str]:
  """Public names without an API page: every name of a sub-package's ``__all__`` must be listed on that
  sub-package's page, and every flat ``bcjax`` name must be one of them (the same object) or a sub-package."""
  missing = []
  for package in bcjax._SUBPACKAGES:
    module = getattr(bcjax, package)
    missing += [f"bcjax.{package}.{n}" for n in module.__all__ if n not in documented.get(package, set())]
  for name in bcjax.__all__:
    if name in bcjax._SUBPACKAGES:
      continue
    obj = getattr(bcjax, name)
    homes = [p for p in bcjax._SUBPACKAGES if name in documented.get(p, ()) and getattr(getattr(bcjax, p), name) is obj]
    if not homes:
      missing.append(f"bcjax.{name}")
  return missing


class ApiCoverageTest(absltest.TestCase):
  def test_every_public_name_has_a_page(self):
    self.assertEqual(missing_pages(documented_names(DOCS / "api")), [])

  def test_a_name_removed_from_its_page_is_reported(self):
    documented = documented_names(DOCS / "api")
    documented["alignment"] = documented["alignment"] - {"multi_step_loss"}
    self.assertEqual(missing_pages(documented), ["bcjax.alignment.multi_step_loss", "bcjax.multi_step_loss"])
    documented["versioning"] = set()
    self.assertIn("bcjax.versioning.Registry", missing_pages(documented))

  def test_every_sub_package_page_is_in_the_api_index(self):
    index = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    for package in bcjax._SUBPACKAGES:
      self.assertTrue((DOCS / "api" / f"{package}.md").exists(), package)
      self.assertRegex(index, rf"(?m)^{package}$")


class GuidesTest(absltest.TestCase):
  def test_every_guide_is_in_the_table_of_contents(self):
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in sorted((DOCS / "guides").glob("*.md")):
      self.assertIn(f"guides/{page.stem}", index)
    self.assertIn("reproduction", index)

  @pytest.mark.heavy
  def test_examples_print_what_the_pages_show_in_float32(self):
    pages = sorted((DOCS / "guides").glob("*.md"))
    for page in pages:
      text = page.read_text(encoding="utf-8")
      self.assertLen(examples(text), text.count("```python"), f"{page.name}: a ```python block without its output")
      for code, printed in examples(text):
        with self.subTest(page=page.name, first_line=printed.splitlines()[0]):
          run = run_float32(code)
          self.assertEqual(run.returncode, 0, run.stderr[-3000:])
          self.assertEqual(run.stdout, printed)

  def test_the_reproduction_report_covers_each_paper(self):
    report = (DOCS / "reproduction.md").read_text(encoding="utf-8")
    for paper in (
      "Backward-compatible embeddings",
      "Gramian estimation",
      "Incremental contrastive learning",
      "Conceptors",
    ):
      self.assertRegex(report, rf"(?m)^## \d\. {paper}")
    self.assertGreaterEqual(report.count("| claim | kind | where | measured as | paper | bcjax | verdict |"), 4)


def _architecture():
  spec = importlib.util.spec_from_file_location("architecture", DOCS / "architecture.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


class ArchitectureTest(absltest.TestCase):
  """The tiers on the import graph: no upward import, no cycle, every package in a tier, the picture current."""

  def setUp(self):
    super().setUp()
    self.graph = _architecture().import_graph(ROOT)
    self.level = {p: i for i, tier in enumerate(_extras.TIERS.values()) for p in tier}

  def test_every_package_is_in_one_tier_and_helpers_import_no_package(self):
    public = {name for name in self.graph if not name.startswith("_")}
    self.assertEqual(public, set(self.level), "a package missing from bcjax._extras.TIERS, or a stale entry")
    for helper in (name for name in self.graph if name.startswith("_")):
      self.assertEqual({t for t in self.graph[helper] if not t.startswith("_")}, set(), helper)

  def test_no_package_imports_from_a_tier_above(self):
    for source, targets in self.graph.items():
      for target in targets:
        if source in self.level and target in self.level:
          self.assertLessEqual(self.level[target], self.level[source], f"bcjax.{source} imports bcjax.{target}")

  def test_the_package_graph_has_no_cycle(self):
    state: dict[str, int] = {}

    def visit(node, path):
      if state.get(node) == 1:
        self.fail("import cycle: " + " -> ".join([*path, node]))
      if state.get(node) == 2:
        return
      state[node] = 1
      for target in sorted(self.graph.get(node, ())):
        visit(target, [*path, node])
      state[node] = 2

    for node in sorted(self.graph):
      visit(node, [])

  def test_an_upward_import_is_caught(self):
    self.graph["gramian"] = self.graph["gramian"] | {"upgrade"}
    with self.assertRaises(AssertionError):
      self.test_no_package_imports_from_a_tier_above()

  def test_the_picture_is_what_the_code_gives(self):
    run = subprocess.run(
      [sys.executable, str(DOCS / "architecture.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    self.assertEqual(run.returncode, 0, run.stderr)
    self.assertIn("architecture.svg", (DOCS / "architecture.md").read_text(encoding="utf-8"))


class ReferencePagesTest(absltest.TestCase):
  def test_the_cli_page_is_what_the_parsers_give_and_is_in_the_table_of_contents(self):
    run = subprocess.run(
      [sys.executable, str(DOCS / "cli_reference.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    self.assertEqual(run.returncode, 0, run.stderr)
    self.assertRegex((DOCS / "index.md").read_text(encoding="utf-8"), r"(?m)^cli$")
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    from bcjax import cli

    for verdict, code in cli.EXIT_VERDICT.items():
      self.assertRegex(page, rf"\| {code} \| .*{verdict}")
    for flag in ("--old", "--min-hit-rate", "--hubness", "--registry", "--overwrite"):
      self.assertIn(f"`{flag}`", page)

  def test_a_page_script_refuses_an_unknown_flag_and_writes_nothing(self):
    for script, page in (("cli_reference.py", "cli.md"), ("architecture.py", "architecture.svg")):
      before = (DOCS / page).stat().st_mtime_ns
      run = subprocess.run(
        [sys.executable, str(DOCS / script), "--chek"], capture_output=True, text=True, timeout=120, check=False
      )
      self.assertEqual(run.returncode, 2, script)
      self.assertIn("unrecognized arguments: --chek", run.stderr)
      self.assertEqual((DOCS / page).stat().st_mtime_ns, before, f"{script} wrote {page}")

  def test_no_docstring_sends_the_reader_to_an_unrendered_module_docstring(self):
    for path in (ROOT / "bcjax").rglob("*.py"):
      text = " ".join(path.read_text(encoding="utf-8").split())  # a phrase broken over two lines too
      self.assertNotIn("module docstring", text, str(path))

  def test_every_public_function_has_args_returns_and_raises_and_every_class_its_own_text(self):
    """Each public function says what it takes, what it gives and (where it validates) what it raises, in Google
    sections (ruff's D417 checks that an Args section names every parameter; its D1 rules skip functions defined in
    private modules, which is all of them); each public class has its own docstring, not the field list a
    NamedTuple gets by default."""
    import importlib
    import inspect

    missing = []
    for package in bcjax._SUBPACKAGES:
      module = importlib.import_module(f"bcjax.{package}")
      for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and (obj.__doc__ or f"{obj.__name__}(").startswith(f"{obj.__name__}("):
          missing.append(f"bcjax.{package}.{name}: a docstring")
        if not inspect.isfunction(obj):
          continue
        doc = inspect.getdoc(obj) or ""
        if inspect.signature(obj).parameters and "\nArgs:\n" not in doc:
          missing.append(f"bcjax.{package}.{name}: Args")
        if "\nReturns:\n" not in doc:
          missing.append(f"bcjax.{package}.{name}: Returns")
        source = inspect.getsource(obj)
        if ("raise " in source or "_checks." in source) and "\nRaises:\n" not in doc:
          missing.append(f"bcjax.{package}.{name}: Raises (it validates its arguments)")
    self.assertEqual(missing, [])

  def test_no_docstring_holds_a_control_character(self):
    """A backslash sequence in a non-raw docstring (``\\top`` in math) is a control character at run time: the page
    then shows a tab where the formula should be."""
    import ast

    for path in (ROOT / "bcjax").rglob("*.py"):
      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
          doc = ast.get_docstring(node, clean=False) or ""
          self.assertFalse(any(c in doc for c in "\t\b\f\r\v\a"), f"{path}:{getattr(node, 'lineno', 1)}")

  def test_every_public_constant_has_its_own_text(self):
    """A constant's page shows the string under its assignment (docs/conf.py finds it in the defining module);
    without one it would show its type's docstring (a tuple's)."""
    import ast
    import importlib
    import inspect
    import types

    missing = []
    for package in bcjax._SUBPACKAGES:
      module = importlib.import_module(f"bcjax.{package}")
      documented = set()
      for path in (ROOT / "bcjax" / package).rglob("*.py"):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for statement, after in zip(body, body[1:]):
          is_doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
          if isinstance(statement, (ast.Assign, ast.AnnAssign)) and is_doc and isinstance(after.value.value, str):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            documented |= {t.id for t in targets if isinstance(t, ast.Name)}
      for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or callable(obj) or isinstance(obj, types.ModuleType):
          continue
        if name not in documented and not any(  # documented under its defining name (an alias re-exported)
          getattr(sub, n, None) is obj for sub in map(importlib.import_module, _submodules(package)) for n in documented
        ):
          missing.append(f"bcjax.{package}.{name}")
    self.assertEqual(missing, [])


def _submodules(package: str) -> list[str]:
  return [f"bcjax.{package}.{p.stem}" for p in (ROOT / "bcjax" / package).glob("_*.py") if p.stem != "__init__"]


if __name__ == "__main__":
  absltest.main()
