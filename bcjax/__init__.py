"""bcjax: keeping embeddings useful while the models that produce them, and the data they see, keep changing.

The flat namespace holds what a user composes, as optax does: the alignment math of BC-Aligner, the keep-latest
registry, the conceptor algebra, the contrastive losses and meta-optimisation of ICL, the Gramian penalties and
estimators, the ranking metrics and the model classes. Plumbing stays in its sub-package: the DDPG internals
(``bcjax.contrastive``), registry error subclasses (``bcjax.versioning``), estimator states and the ``gramian``
function itself (``bcjax.gramian``: it shares the sub-package's name), model building blocks (``bcjax.models``), the
dataset loaders (``bcjax.data``), the embedding-upgrade workflow's files, reports and serving
(``bcjax.upgrade``; its ``fit_upgrade``, ``evaluate_upgrade`` and ``UpgradeMap`` are flat), the sentence pipeline
(``bcjax.sentence``), atomic file writing
(``bcjax.files``) and the data-parallel device mesh (``bcjax.parallel``).

Tiers: ``import bcjax`` loads the core (the math, on jax, numpy and optax). The support and product tiers load on
first use — ``bcjax.models``, ``bcjax.data``, ``bcjax.upgrade``, ``bcjax.versioning`` and their flat names — so the
core imports fast and without the extras; a name whose extra is not installed raises an ImportError naming it
(``pip install 'bcjax[models]'``).

Argument conventions, everywhere: arrays are positional and options keyword-only; a backward map between versions
k-1 and k is described as ``(d_prev, d_new)`` = (d_(k-1), d_k), the order of the weight's shape ``[d_(k-1), d_k]``.
"""

import importlib
from typing import TYPE_CHECKING

from bcjax import alignment
from bcjax import conceptors
from bcjax import contrastive
from bcjax import files
from bcjax import gramian
from bcjax import metrics
from bcjax import parallel
from bcjax import sentence
from bcjax.alignment import TRANSFORM_KINDS
from bcjax.alignment import TransformApplyFn
from bcjax.alignment import TransformDimsFn
from bcjax.alignment import TransformFitFn
from bcjax.alignment import TransformInitFn
from bcjax.alignment import BackwardTransform
from bcjax.alignment import PosthocFit
from bcjax.alignment import affine_transform
from bcjax.alignment import alignment_error
from bcjax.alignment import apply_backward
from bcjax.alignment import apply_chain
from bcjax.alignment import backward_transform
from bcjax.alignment import compose
from bcjax.alignment import compositions
from bcjax.alignment import fit_posthoc
from bcjax.alignment import init_backward
from bcjax.alignment import least_squares_backward
from bcjax.alignment import linear_transform
from bcjax.alignment import mlp_transform
from bcjax.alignment import multi_step_loss
from bcjax.alignment import multi_step_pull
from bcjax.alignment import notrans
from bcjax.alignment import orthogonal_transform
from bcjax.alignment import semi_orthogonal
from bcjax.alignment import single_step_loss
from bcjax.conceptors import aperture_adaptation
from bcjax.conceptors import aperture_norm_gradient
from bcjax.conceptors import conceptor
from bcjax.conceptors import conceptor_from_correlation
from bcjax.conceptors import conjunction
from bcjax.conceptors import correlation
from bcjax.conceptors import disjunction
from bcjax.conceptors import negation
from bcjax.conceptors import optimal_aperture
from bcjax.conceptors import quota
from bcjax.conceptors import relative_aperture
from bcjax.contrastive import MetaGradient
from bcjax.contrastive import change_ratio
from bcjax.contrastive import first_order_meta_gradient
from bcjax.contrastive import icl_objective
from bcjax.contrastive import info_nce
from bcjax.contrastive import inner_step_count
from bcjax.contrastive import log_change_ratio
from bcjax.contrastive import log_similarity
from bcjax.contrastive import mixed_info_nce
from bcjax.contrastive import nce_ii
from bcjax.contrastive import nce_ii_from_log_ratio
from bcjax.contrastive import new_negative_mask
from bcjax.contrastive import old_negative_count
from bcjax.contrastive import sgd_step
from bcjax.gramian import GramianEstimate
from bcjax.gramian import GramianEstimator
from bcjax.gramian import GramianInitFn
from bcjax.gramian import GramianUpdateFn
from bcjax.gramian import batch_gramian
from bcjax.gramian import cross_gramian
from bcjax.gramian import full_gramian
from bcjax.gramian import gramian_penalty
from bcjax.gramian import penalty_surrogate
from bcjax.gramian import sagram
from bcjax.gramian import sampled_softmax_loss
from bcjax.gramian import sogram
from bcjax.metrics import AucInterval
from bcjax.metrics import BootstrapInterval
from bcjax.metrics import average_precision_at_k
from bcjax.metrics import bootstrap_means
from bcjax.metrics import evaluate_retrieval
from bcjax.metrics import mean_over_queries
from bcjax.metrics import negative_flip_rate
from bcjax.metrics import paired_bootstrap
from bcjax.metrics import recall_at_k
from bcjax.metrics import roc_auc
from bcjax.metrics import roc_auc_interval

