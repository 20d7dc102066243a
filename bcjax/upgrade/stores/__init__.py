"""Serving an upgrade from real vector stores, and moving a store to the new model while it serves.

:class:`VectorStore` is what bcjax needs of a store; :class:`FaissStore`, :class:`LanceDBStore` and
:class:`QdrantStore` wrap the libraries (the ``stores`` extra). :func:`bridged_search` serves new-model queries from
the old store through the map, :func:`bridge_items` writes new items through it, :func:`check_store_space` refuses a
store that mixes two models' vectors, and :func:`start_migration` moves a store to the new model while serving both.
"""

from bcjax.upgrade.stores._bridged import bridge_items
from bcjax.upgrade.stores._bridged import bridged_search
from bcjax.upgrade.stores._faiss import FaissStore
from bcjax.upgrade.stores._lancedb import LanceDBStore
from bcjax.upgrade.stores._migration import Migration
from bcjax.upgrade.stores._migration import MigrationError
from bcjax.upgrade.stores._migration import MigrationStatus
from bcjax.upgrade.stores._migration import RecallPoint
from bcjax.upgrade.stores._migration import open_migration
from bcjax.upgrade.stores._migration import start_migration
from bcjax.upgrade.stores._protocol import MixedSpaceError
from bcjax.upgrade.stores._protocol import NewVectors
from bcjax.upgrade.stores._protocol import SearchResult
from bcjax.upgrade.stores._protocol import SpaceCheck
from bcjax.upgrade.stores._protocol import VectorStore
from bcjax.upgrade.stores._qdrant import QdrantStore
from bcjax.upgrade.stores._space import check_store_space

__all__ = (
  "bridge_items",
  "bridged_search",
  "check_store_space",
  "FaissStore",
  "LanceDBStore",
  "Migration",
  "MigrationError",
  "MigrationStatus",
  "MixedSpaceError",
  "NewVectors",
  "open_migration",
  "QdrantStore",
  "RecallPoint",
  "SearchResult",
  "SpaceCheck",
  "start_migration",
  "VectorStore",
)
