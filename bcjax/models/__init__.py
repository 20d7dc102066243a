"""Embedding models (flax NNX)."""

from bcjax.models._two_tower import Tower
from bcjax.models._two_tower import TwoTower
from bcjax.models._two_tower import bag_mean

__all__ = ("Tower", "TwoTower", "bag_mean")
