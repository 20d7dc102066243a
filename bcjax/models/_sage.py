r"""GraphSAGE on ``jraph.GraphsTuple`` (flax NNX): the embedding model M_k of BC-Aligner's recommender experiments.

One layer (PyG ``SAGEConv`` defaults, Hamilton et al. 2017):

.. math::
  h_i' = W_l \cdot \frac{1}{\max(\deg_i, 1)} \sum_{(j \to i) \in E} h_j + b_l + W_r h_i,

where the sum runs over edges, so multi-edges count as often as they occur and an isolated node aggregates 0. Each
layer is followed by BatchNorm over all (real) nodes jointly and by ReLU except after the last layer.

BatchNorm in train mode subtracts the batch mean, so :math:`b_l` drops out of the output and its gradient is exactly
zero. Computed in floating point it is rounding noise instead, which Adam normalises into full-size steps
(:math:`\hat m / (\sqrt{\hat v} + \epsilon)` with noise far above ε): the bias then drifts with the summation order,
and eval-mode embeddings (where the running mean lags the drift) differ between any two device layouts. The layer
therefore holds :math:`b_l` out of the gradient while BatchNorm uses batch statistics: the exact gradient, and the
reference's parameter set (PyG's ``SAGEConv`` bias, fixed at its initial value as it is in exact arithmetic).

BatchNorm's running variance is flax's biased batch variance where PyTorch (the reference) stores the unbiased one,
n/(n−1) larger; only eval mode uses it, and the relative change of an eval-mode activation is about 1/(2n) with n the
number of nodes (below 5e-5 for the reference's graphs of 10⁴ nodes and more). Documented rather than matched.

References: W. Hamilton, R. Ying, J. Leskovec, "Inductive Representation Learning on Large Graphs", NeurIPS 2017;
W. Hu et al., "Learning Backward Compatible Embeddings", KDD 2022 (the reference code's ``PinSAGE`` module).
"""

from typing import cast

import jax
import jax.numpy as jnp
import jraph
from flax import nnx


def mean_aggregate(graph: jraph.GraphsTuple, h: jax.Array) -> jax.Array:
  """Mean of the senders' features over each receiver's incoming edges, [N, d].

  Mean of the senders' features over each receiver's incoming edges (multi-edges counted), [N, d]; 0 where a node has no
  incoming edge. Padded edges must point at a padding node (jraph's convention).

  Args:
    graph: the batch of graphs.
    h: node features, [N, d].

  Returns:
    The aggregated features, [N, d].
  """
  n = h.shape[0]
  total = jax.ops.segment_sum(h[graph.senders], graph.receivers, num_segments=n)
  degree = jax.ops.segment_sum(jnp.ones_like(graph.receivers, dtype=h.dtype), graph.receivers, num_segments=n)
  return total / jnp.maximum(degree, 1.0)[:, None]


def torch_linear_init(fan_in: int):
  """PyTorch's default Linear initialiser: U(±1/√fan_in) for weights and biases.

  Args:
    fan_in: the layer's input width.

  Returns:
    A flax initialiser ``init(key, shape, dtype)``.
  """
  bound = fan_in**-0.5

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


class SAGEConv(nnx.Module):
  """One GraphSAGE layer with mean aggregation, root weight and bias (PyG defaults, torch-default initialisation)."""

  def __init__(self, in_dim: int, out_dim: int, *, rngs: nnx.Rngs):
    init = torch_linear_init(in_dim)
    self.lin_l = nnx.Linear(in_dim, out_dim, kernel_init=init, bias_init=init, rngs=rngs)
    self.lin_r = nnx.Linear(in_dim, out_dim, use_bias=False, kernel_init=init, rngs=rngs)

  def __call__(self, graph: jraph.GraphsTuple, h: jax.Array, *, bias_gradient: bool = True) -> jax.Array:
    """Applies the SAGE layer to node features.

    ``bias_gradient=False`` holds :math:`b_l` out of the gradient (where a train-mode BatchNorm follows, whose exact
    gradient for it is zero).
    """
    bias = cast(nnx.Param, self.lin_l.bias)[...]  # lin_l is built with a bias
    bias = bias if bias_gradient else jax.lax.stop_gradient(bias)
    return mean_aggregate(graph, h) @ self.lin_l.kernel[...] + bias + self.lin_r(h)


class GraphSAGE(nnx.Module):
  """GraphSAGE: ``layers`` SAGE layers of width ``dim``, each followed by BatchNorm.

  ``layers`` SAGE layers of width ``dim``, each followed by BatchNorm (PyTorch momentum 0.1 = flax 0.9), ReLU between
  layers. ``__call__(graph, h, node_mask=None)`` maps input features [N, dim] to embeddings [N, dim]; ``node_mask`` [N]
  excludes padding nodes from the BatchNorm statistics.
  """

  def __init__(self, dim: int, layers: int, *, rngs: nnx.Rngs):
    if layers < 1:
      raise ValueError(f"GraphSAGE: `layers` must be >= 1, got {layers}")
    self.convs = nnx.List([SAGEConv(dim, dim, rngs=rngs) for _ in range(layers)])
    self.norms = nnx.List([nnx.BatchNorm(dim, momentum=0.9, epsilon=1e-5, rngs=rngs) for _ in range(layers)])

  def __call__(self, graph: jraph.GraphsTuple, h: jax.Array, node_mask: jax.Array | None = None) -> jax.Array:
    mask = None if node_mask is None else node_mask[:, None]
    # Compute in the parameters' dtype: float64 features into float32 BatchNorm statistics would be a lossy scatter.
    h = jnp.asarray(h, self.convs[0].lin_r.kernel.dtype)
    for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
      h = norm(conv(graph, h, bias_gradient=bool(norm.use_running_average)), mask=mask)
      if i < len(self.convs) - 1:
        h = jax.nn.relu(h)
    return h
