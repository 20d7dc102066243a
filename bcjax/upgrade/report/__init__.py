r"""The go/no-go report of a bridge.

Is a fitted backward map good enough to keep the old index, or must the corpus be re-embedded? Every measure is computed
on held-out pairs the fit never saw, with a 95 % percentile bootstrap interval over those rows, and is named for what it
means:

* ``recall_recovery`` (with relevance pairs and an old index): Recall@k of the mapped new queries against the old
  index as a share of the reference's, the measure Drift-Adapter reports. The reference is re-embedding (new
  queries against the new model's index, when that index is given) or else the old model itself (old queries against
  the old index). Not measurable when the reference does no better than chance.
* ``neighbour_agreement`` (with an old index, no relevance needed): the share of the old model's top k that the
  mapped query also ranks in its top k.
* ``own_vector_hit_rate`` (always): how often a held-out item's mapped new embedding finds that item's old embedding
  among its top k, against the held-out old embeddings plus a sample of the index (exact copies of a target removed).
* ``alignment``: mean :math:`\lVert B(z_k) - z_{k-1}\rVert`, the same relative to mean :math:`\lVert z_{k-1}\rVert`,
  and mean cosine.
* ``consumer`` (with class labels): a logistic regression fitted on old embeddings of the training rows, scored on
  the held-out rows' old and mapped embeddings: both accuracies, the negative-flip rate, and whether the consumer is
  above the majority-class share at all (otherwise its flips mean nothing).

The verdict compares the primary measure with its own threshold: ``recall_recovery`` (if relevance was given, a
share of the reference's recall) with ``min_recovery``, else ``own_vector_hit_rate`` (an absolute rate) with
``min_hit_rate``. **bridge** only when the measure's whole 95 % interval is at or above the threshold, **re-index**
when its whole interval is below, **undecided** when the interval straddles it (more held-out pairs would decide),
**not measurable** when the measure cannot carry a verdict: the reference itself is not above chance, no held-out
row has relevance pairs, or the own-vector pool is so small that chance (k / pool) is more than
:data:`MAX_CHANCE_SHARE` of the threshold (without an index the pool is the held-out pairs' own old vectors alone:
40 of them at 200 pairs, where a random map hits a top 10 a quarter of the time). Each such finding is a
:class:`Reason` whose ``code`` (not its wording) decides.
"""

from bcjax.upgrade.report._evaluate import evaluate_upgrade
from bcjax.upgrade.report._records import VERDICTS
from bcjax.upgrade.report._records import MapSummary
from bcjax.upgrade.report._records import Measure
from bcjax.upgrade.report._records import Reason
from bcjax.upgrade.report._records import UpgradeReport
from bcjax.upgrade.report._render import finite_or_none
from bcjax.upgrade.report._render import report_json
from bcjax.upgrade.report._render import report_markdown
from bcjax.upgrade.report._render import report_summary

__all__ = (
  "evaluate_upgrade",
  "finite_or_none",
  "MapSummary",
  "Measure",
  "Reason",
  "report_json",
  "report_markdown",
  "report_summary",
  "UpgradeReport",
  "VERDICTS",
)
