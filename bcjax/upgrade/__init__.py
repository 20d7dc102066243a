"""Upgrading an embedding model without re-indexing.

Fit a backward map from the new model's embeddings to the old one's on paired rows, judge it on held-out pairs and the
old index (bridge or re-index), store it in a registry and serve it over stored embeddings of any size, or from a
vector store, and move the store to the new model while it serves.

The flat names are the workflow's; each part's records and tools live in its package: :mod:`bcjax.upgrade.fit`
(closed forms, cross-validation, the MLP, the choice of kind), :mod:`bcjax.upgrade.report` (measures, verdicts and
their rendering) and :mod:`bcjax.upgrade.stores` (the store wrappers, bridged serving and migration).

From the command line: ``bcjax fit``, ``bcjax append``, ``bcjax transform``, ``bcjax migrate`` (see ``bcjax --help``).
"""

from bcjax.upgrade.stores import FaissStore
from bcjax.upgrade._files import EmbeddingFileError
from bcjax.upgrade._files import open_embeddings
from bcjax.upgrade.fit import UPGRADE_KINDS
from bcjax.upgrade.fit import PairSplit
from bcjax.upgrade.fit import UpgradeFit
from bcjax.upgrade.fit import closed_form
from bcjax.upgrade.fit import fit_upgrade
from bcjax.upgrade.fit import split_pairs
from bcjax.upgrade._hubness import Hubness
from bcjax.upgrade._hubness import csls_documents
from bcjax.upgrade._hubness import csls_queries
from bcjax.upgrade._hubness import hubness_bias
from bcjax.upgrade._hubness import make_hubness
from bcjax.upgrade.stores import LanceDBStore
from bcjax.upgrade._map import UpgradeMap
from bcjax.upgrade._map import affine_form
from bcjax.upgrade._map import apply_map
from bcjax.upgrade._map import check_direction
from bcjax.upgrade._map import load_map
from bcjax.upgrade._map import query_function
from bcjax.upgrade._map import save_map
from bcjax.upgrade.stores import Migration
from bcjax.upgrade.stores import MigrationError
from bcjax.upgrade.stores import open_migration
from bcjax.upgrade.stores import start_migration
from bcjax.upgrade.fit import pair_moments
from bcjax.upgrade.stores import QdrantStore
from bcjax.upgrade.report import VERDICTS
from bcjax.upgrade.report import UpgradeReport
from bcjax.upgrade.report import evaluate_upgrade
from bcjax.upgrade._retrieval import own_vector_ranks
from bcjax.upgrade._retrieval import top_k
from bcjax.upgrade._scale import ScoreScale
from bcjax.upgrade._serve import registry_maps
from bcjax.upgrade._serve import transform_file
from bcjax.upgrade._spaces import SpaceStamp
from bcjax.upgrade._spaces import space_stamp
from bcjax.upgrade.stores import MixedSpaceError
from bcjax.upgrade.stores import NewVectors
from bcjax.upgrade.stores import SearchResult
from bcjax.upgrade.stores import VectorStore
from bcjax.upgrade.stores import bridge_items
from bcjax.upgrade.stores import bridged_search
from bcjax.upgrade.stores import check_store_space

__all__ = (
  "UPGRADE_KINDS",
  "VERDICTS",
  "affine_form",
  "apply_map",
  "bridge_items",
  "bridged_search",
  "check_direction",
  "check_store_space",
  "closed_form",
  "csls_documents",
  "csls_queries",
  "EmbeddingFileError",
  "evaluate_upgrade",
  "FaissStore",
  "fit_upgrade",
  "Hubness",
  "hubness_bias",
  "LanceDBStore",
  "load_map",
  "make_hubness",
  "Migration",
  "MigrationError",
  "MixedSpaceError",
  "NewVectors",
  "open_embeddings",
  "open_migration",
  "own_vector_ranks",
  "pair_moments",
  "PairSplit",
  "QdrantStore",
  "query_function",
  "registry_maps",
  "save_map",
  "ScoreScale",
  "SearchResult",
  "space_stamp",
  "SpaceStamp",
  "split_pairs",
  "start_migration",
  "top_k",
  "transform_file",
  "UpgradeFit",
  "UpgradeMap",
  "UpgradeReport",
  "VectorStore",
)
