"""Keep-latest version registry: store each version's backward transformation, compose to any old version."""

from bcjax.versioning._registry import CorruptRegistryError
from bcjax.versioning._registry import InconsistentRegistryError
from bcjax.versioning._registry import Registry
from bcjax.versioning._registry import RegistryError
from bcjax.versioning._registry import VersionExistsError
from bcjax.versioning._registry import VersionInfo
from bcjax.versioning._registry import VersionNotFoundError

__all__ = (
  "CorruptRegistryError",
  "InconsistentRegistryError",
  "Registry",
  "RegistryError",
  "VersionExistsError",
  "VersionInfo",
  "VersionNotFoundError",
)
