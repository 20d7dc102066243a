"""Whether a store holds one model's vectors.

A uniform sample of the store is attributed to the map's two models by their fingerprints
(:mod:`bcjax.upgrade._spaces`).
"""

import math

import numpy as np

from bcjax.upgrade import _spaces
from bcjax.upgrade._map import UpgradeMap
from bcjax.upgrade.stores._protocol import MixedSpaceError, SpaceCheck, VectorStore

MIXED_SHARE = 0.005
"""The share of a store's sample (and at least three rows) that, attributed to the new model, makes it mixed.

A model's own rows lean the other way by more than :data:`~bcjax.upgrade._spaces.MARGIN_NATS` for well under 0.1 %
of them, so a 2,000-row uniform sample of one model's rows reaches 0.5 % (10 rows) with probability below 5e-5, while
a store holding 1.35 % raw new-model rows shows 27 in expectation and fewer than 10 with probability about 5e-5."""


def _attribute(sample: np.ndarray, upgrade_map: UpgradeMap) -> SpaceCheck:
  """The :class:`SpaceCheck` of a sample of a store; raises :class:`MixedSpaceError` for a mixed one."""
  spaces = upgrade_map.spaces
  if spaces is None or spaces["new"].dim != upgrade_map.dims[0] or len(sample) == 0:
    return SpaceCheck(len(sample), 0, len(sample))  # different widths cannot mix; no fingerprints cannot tell
  # The old space holds the old model's vectors and the map's images of new-model vectors (bridge_items writes them).
  own = [spaces[side] for side in ("old", "bridged") if side in spaces]
  new_rows = int(np.sum(_spaces.foreign_rows(sample, own, spaces["new"])))
  found = SpaceCheck(len(sample) - new_rows, new_rows, len(sample))
  if new_rows >= max(3, math.ceil(MIXED_SHARE * len(sample))):
    new, old = spaces["new"].model or "the new model", spaces["old"].model or "the old model"
    raise MixedSpaceError(
      f"the store mixes two models' vectors: of {found.sampled} rows sampled uniformly, {found.new} look like "
      f"{new}'s (likelier under its fingerprint by more than {_spaces.MARGIN_NATS:g} nats) and {found.old} like "
      f"{old}'s space; bridged queries would compare incomparable scores. Re-embed the store, or write the new "
      f"model's vectors through the map (bridge_items) instead"
    )
  return found


def check_store_space(
  store: VectorStore, upgrade_map: UpgradeMap, *, sample_rows: int = 2000, seed: int = 0
) -> SpaceCheck:
  """Attributes a uniform sample of the store's vectors to the map's old and new models (their fingerprints).

  Args:
    store: the old store (:class:`VectorStore`); its ``sample`` draws rows uniformly at random.
    upgrade_map: the fitted map, new -> old, with the fingerprints :func:`~bcjax.upgrade.fit_upgrade` stamps.
    sample_rows: stored rows drawn for the attribution, at most.
    seed: seeds the store's sample.

  Returns:
    A :class:`SpaceCheck`: ``new`` counts the rows likelier under the new model's fingerprint than under the old
    model's and the bridged rows' (the map's images) by a clear margin (:data:`~bcjax.upgrade._spaces.MARGIN_NATS`).

  Raises:
    MixedSpaceError: when the new model holds at least :data:`MIXED_SHARE` of the sample (and three rows): the store
      mixes spaces.
    ValueError: when the store's width is not the map's old width.
  """
  _check_width(store, upgrade_map)
  return _attribute(store.sample(sample_rows, seed), upgrade_map)


def _check_width(store: VectorStore, upgrade_map: UpgradeMap) -> None:
  d_prev = upgrade_map.dims[0]
  if store.dim != d_prev:
    raise ValueError(f"the store holds {store.dim}-d vectors; the map maps to the old model's D_(k-1)={d_prev}")
