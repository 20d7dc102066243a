r"""The ICL graph encoder: a GCN on padded ``jraph.GraphsTuple`` batches with per-layer sum-pool readout (flax NNX).

One GCN layer (Kipf & Welling 2017; PyG ``GCNConv`` defaults: self-loops of weight 1, symmetric normalisation with
degrees counted on the receiver side):

.. math::
  h_i' = \sum_{j \in N(i) \cup \{i\}} \frac{1}{\sqrt{\hat d_i \hat d_j}} W h_j + b, \qquad
  \hat d_i = 1 + |\{(j \to i) \in E\}|,

followed by BatchNorm without affine parameters over the real nodes of the batch, LeakyReLU(0.01) and Dropout(0.5).
Self-loops: see :func:`gcn_propagate` (``self_loops="remaining"`` is PyG's ``gcn_norm``; identical on loop-free
graphs). BatchNorm's running variance is flax's biased batch variance where PyTorch stores the unbiased one (n/(n−1)
larger); only eval mode sees it, and the relative change of an eval-mode activation is about 1/(2n) for n real nodes
per batch. Measured on PROTEINS (batches of 32 graphs, 1,245 real nodes on average; 1/(2n) = 4.0e-4): replacing
the running variances by PyTorch's changes the eval-mode graph embeddings by 3.2e-4 in relative L1 (at most 3.6e-4
of the largest entry). Documented rather than matched.
The graph embedding concatenates the sum over each graph's nodes of every layer's output: with 2 layers of 32 it is
64-d (the reference's ``dim // layer_num``). It is not normalised; the cosine in the loss does that.

Reference: Ji et al., "Unbiased and Efficient Self-Supervised Incremental Contrastive Learning", WSDM 2023
(RingBDStack/ICL-Incremental-InfoNCE, ``gin.py``).
"""

import jax
import jax.numpy as jnp
import jraph
from flax import nnx

from bcjax.data._graph_batch import node_graph_ids, node_mask
from bcjax.models._norm import MaskedBatchNorm

SELF_LOOPS = ("always", "remaining")


def gcn_propagate(graph: jraph.GraphsTuple, h: jax.Array, *, self_loops: str = "always") -> jax.Array:
  r""":math:`\hat D^{-1/2}(A + I)\hat D^{-1/2} h` over the batch's edges, [N, d].

  Padding edges join padding nodes only, so they never reach a real node.

  ``self_loops="always"`` adds a loop of weight 1 to every node on top of the graph's edges (so a self-loop already
  in the data counts twice); ``"remaining"`` is PyTorch Geometric's ``gcn_norm`` (``add_remaining_self_loops``):
  the data's self-loops are replaced by exactly one loop per node. The two agree on graphs without self-loops, which
  is what :func:`bcjax.data.read_tu` returns by default (it removes them, as PyG's TU reader does).

  Args:
    graph: the batch of graphs.
    h: node features, [N, d].
    self_loops: ``always`` adds a loop of weight 1 to every node; ``remaining`` adds one only where a node has none
      (PyTorch Geometric's ``gcn_norm``).

  Returns:
    The propagated features, [N, d].

  Raises:
    ValueError: an unknown ``self_loops``.
  """
  if self_loops not in SELF_LOOPS:
    raise ValueError(f"gcn_propagate: `self_loops` must be one of {SELF_LOOPS}, got {self_loops!r}")
  n = h.shape[0]
  w = jnp.ones(graph.receivers.shape, h.dtype)
  if self_loops == "remaining":
    w = jnp.where(graph.senders == graph.receivers, jnp.zeros((), h.dtype), w)
  degree = 1.0 + jax.ops.segment_sum(w, graph.receivers, num_segments=n)
  inv_sqrt = jax.lax.rsqrt(degree)
  weight = (w * inv_sqrt[graph.senders] * inv_sqrt[graph.receivers])[:, None]
  return jax.ops.segment_sum(weight * h[graph.senders], graph.receivers, num_segments=n) + h / degree[:, None]


