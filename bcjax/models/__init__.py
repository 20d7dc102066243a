"""Embedding models (flax NNX)."""

from bcjax import _extras

_extras.require_extra("models", "bcjax.models")  # before the imports below, so a missing library names the extra


from bcjax.models._bipartite import BipartiteInputs
from bcjax.models._bipartite import BipartiteSAGE
from bcjax.models._bipartite import bipartite_inputs
from bcjax.models._bipartite import pad_bipartite_inputs
from bcjax.models._gcn import GCNConv
from bcjax.models._gcn import GCNEncoder
from bcjax.models._gcn import gcn_propagate
from bcjax.models._norm import MaskedBatchNorm
from bcjax.models._sage import GraphSAGE
from bcjax.models._sage import SAGEConv
from bcjax.models._sage import mean_aggregate
from bcjax.models._sage import torch_linear_init
from bcjax.models._two_tower import Tower
from bcjax.models._two_tower import TwoTower
from bcjax.models._two_tower import bag_mean
from bcjax.models._resnet import BasicBlock
from bcjax.models._resnet import ResNet18
from bcjax.models._resnet import SmallCNN


__all__ = (
  "bag_mean",
  "BasicBlock",
  "bipartite_inputs",
  "BipartiteInputs",
  "BipartiteSAGE",
  "gcn_propagate",
  "GCNConv",
  "GCNEncoder",
  "GraphSAGE",
  "MaskedBatchNorm",
  "mean_aggregate",
  "pad_bipartite_inputs",
  "ResNet18",
  "SAGEConv",
  "SmallCNN",
  "torch_linear_init",
  "Tower",
  "TwoTower",
)
