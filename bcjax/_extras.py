"""The install tiers and their extras: what an import needs beyond the core, and the error that names the extra.

``pip install bcjax`` installs the core (jax, numpy, optax): the research math of ``alignment``, ``gramian``,
``contrastive``, ``conceptors`` and ``metrics``, with ``files``, ``parallel``, ``sentence`` and the upgrade tool
(``upgrade``, ``versioning``, the ``bcjax`` command), which need nothing more. Each extra adds libraries for one
tier's optional parts:

* ``bcjax[models]``: flax, jraph and dm-pix, for the NNX models (``bcjax.models``, alignment's ``BackwardLinear`` and
  ``BackwardMap``, contrastive's learning-rate agent) and the data loaders (``bcjax.data``: graph batches, image
  augmentation);
* ``bcjax[stores]``: faiss, LanceDB, Qdrant and pyarrow, for the upgrade tool's vector stores;
* ``bcjax[experiments]``: the models extra and what the experiments, benchmarks and reports use.

A module that needs an extra imports it through :func:`require` or :func:`require_extra`, so a missing one is an
ImportError naming the extra, never a bare ``No module named 'flax'``.
"""

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from types import ModuleType

TIERS: Mapping[str, tuple[str, ...]] = {
  "core": ("alignment", "conceptors", "contrastive", "gramian", "metrics"),
  "support": ("data", "files", "models", "parallel", "sentence"),
  "product": ("cli", "upgrade", "versioning"),
}
"""The public packages of each tier, bottom up: a package imports only from its own tier, the tiers below it and the
private helpers (``bcjax._*``), never from a tier above (tests/test_docs.py checks it on the import graph)."""

EXTRAS: Mapping[str, tuple[str, ...]] = {
  "models": ("flax", "jraph", "dm_pix"),
  "stores": ("faiss", "lancedb", "qdrant_client", "pyarrow"),
}
"""The modules each extra provides (import names; ``dm_pix`` is the ``dm-pix`` distribution)."""


def require(module: str, extra: str, what: str) -> ModuleType:
  """Imports an optional module.

  Args:
    module: the module's import name.
    extra: the extra that installs it.
    what: what needs it, for the message.

  Returns:
    The module.

  Raises:
    ImportError: naming ``bcjax[extra]`` when the module is not installed.
  """
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise ImportError(f"{what} needs the `{module}` package: pip install 'bcjax[{extra}]' ({e})") from e


def require_extra(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
  """Checks, before anything is imported, that the modules ``what`` needs from ``extra`` are installed.

  Args:
    extra: a key of :data:`EXTRAS`.
    what: what needs them, for the message.
    modules: the ones of the extra's modules it needs (default all).

  Raises:
    ImportError: naming the missing modules and ``bcjax[extra]``.
  """
  missing = [m for m in (EXTRAS[extra] if modules is None else modules) if _missing(m)]
  if missing:
    raise ImportError(f"{what} needs {', '.join(missing)}, not installed: pip install 'bcjax[{extra}]'")


def _missing(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is None
  except ValueError:  # a module put in sys.modules as None (blocked) or without a spec
    return True


def lazy_names(
  package: str, names: Mapping[str, str], extra: str, modules: tuple[str, ...] | None = None
) -> Callable[[str], object]:
  """A module ``__getattr__`` (PEP 562) that imports a package's names needing ``extra`` on first use.

  Args:
    package: the package's ``__name__``.
    names: each lazy name and the private module (relative to ``package``) that defines it.
    extra: the extra those modules need.
    modules: the ones of the extra's modules they import (default all).

  Returns:
    The ``__getattr__``: it checks the extra (an ImportError naming it), imports the module and returns the name.
  """

  def __getattr__(name: str) -> object:
    if name not in names:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    require_extra(extra, f"{package}.{name}", modules)
    return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

  return __getattr__