class GCNConv(nnx.Module):
  """One GCN layer: Glorot-uniform weight, zero bias (PyG defaults)."""

  def __init__(self, in_dim: int, out_dim: int, *, self_loops: str = "always", rngs: nnx.Rngs):
    if self_loops not in SELF_LOOPS:
      raise ValueError(f"GCNConv: `self_loops` must be one of {SELF_LOOPS}, got {self_loops!r}")
    self.linear = nnx.Linear(in_dim, out_dim, use_bias=False, kernel_init=nnx.initializers.glorot_uniform(), rngs=rngs)
    self.bias = nnx.Param(jnp.zeros((out_dim,), jnp.float32))
    self.self_loops = self_loops

  def __call__(self, graph: jraph.GraphsTuple, h: jax.Array, *, bias_gradient: bool = True) -> jax.Array:
    """Applies the convolution to node features.

    ``bias_gradient=False`` holds the bias out of the gradient: under a train-mode BatchNorm its exact gradient is zero,
    and the computed one is rounding noise that Adam would turn into full-size steps (see
    :class:`bcjax.models.GraphSAGE`).
    """
    bias = self.bias[...] if bias_gradient else jax.lax.stop_gradient(self.bias[...])
    return gcn_propagate(graph, self.linear(h), self_loops=self.self_loops) + bias


class GCNEncoder(nnx.Module):
  """A GCN graph encoder.

  ``__call__(graph, key=None) -> [num_graphs + 1, layers * hidden]`` graph embeddings (the last row, and rows of empty
  graphs, are padding). Dropout is applied when ``key`` is given; BatchNorm uses batch statistics in train mode
  (``model.train()``) and running ones in eval mode, PyTorch momentum 0.1 (flax 0.9), eps 1e-5. With ``axis_name`` the
  batch's graphs are split over that mesh axis and BatchNorm's statistics are those of all the devices' real nodes
  (:class:`MaskedBatchNorm`).
  """

  def __init__(
    self,
    in_features: int,
    hidden: int = 32,
    layers: int = 2,
    dropout: float = 0.5,
    *,
    self_loops: str = "always",
    axis_name: str | None = None,
    rngs: nnx.Rngs,
  ):
    if layers < 1 or hidden < 1 or in_features < 1:
      raise ValueError(
        f"GCNEncoder: `in_features`, `hidden` and `layers` must be >= 1, got {in_features}, {hidden}, {layers}"
      )
    if not 0.0 <= dropout < 1.0:
      raise ValueError(f"GCNEncoder: `dropout` must be in [0, 1), got {dropout}")
    self.dropout = dropout
    dims = [in_features] + [hidden] * layers
    self.convs = nnx.List([GCNConv(a, b, self_loops=self_loops, rngs=rngs) for a, b in zip(dims[:-1], dims[1:])])
    self.norms = nnx.List(
      [
        MaskedBatchNorm(
          hidden, axis_name=axis_name, use_bias=False, use_scale=False, momentum=0.9, epsilon=1e-5, rngs=rngs
        )
        for _ in range(layers)
      ]
    )

  @property
  def out_features(self) -> int:
    return sum(norm.num_features for norm in self.norms)

  def __call__(self, graph: jraph.GraphsTuple, key: jax.Array | None = None) -> jax.Array:
    real = node_mask(graph)
    segments = node_graph_ids(graph)
    num_graphs = graph.n_node.shape[0]
    keys = [None] * len(self.convs) if key is None else list(jax.random.split(key, len(self.convs)))
    h = jnp.asarray(graph.nodes, self.convs[0].linear.kernel.dtype)  # compute in the parameters' dtype
    pooled = []
    for conv, norm, k in zip(self.convs, self.norms, keys):
      h = jax.nn.leaky_relu(
        norm(conv(graph, h, bias_gradient=bool(norm.use_running_average)), mask=real[:, None]), 0.01
      )
      if k is not None and self.dropout > 0.0:
        keep = jax.random.bernoulli(k, 1.0 - self.dropout, h.shape)
        h = jnp.where(keep, h / (1.0 - self.dropout), 0.0)
      h = jnp.where(real[:, None], h, 0.0)
      pooled.append(jax.ops.segment_sum(h, segments, num_segments=num_graphs))
    return jnp.concatenate(pooled, axis=-1)
