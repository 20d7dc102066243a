"""Embedding models (flax NNX)."""

from bcjax.models._sage import GraphSAGE
from bcjax.models._sage import SAGEConv
from bcjax.models._sage import mean_aggregate
from bcjax.models._two_tower import Tower
from bcjax.models._two_tower import TwoTower
from bcjax.models._two_tower import bag_mean

__all__ = ("GraphSAGE", "SAGEConv", "Tower", "TwoTower", "bag_mean", "mean_aggregate")
