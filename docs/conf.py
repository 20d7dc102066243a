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
