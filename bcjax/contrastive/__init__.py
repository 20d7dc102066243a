"""Incremental contrastive learning (ICL): InfoNCE, the change ratio, NCE-II and the ICL objective; first-order
meta-optimisation; learning-rate learning with DDPG."""

from bcjax.contrastive._losses import change_ratio
from bcjax.contrastive._lr_agent import DDPG
from bcjax.contrastive._lr_agent import AgentConfig
from bcjax.contrastive._lr_agent import AgentState
from bcjax.contrastive._lr_agent import DDPGState
from bcjax.contrastive._lr_agent import LearningRateAgent
from bcjax.contrastive._lr_agent import ReplayBuffer
from bcjax.contrastive._lr_agent import Transitions
from bcjax.contrastive._lr_agent import ddpg
from bcjax.contrastive._lr_agent import learning_rate_agent
from bcjax.contrastive._lr_agent import replay_add
from bcjax.contrastive._lr_agent import replay_buffer
from bcjax.contrastive._lr_agent import replay_sample
from bcjax.contrastive._meta import INNER_RULES
from bcjax.contrastive._meta import MetaGradient
from bcjax.contrastive._meta import first_order_meta_gradient
from bcjax.contrastive._meta import inner_step_count
from bcjax.contrastive._meta import sgd_step
from bcjax.contrastive._losses import icl_objective
from bcjax.contrastive._losses import info_nce
from bcjax.contrastive._losses import log_change_ratio
from bcjax.contrastive._losses import log_similarity
from bcjax.contrastive._losses import mixed_info_nce
from bcjax.contrastive._losses import nce_ii
from bcjax.contrastive._losses import nce_ii_from_log_ratio
from bcjax.contrastive._losses import new_negative_mask
from bcjax.contrastive._losses import old_negative_count

__all__ = (
  "AgentConfig",
  "AgentState",
  "DDPG",
  "DDPGState",
  "INNER_RULES",
  "LearningRateAgent",
  "MetaGradient",
  "ReplayBuffer",
  "Transitions",
  "change_ratio",
  "ddpg",
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
  "replay_add",
  "replay_buffer",
  "replay_sample",
  "sgd_step",
)
