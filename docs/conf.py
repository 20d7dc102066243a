"""Sphinx configuration of the bcjax documentation: MyST pages, an API reference generated from the docstrings
(autosummary + autodoc, Google-style sections through napoleon), MathJax for the docstrings' equations.

``make docs`` builds it with warnings as errors; ``tests/test_docs.py`` checks that every public name has a page."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bcjax  # noqa: E402

project = "bcjax"
author = "The bcjax authors"
copyright = "2026, the bcjax authors"
release = version = bcjax.__version__

extensions = [
  "myst_parser",
  "sphinx.ext.autodoc",
  "sphinx.ext.autosummary",
  "sphinx.ext.mathjax",
  "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "api/_generated/*.md"]

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
add_module_names = False

html_theme = "alabaster"
html_title = f"bcjax {release}"
html_static_path: list[str] = []


# A constant's page shows its own text: autodoc would show its type's docstring (a tuple's) because the attribute
# docstring (the string under `NAME = ...`) sits in the private module that defines it, not in the package that
# re-exports it. The defining module is found by name, or by identity for a constant re-exported under another name.
_ATTRIBUTE_DOCS: dict[str, dict[str, tuple[object, list[str]]]] = {}


def _attribute_docs(package: str) -> dict[str, tuple[object, list[str]]]:
  if package not in _ATTRIBUTE_DOCS:
    import importlib
    import pkgutil

    from sphinx.errors import PycodeError
    from sphinx.pycode import ModuleAnalyzer

    found: dict[str, tuple[object, list[str]]] = {}
    module = importlib.import_module(package)
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
      name = f"{package}.{info.name}"
      try:
        docs = ModuleAnalyzer.for_module(name).find_attr_docs()
      except PycodeError:
        continue
      sub = importlib.import_module(name)
      for (scope, attr), lines in docs.items():
        if scope == "" and hasattr(sub, attr):
          found[attr] = (getattr(sub, attr), list(lines))
    _ATTRIBUTE_DOCS[package] = found
  return _ATTRIBUTE_DOCS[package]


def _constant_docstring(app, what, name, obj, options, lines):
  if what != "data":
    return
  package, _, attr = name.rpartition(".")
  docs = _attribute_docs(package)
  match = docs.get(attr)
  if match is None or match[0] is not obj:
    match = next(((o, d) for o, d in docs.values() if o is obj and not isinstance(obj, (int, str))), None)
  if match is not None:
    lines[:] = match[1]


def setup(app):
  app.connect("autodoc-process-docstring", _constant_docstring)
