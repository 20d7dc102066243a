"""Incremental contrastive learning (ICL).

InfoNCE, the change ratio, NCE-II and the ICL objective; first-order meta-optimisation; learning-rate learning with
DDPG.

The learning-rate agent's names (:class:`LearningRateAgent`, :func:`ddpg` and their states) are flax NNX networks:
they load on first use and need ``bcjax[models]``; everything else needs the core install only.
"""

from typing import TYPE_CHECKING

from bcjax import _extras

from bcjax.contrastive._losses import change_ratio
from bcjax.contrastive._replay import ReplayBuffer
from bcjax.contrastive._replay import Transitions
from bcjax.contrastive._replay import replay_add
from bcjax.contrastive._replay import replay_buffer
from bcjax.contrastive._replay import replay_sample
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

_AGENT_NAMES = ("AgentConfig", "AgentState", "DDPG", "DDPGState", "LearningRateAgent", "ddpg", "learning_rate_agent")
__getattr__ = _extras.lazy_names(__name__, dict.fromkeys(_AGENT_NAMES, "_lr_agent"), "models", ("flax",))

if TYPE_CHECKING:
  from bcjax.contrastive._lr_agent import DDPG as DDPG
  from bcjax.contrastive._lr_agent import AgentConfig as AgentConfig
  from bcjax.contrastive._lr_agent import AgentState as AgentState
  from bcjax.contrastive._lr_agent import DDPGState as DDPGState
  from bcjax.contrastive._lr_agent import LearningRateAgent as LearningRateAgent
  from bcjax.contrastive._lr_agent import ddpg as ddpg
  from bcjax.contrastive._lr_agent import learning_rate_agent as learning_rate_agent
