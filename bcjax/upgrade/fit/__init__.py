r"""Fitting a backward map between two embedding models from paired rows, with every choice made on held-out pairs.

Given the same items embedded by the old model (:math:`z_{k-1}`, [n, D_(k-1)]) and the new one (:math:`z_k`,
[n, D_k]), each kind fits :math:`B(z) = W z + b` or a residual MLP; every kind handles a shift between the spaces
(centring, and a bias stored with the map):

* ``linear``: :math:`W = \bar C (\bar G + \gamma I)^{-1}` on centred statistics (:mod:`bcjax.upgrade.fit._moments`),
  :math:`b = \mu_{k-1} - W\mu_k`, the ridge :math:`\gamma = \alpha\,\mathrm{tr}\,\bar G / D_k` chosen by K-fold
  cross-validation over the training pairs (by out-of-fold retrieval: how highly each held-out prediction ranks its
  own old vector among a sample of old vectors; the squared error breaks ties) (:math:`\alpha = 0` is least squares,
  minimum-norm when
  :math:`\bar G` is singular).
* ``orthogonal``: the centred isometry :math:`Q(z - \mu_k) + \mu_{k-1}`, Q from (projection) Procrustes on the
  centred statistics (:func:`bcjax.alignment.orthogonal_transform` with ``bias``); nothing to choose.
* ``affine``: ridge regression shrunk towards a scaled isometry instead of towards zero (Q the polar factor
  :math:`U V^\top` of :math:`\bar C = U \Sigma V^\top`),
  :math:`W = (\bar C + \gamma s Q)(\bar G + \gamma I)^{-1}` with :math:`s = \langle Q, \bar C\rangle /
  \mathrm{tr}(Q\bar G Q^\top)`, or, for equal widths, towards the identity (two models whose spaces already
  roughly agree, e.g. sharing token embeddings); then optionally reduced to rank r (the fitted values' top-r
  principal subspace, Izenman 1975); the target, :math:`\alpha` and r are chosen by cross-validation. With fewer
  pairs than dimensions this is what keeps
  the map close to a rotation where the data say little (the polar factor is taken on the directions the pairs
  span, so the directions they do not span map to zero, as with ridge).
* ``mlp``: :func:`bcjax.alignment.mlp_transform` warm-started from the cross-validated ``affine`` map (its linear
  branch is that map, its MLP branch starts at zero), trained with Adam on minibatches streamed from the pairs,
  stopped early on the validation pairs' error; the hidden width is chosen on them too.
* ``auto``: fits every kind on the training pairs and keeps the one whose mapped validation rows rank their own old
  vector highest among the validation and (up to 10,000) training old vectors (the mean own-vector rank score: a
  top-k hit rate saturates at 1 for every decent map); a simpler kind within one paired standard error of the best
  is preferred, and the reason is returned. With fewer than 50 validation pairs it ranks the closed-form kinds
  by their cross-validated error instead (and says so).

Hubness correction (CSLS, :mod:`bcjax.upgrade._hubness`): with ``hubness="auto"`` (cosine retrieval) the chosen
kind is judged on the training pairs served as the final map will serve an index, so it has power from a couple of
hundred pairs on (validation pairs alone number 20 at 200 pairs): the folds split in two halves, the kind (the MLP by
its affine branch) fitted on each half with the chosen settings, its images of that half's rows the correction's
reference (in sample, as the final map's reference is), the other half's rows (of the cross-validation's sample, up
to 2,000) mapped as queries ranking their own old rows among that half's old rows with and without the correction
(no old row has its twin in the reference, as in an index). It is kept unless it lowers the mean own-vector rank
score by more than one paired standard error: where the pairs cannot tell (no rank changes, as when a few hundred
pairs all rank their own rows first), CSLS stays, since a regression's image of a space has hubs. The kept
correction's reference is the final map's image of up to :data:`HUBNESS_REFERENCE_ROWS` training and validation pairs.
The same half-fits give the map's score scale for rows written through it (:mod:`bcjax.upgrade._scale`).

Closed-form kinds stream their rows into float64 sums, so pairs larger than memory fit exactly as in memory; the
final closed-form map is refitted on the training and validation pairs together.
"""

from bcjax.upgrade.fit._closed_form import closed_form
from bcjax.upgrade.fit._closed_form import moments_mse
from bcjax.upgrade.fit._mlp import MlpFit
from bcjax.upgrade.fit._mlp import train_mlp
from bcjax.upgrade.fit._moments import PairMoments
from bcjax.upgrade.fit._moments import pair_moments
from bcjax.upgrade.fit._records import HUBNESS_MODES
from bcjax.upgrade.fit._records import Candidate
from bcjax.upgrade.fit._records import UPGRADE_KINDS
from bcjax.upgrade.fit._records import PairSplit
from bcjax.upgrade.fit._records import SplitError
from bcjax.upgrade.fit._records import UpgradeFit
from bcjax.upgrade.fit._records import split_pairs
from bcjax.upgrade.fit._workflow import fit_upgrade

__all__ = (
  "Candidate",
  "closed_form",
  "fit_upgrade",
  "HUBNESS_MODES",
  "MlpFit",
  "moments_mse",
  "pair_moments",
  "PairMoments",
  "PairSplit",
  "split_pairs",
  "SplitError",
  "train_mlp",
  "UPGRADE_KINDS",
  "UpgradeFit",
)
