r"""Which model's space embeddings are in.

A fingerprint per model, stamped in the map, so that a map is never applied the wrong way round and a store holding two
models' vectors is reported instead of searched as one.

Two embedding models trained apart spread their unit embeddings differently: each has its own common direction
(embeddings are anisotropic) and its own principal axes. A model's fingerprint is a probabilistic PCA of its unit
embeddings (Tipping & Bishop 1999): the mean :math:`\mu`, the top r principal directions :math:`V` [r, D] with their
variances :math:`\lambda`, and the mean variance :math:`\sigma^2` of the other directions. An embedding is attributed
to the model under whose Gaussian :math:`\mathcal N(\mu, V^\top \mathrm{diag}(\lambda) V + \sigma^2 (I - V^\top V))`
its unit vector is likelier. On all-MiniLM-L6-v2 against paraphrase-MiniLM-L3-v2 (both 384-d, 17,830 sentences,
fingerprints from 150 to 2,000 of them) this attributes 99 % to 100 % of either model's rows correctly (the common
direction alone: 63-83 %). Where the widths differ the width already tells the spaces apart.
"""

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bcjax._unit import unit_rows

# Principal directions kept per fingerprint: at most 64, D / 2 and n / 4 (more, from few rows, fit their noise: from
# 150 MiniLM rows r = 64 misattributed 1.5 % of a model's own rows, r = n / 4 0.03 %).
MAX_COMPONENTS = 64


class SpaceStamp(NamedTuple):
  """A model's fingerprint (:mod:`bcjax.upgrade._spaces`).

  ``model``, its name as given (may be empty); ``mean`` [D] of its unit embeddings; ``components`` [r, D], the top
  principal directions; ``variances`` [r], theirs; ``residual``, the mean variance of the other directions. All
  float64.
  """

  model: str
  mean: np.ndarray
  components: np.ndarray
  variances: np.ndarray
  residual: float

  @property
  def dim(self) -> int:
    return int(self.mean.shape[0])


def space_stamp(z, model: str = "") -> SpaceStamp:
  """The fingerprint (:mod:`bcjax.upgrade._spaces`) of a model from its embeddings ``z`` [n, D] (at least 2 rows).

  Args:
    z: the model's embeddings, [n, D].
    model: the model's name.

  Returns:
    The :class:`SpaceStamp`.

  Raises:
    ValueError: when ``z`` is not a finite matrix of at least 2 rows and 2 columns.
  """
  z = np.asarray(z, np.float64)
  if z.ndim != 2 or z.shape[0] < 2 or z.shape[1] < 2 or not np.isfinite(z).all():
    raise ValueError(f"space_stamp: `z` must be a finite matrix [n >= 2, D >= 2], got shape {z.shape}")
  x = unit_rows(z, np.float64)
  mean = x.mean(axis=0)
  _, sv, vt = np.linalg.svd(x - mean, full_matrices=False)
  variances = sv**2 / len(x)
  d = x.shape[1]
  r = max(1, min(MAX_COMPONENTS, d // 2, len(x) // 4))
  floor = 1e-12 * max(float(variances[0]), 1e-300)
  residual = max(float(np.sum(variances[r:])) / (d - r), floor)
  return SpaceStamp(str(model), mean, vt[:r], np.maximum(variances[:r], floor), residual)


def log_likelihood(z, stamp: SpaceStamp) -> np.ndarray:
  """Each row's unit vector's log-density under ``stamp``'s Gaussian: [n] floats.

  Each row's unit vector's log-density (up to a constant shared by every stamp of its width) under ``stamp``'s Gaussian:
  [n] floats.
  """
  c = unit_rows(z, np.float64) - stamp.mean
  p = c @ stamp.components.T
  residual = np.sum(c * c, axis=1) - np.sum(p * p, axis=1)
  d, r = stamp.dim, len(stamp.variances)
  return -0.5 * (
    np.sum(p * p / stamp.variances, axis=1)
    + residual / stamp.residual
    + np.sum(np.log(stamp.variances))
    + (d - r) * np.log(stamp.residual)
  )


def attribute_rows(z, stamps: dict[str, SpaceStamp]) -> np.ndarray:
  """For each row of ``z`` [n, D], the name of the model it is likeliest under.

  For each row of ``z`` [n, D], the name (a key of ``stamps``) of the model it is likeliest under, among the stamps of
  ``z``'s width: [n] strings.

  Raises:
    ValueError: when no stamp has ``z``'s width.
  """
  z = np.asarray(z)
  names = [name for name, s in stamps.items() if s.dim == z.shape[1]]
  if not names:
    raise ValueError(f"attribute_rows: no stamp has width {z.shape[1]} (stamps: {list(stamps)})")
  scores = np.stack([log_likelihood(z, stamps[name]) for name in names], axis=1)
  return np.asarray(names)[np.argmax(scores, axis=1)]


# A row counts as another model's only when it is likelier under that model by this many nats (a log-likelihood
# ratio of e^25): MiniLM-L6 against -L3 rows score a median 100-190 nats for their own model, while the worst 0.1 %
# of a model's own rows, with fingerprints from only 150 pairs, lean up to about 22 nats the wrong way.
MARGIN_NATS = 25.0


def foreign_rows(z, own: Sequence[SpaceStamp], foreign: SpaceStamp) -> np.ndarray:
  """Which rows of ``z`` [n, D] are ``foreign``'s.

  Likelier under it than under every stamp of ``own`` by more than :data:`MARGIN_NATS`: [n] bools.
  """
  best_own = np.max(np.stack([log_likelihood(z, s) for s in own]), axis=0)
  return log_likelihood(z, foreign) - best_own > MARGIN_NATS


def margin(z, stamp: SpaceStamp, other: SpaceStamp) -> float:
  """How much likelier ``z``'s rows are under ``stamp`` than under ``other``.

  The mean log-likelihood ratio (positive: ``z`` looks like ``stamp``'s model).
  """
  return float(np.mean(log_likelihood(z, stamp) - log_likelihood(z, other)))


def index_space_error(index_rows, old: SpaceStamp, new: SpaceStamp, *, name: str = "index") -> str | None:
  """Why rows meant to be the old model's (an old index) are not, or None when they are.

  ``index_rows`` [m, D], a uniform sample of the index, are attributed to the two models' fingerprints (both of width
  D): rows likelier under the new model's by more than :data:`MARGIN_NATS` are the new model's. An index where they
  are at least 0.5 % of the sample (and three rows) is not the old model's alone; where they are the majority it is
  the new model's.

  Args:
    index_rows: a uniform sample of the index's rows, [m, D].
    old: the old model's fingerprint.
    new: the new model's fingerprint.
    name: the index's name, for the message.

  Returns:
    A sentence naming the share and the models, or None.
  """
  index_rows = np.asarray(index_rows)
  if len(index_rows) == 0 or old.dim != new.dim or index_rows.shape[1] != old.dim:
    return None
  foreign = int(np.sum(foreign_rows(index_rows, [old], new)))
  if foreign < max(3, int(np.ceil(0.005 * len(index_rows)))):
    return None
  new_name, old_name = new.model or "the new model", old.model or "the old model"
  what = f"{new_name}'s embeddings, not {old_name}'s" if foreign > len(index_rows) / 2 else "a mix of both models'"
  return (
    f"`{name}` holds {what}: {foreign} of {len(index_rows)} rows sampled uniformly are likelier under {new_name}'s "
    f"fingerprint than under {old_name}'s by more than {MARGIN_NATS:g} nats (a mean margin of "
    f"{margin(index_rows, new, old):.3g}); the index must be embedded by the old model, like the old side of the pairs"
  )
