"""Gramian estimation (Krichene et al., ICLR 2019).

All-pairs penalties in Gramian form, SAGram / SOGram estimators and candidate-sampling baselines.
"""

from bcjax.gramian._estimators import GramianUpdateFn
from bcjax.gramian._estimators import GramianInitFn
from bcjax.gramian._estimators import BatchGramianState
from bcjax.gramian._estimators import GramianEstimate
from bcjax.gramian._estimators import GramianEstimator
from bcjax.gramian._estimators import SAGramState
from bcjax.gramian._estimators import SOGramState
from bcjax.gramian._estimators import batch_gramian
from bcjax.gramian._estimators import project_psd
from bcjax.gramian._estimators import sagram
from bcjax.gramian._estimators import sampling_probabilities
from bcjax.gramian._estimators import sogram
from bcjax.gramian._full import full_gramian
from bcjax.gramian._penalty import cross_gramian
from bcjax.gramian._penalty import double_sum_penalty
from bcjax.gramian._penalty import global_orthogonal_penalty
from bcjax.gramian._penalty import gramian
from bcjax.gramian._penalty import gramian_form_penalty
from bcjax.gramian._penalty import gramian_penalty
from bcjax.gramian._penalty import low_rank_prior_penalty
from bcjax.gramian._penalty import penalty_surrogate
from bcjax.gramian._penalty import prior_penalty
from bcjax.gramian._sampled_softmax import sampled_softmax_loss

__all__ = (
  "GramianUpdateFn",
  "GramianInitFn",
  "BatchGramianState",
  "GramianEstimate",
  "GramianEstimator",
  "SAGramState",
  "SOGramState",
  "batch_gramian",
  "cross_gramian",
  "double_sum_penalty",
  "full_gramian",
  "global_orthogonal_penalty",
  "gramian",
  "gramian_form_penalty",
  "gramian_penalty",
  "low_rank_prior_penalty",
  "penalty_surrogate",
  "prior_penalty",
  "project_psd",
  "sagram",
  "sampled_softmax_loss",
  "sampling_probabilities",
  "sogram",
)
