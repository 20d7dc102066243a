"""Optional libraries: imported where they are used, with an error that names the extra to install."""

import importlib
from types import ModuleType


def require(module: str, extra: str, what: str) -> ModuleType:
  """Imports ``module``, or raises ImportError saying which ``bcjax[extra]`` provides it and what needs it."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise ImportError(f"{what} needs the `{module}` package: pip install 'bcjax[{extra}]' ({e})") from e
