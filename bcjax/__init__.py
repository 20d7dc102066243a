"""bcjax: keeping embeddings useful while the models that produce them, and the data they see, keep changing.

The public API is re-exported flat here; the sub-packages (``bcjax.alignment``, ``bcjax.versioning``,
``bcjax.conceptors``, ``bcjax.contrastive``) export the same names grouped by area. Gramian estimation lives in ``bcjax.gramian`` (its
function ``gramian`` shares the sub-package's name, so that area is not flattened) and the dataset loaders in
``bcjax.data`` (generic names such as ``counts`` and ``fetch`` read best qualified).
"""

from bcjax import alignment
from bcjax import conceptors
from bcjax import contrastive
from bcjax import data
from bcjax import gramian
from bcjax import metrics
from bcjax import models
from bcjax import versioning
from bcjax.alignment import BackwardLinear
from bcjax.alignment import PosthocFit
from bcjax.alignment import alignment_error
from bcjax.alignment import apply_backward
from bcjax.alignment import apply_chain
from bcjax.alignment import compose
from bcjax.alignment import compositions
from bcjax.alignment import fit_posthoc
from bcjax.alignment import init_backward
from bcjax.alignment import least_squares_backward
from bcjax.alignment import multi_step_loss
from bcjax.alignment import notrans
from bcjax.alignment import single_step_loss
from bcjax.conceptors import aperture_adaptation
from bcjax.conceptors import conceptor
from bcjax.conceptors import conceptor_from_correlation
from bcjax.conceptors import conjunction
from bcjax.conceptors import correlation
from bcjax.conceptors import disjunction
from bcjax.conceptors import negation
from bcjax.conceptors import quota
from bcjax.versioning import CorruptRegistryError
from bcjax.versioning import InconsistentRegistryError
from bcjax.versioning import Registry
from bcjax.versioning import RegistryError
from bcjax.versioning import VersionExistsError
from bcjax.versioning import VersionInfo
from bcjax.versioning import VersionNotFoundError
from bcjax.metrics import average_precision_at_k
from bcjax.metrics import evaluate_retrieval
from bcjax.metrics import mean_over_queries
from bcjax.metrics import recall_at_k
from bcjax.metrics import roc_auc
from bcjax.models import BipartiteInputs
from bcjax.models import BipartiteSAGE
from bcjax.models import GCNConv
from bcjax.models import GCNEncoder
from bcjax.models import GraphSAGE
from bcjax.models import SAGEConv
from bcjax.models import Tower
from bcjax.models import TwoTower
from bcjax.contrastive import DDPG
from bcjax.contrastive import INNER_RULES
from bcjax.contrastive import AgentConfig
from bcjax.contrastive import DDPGState
from bcjax.contrastive import LearningRateAgent
from bcjax.contrastive import MetaGradient
from bcjax.contrastive import ReplayBuffer
from bcjax.contrastive import Transitions
from bcjax.contrastive import first_order_meta_gradient
from bcjax.contrastive import inner_step_count
from bcjax.contrastive import sgd_step
from bcjax.contrastive import change_ratio
from bcjax.contrastive import icl_objective
from bcjax.contrastive import info_nce
from bcjax.contrastive import log_change_ratio
from bcjax.contrastive import log_similarity
from bcjax.contrastive import mixed_info_nce
from bcjax.contrastive import nce_ii
from bcjax.contrastive import nce_ii_from_log_ratio
from bcjax.contrastive import new_negative_mask
from bcjax.contrastive import old_negative_count
from bcjax.models import bag_mean
from bcjax.models import bipartite_inputs
from bcjax.models import gcn_propagate
from bcjax.models import mean_aggregate
from bcjax.models import torch_linear_init
from bcjax._atomic import write_atomic

__version__ = "0.1.0"

__all__ = (("alignment", "conceptors", "contrastive", "data", "gramian", "metrics", "models", "versioning", "write_atomic")
           + alignment.__all__ + versioning.__all__ + tuple(name for name in conceptors.__all__ if name != "default_tol")
           + contrastive.__all__ + metrics.__all__ + models.__all__)
