r"""The baseline practitioners use: in-batch sampled softmax with the logQ correction (Yi et al., RecSys 2019;
TensorFlow
Recommenders' ``Retrieval`` task).

Each step draws B training pairs uniformly; every pair's right entity is the positive of its left entity and a
negative of the other B - 1 left entities:

.. math::
  \ell_i = -s_{ii} + \log \sum_j \exp(s_{ij}), \qquad s_{ij} = \langle u_i, v_j \rangle / \tau - \log Q_j,

with :math:`Q_j` the probability that right entity j is in the batch, proportional to its training-pair frequency
(known here: counted once from the training pairs, ``TrainData.right_log_q``). The loss is
:func:`bcjax.gramian.sampled_softmax_loss`; with a mesh each device holds
a block of the pairs and the candidates are every device's right entities (an all-gather), so the negatives are the
global batch's.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from bcjax.gramian import sampled_softmax_loss
from bcjax.parallel import DATA_AXIS
from experiments.train_step import TrainState, make_train_step, require_divisible
from experiments.two_tower.data import TrainData, gather
from experiments.two_tower.sparse import descent


class SoftmaxInputs(NamedTuple):
  """One step's (left, right) bags of the B pairs and log Q of each pair's right entity; all split over a mesh."""

  groups: tuple
  log_q: jax.Array  # [B]


def softmax_train_step(
  graphdef: nnx.GraphDef,
  optimizer,
  *,
  batch_size: int,
  temperature: float,
  correct: bool = True,
  mesh: jax.sharding.Mesh | None = None,
):
  """``train_step(state, data, rng) -> (state, metrics)`` (:func:`experiments.train_step.make_train_step`, state
  donated) minimising the in-batch softmax, with the logQ correction unless ``correct=False``. Metrics: ``loss`` (and
  ``observed_loss``, the same, so the curves of every method read alike)."""
  if not temperature > 0:
    raise ValueError(f"softmax_train_step: `temperature` must be positive, got {temperature}")
  axis = None if mesh is None else DATA_AXIS
  require_divisible("softmax_train_step", mesh, batch_size=batch_size)

  def loss_fn(params, extra, inputs: SoftmaxInputs):
    model = nnx.merge(graphdef, params)
    u = model.embed_left(inputs.groups[0])
    v = model.embed_right(inputs.groups[1])
    log_q = inputs.log_q
    labels = jnp.arange(u.shape[0])
    if axis is not None:  # every device's right entities are candidates; this device's positives sit at its offset
      v, log_q = jax.lax.all_gather((v, log_q), axis, tiled=True)
      labels = labels + jax.lax.axis_index(axis) * u.shape[0]
    correction = log_q if correct else None
    loss = sampled_softmax_loss(u / temperature, v, labels, log_q=correction, axis_name=axis)
    return loss, (extra, {"loss": loss, "observed_loss": loss})

  def prepare(state: TrainState, data: TrainData, rng: jax.Array) -> SoftmaxInputs:
    pairs = jax.random.randint(rng, (batch_size,), 0, data.num_pairs)
    right = data.pair_right[pairs]
    groups = (gather(data.left_groups, data.pair_left[pairs]), gather(data.right_groups, right))
    return SoftmaxInputs(groups, data.right_log_q[right])

  return make_train_step(
    jax.grad(loss_fn, has_aux=True),
    descent(optimizer),
    prepare=prepare,
    mesh=mesh,
    input_specs=SoftmaxInputs(jax.P(DATA_AXIS), jax.P(DATA_AXIS)),
  )