__version__ = "0.1.0"

_CORE = ("alignment", "conceptors", "contrastive", "files", "gramian", "metrics", "parallel", "sentence")
_ON_FIRST_USE = ("data", "models", "upgrade", "versioning")
_SUBPACKAGES = tuple(sorted(_CORE + _ON_FIRST_USE))

# Flat names that load their sub-package on first use: the support and product tiers, and the core's NNX modules.
_LAZY = {
  "BackwardLinear": "alignment",
  "BackwardMap": "alignment",
  "AgentConfig": "contrastive",
  "learning_rate_agent": "contrastive",
  "LearningRateAgent": "contrastive",
  "bipartite_inputs": "models",
  "BipartiteInputs": "models",
  "BipartiteSAGE": "models",
  "gcn_propagate": "models",
  "GCNConv": "models",
  "GCNEncoder": "models",
  "GraphSAGE": "models",
  "mean_aggregate": "models",
  "ResNet18": "models",
  "SAGEConv": "models",
  "SmallCNN": "models",
  "Tower": "models",
  "TwoTower": "models",
  "evaluate_upgrade": "upgrade",
  "fit_upgrade": "upgrade",
  "UpgradeMap": "upgrade",
  "Registry": "versioning",
  "RegistryError": "versioning",
  "VersionInfo": "versioning",
}


def __getattr__(name: str) -> object:
  """A sub-package of the support or product tier, or one of their flat names, imported on first use (PEP 562)."""
  if name in _ON_FIRST_USE:
    return importlib.import_module(f"bcjax.{name}")
  if name in _LAZY:
    return getattr(importlib.import_module(f"bcjax.{_LAZY[name]}"), name)
  raise AttributeError(f"module 'bcjax' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
  from bcjax import data as data
  from bcjax import models as models
  from bcjax import upgrade as upgrade
  from bcjax import versioning as versioning
  from bcjax.alignment import BackwardLinear as BackwardLinear
  from bcjax.alignment import BackwardMap as BackwardMap
  from bcjax.contrastive import AgentConfig as AgentConfig
  from bcjax.contrastive import learning_rate_agent as learning_rate_agent
  from bcjax.contrastive import LearningRateAgent as LearningRateAgent
  from bcjax.models import bipartite_inputs as bipartite_inputs
  from bcjax.models import BipartiteInputs as BipartiteInputs
  from bcjax.models import BipartiteSAGE as BipartiteSAGE
  from bcjax.models import gcn_propagate as gcn_propagate
  from bcjax.models import GCNConv as GCNConv
  from bcjax.models import GCNEncoder as GCNEncoder
  from bcjax.models import GraphSAGE as GraphSAGE
  from bcjax.models import mean_aggregate as mean_aggregate
  from bcjax.models import ResNet18 as ResNet18
  from bcjax.models import SAGEConv as SAGEConv
  from bcjax.models import SmallCNN as SmallCNN
  from bcjax.models import Tower as Tower
  from bcjax.models import TwoTower as TwoTower
  from bcjax.upgrade import evaluate_upgrade as evaluate_upgrade
  from bcjax.upgrade import fit_upgrade as fit_upgrade
  from bcjax.upgrade import UpgradeMap as UpgradeMap
  from bcjax.versioning import Registry as Registry
  from bcjax.versioning import RegistryError as RegistryError
  from bcjax.versioning import VersionInfo as VersionInfo

__all__ = (
  _SUBPACKAGES
  + alignment.__all__
  + metrics.__all__
  + (
    # conceptors
    "aperture_adaptation",
    "aperture_norm_gradient",
    "conceptor",
    "conceptor_from_correlation",
    "conjunction",
    "correlation",
    "disjunction",
    "negation",
    "optimal_aperture",
    "quota",
    "relative_aperture",
    # contrastive
    "AgentConfig",
    "LearningRateAgent",
    "MetaGradient",
    "change_ratio",
    "first_order_meta_gradient",
    "icl_objective",
    "info_nce",
    "inner_step_count",
    "learning_rate_agent",
    "log_change_ratio",
    "log_similarity",
    "mixed_info_nce",
    "nce_ii",
    "nce_ii_from_log_ratio",
    "new_negative_mask",
    "old_negative_count",
    "sgd_step",
    # gramian
    "GramianEstimate",
    "GramianEstimator",
    "GramianInitFn",
    "GramianUpdateFn",
    "batch_gramian",
    "cross_gramian",
    "full_gramian",
    "gramian_penalty",
    "penalty_surrogate",
    "sagram",
    "sampled_softmax_loss",
    "sogram",
    # models
    "BipartiteInputs",
    "BipartiteSAGE",
    "GCNConv",
    "GCNEncoder",
    "GraphSAGE",
    "ResNet18",
    "SAGEConv",
    "SmallCNN",
    "Tower",
    "TwoTower",
    "bipartite_inputs",
    "gcn_propagate",
    "mean_aggregate",
    # upgrade
    "UpgradeMap",
    "evaluate_upgrade",
    "fit_upgrade",
    # versioning
    "Registry",
    "RegistryError",
    "VersionInfo",
  )
)
