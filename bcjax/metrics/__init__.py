"""Evaluation metrics: ROC-AUC, negative flips, top-K ranking (Recall@K, AP@K/MAP@K) and chunked retrieval evaluation."""

from bcjax.metrics._auc import roc_auc
from bcjax.metrics._flips import negative_flip_rate
from bcjax.metrics._ranking import average_precision_at_k
from bcjax.metrics._ranking import mean_over_queries
from bcjax.metrics._ranking import recall_at_k
from bcjax.metrics._retrieval import evaluate_retrieval

__all__ = ("average_precision_at_k", "evaluate_retrieval", "mean_over_queries", "negative_flip_rate", "recall_at_k",
           "roc_auc")
