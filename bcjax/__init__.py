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

Argument conventions, everywhere: arrays are positional and options keyword-only; a backward map between versions
k-1 and k is described as ``(d_prev, d_new)`` = (d_(k-1), d_k), the order of the weight's shape ``[d_(k-1), d_k]``.
"""

from bcjax import alignment
from bcjax import conceptors
from bcjax import contrastive
from bcjax import data
from bcjax import files
from bcjax import gramian
from bcjax import metrics
from bcjax import models
from bcjax import parallel
from bcjax import sentence
from bcjax import upgrade
from bcjax import versioning
from bcjax.alignment import *  # noqa: F403  (every name of alignment.__all__ is public math)
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
from bcjax.contrastive import AgentConfig
from bcjax.contrastive import LearningRateAgent
from bcjax.contrastive import MetaGradient
from bcjax.contrastive import change_ratio
from bcjax.contrastive import first_order_meta_gradient
from bcjax.contrastive import icl_objective
from bcjax.contrastive import info_nce
from bcjax.contrastive import inner_step_count
from bcjax.contrastive import learning_rate_agent
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
from bcjax.gramian import batch_gramian
from bcjax.gramian import cross_gramian
from bcjax.gramian import full_gramian
from bcjax.gramian import gramian_penalty
from bcjax.gramian import penalty_surrogate
from bcjax.gramian import sagram
from bcjax.gramian import sampled_softmax_loss
from bcjax.gramian import sogram
from bcjax.metrics import *  # noqa: F403
from bcjax.models import BipartiteInputs
from bcjax.models import BipartiteSAGE
from bcjax.models import GCNConv
from bcjax.models import GCNEncoder
from bcjax.models import GraphSAGE
from bcjax.models import ResNet18
from bcjax.models import SAGEConv
from bcjax.models import SmallCNN
from bcjax.models import Tower
from bcjax.models import TwoTower
from bcjax.models import bipartite_inputs
from bcjax.models import gcn_propagate
from bcjax.models import mean_aggregate
from bcjax.upgrade import UpgradeMap
from bcjax.upgrade import evaluate_upgrade
from bcjax.upgrade import fit_upgrade
from bcjax.versioning import Registry
from bcjax.versioning import RegistryError
from bcjax.versioning import VersionInfo

__version__ = "0.1.0"

_SUBPACKAGES = (
  "alignment",
  "conceptors",
  "contrastive",
  "data",
  "files",
  "gramian",
  "metrics",
  "models",
  "parallel",
  "sentence",
  "upgrade",
  "versioning",
)

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
