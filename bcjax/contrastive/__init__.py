"""Incremental contrastive learning (ICL): InfoNCE, the change ratio, NCE-II and the ICL objective."""

from bcjax.contrastive._losses import change_ratio
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
    "change_ratio",
    "icl_objective",
    "info_nce",
    "log_change_ratio",
    "log_similarity",
    "mixed_info_nce",
    "nce_ii",
    "nce_ii_from_log_ratio",
    "new_negative_mask",
    "old_negative_count",
)
