"""Evaluation metrics.

ROC-AUC and its DeLong interval, negative flips, top-K ranking (Recall@K, AP@K/MAP@K), chunked retrieval evaluation and
paired bootstrap intervals of a difference between two systems.
"""

from bcjax.metrics._auc import AucInterval
from bcjax.metrics._auc import roc_auc
from bcjax.metrics._auc import roc_auc_interval
from bcjax.metrics._bootstrap import BootstrapInterval
from bcjax.metrics._bootstrap import bootstrap_means
from bcjax.metrics._bootstrap import paired_bootstrap
from bcjax.metrics._flips import negative_flip_rate
from bcjax.metrics._ranking import average_precision_at_k
from bcjax.metrics._ranking import mean_over_queries
from bcjax.metrics._ranking import recall_at_k
from bcjax.metrics._retrieval import evaluate_retrieval

__all__ = (
  "AucInterval",
  "BootstrapInterval",
  "bootstrap_means",
  "average_precision_at_k",
  "evaluate_retrieval",
  "mean_over_queries",
  "negative_flip_rate",
  "paired_bootstrap",
  "recall_at_k",
  "roc_auc",
  "roc_auc_interval",
)
