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

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from bcjax.gramian import sampled_softmax_loss
from bcjax.parallel import DATA_AXIS, split_rows
from experiments.two_tower.data import TrainData, gather
from experiments.two_tower.sparse import descend
from experiments.two_tower.train import TrainState


def make_softmax_step(
  graphdef: nnx.GraphDef,
  optimizer,
  *,
  batch_size: int,
  temperature: float,
  correct: bool = True,
  mesh: jax.sharding.Mesh | None = None,
):
  """``train_step(state, data, rng) -> (state, metrics)`` (state donated) minimising the in-batch softmax, with the
  logQ correction unless ``correct=False``. Metrics: ``loss`` (and ``observed_loss``, the same, so the curves of
  every method read alike)."""
  if not temperature > 0:
    raise ValueError(f"make_softmax_step: `temperature` must be positive, got {temperature}")
  axis = None if mesh is None else DATA_AXIS
  if mesh is not None and batch_size % mesh.devices.size:
    raise ValueError(
      f"make_softmax_step: `batch_size`={batch_size} is not divisible by the {mesh.devices.size} "
      f"devices of the mesh (--devices)"
    )

  def loss_fn(params, groups, log_q: jax.Array):
    model = nnx.merge(graphdef, params)
    u = model.embed_left(groups[0])
    v = model.embed_right(groups[1])
    labels = jnp.arange(u.shape[0])
    if axis is not None:  # every device's right entities are candidates; this device's positives sit at its offset
      v, log_q = jax.lax.all_gather((v, log_q), axis, tiled=True)
      labels = labels + jax.lax.axis_index(axis) * u.shape[0]
    correction = log_q if correct else None
    loss = sampled_softmax_loss(u / temperature, v, labels, log_q=correction, axis_name=axis)
    return loss, {"loss": loss, "observed_loss": loss}

  grad_fn = jax.grad(loss_fn, has_aux=True)
  if mesh is not None:
    grad_fn = jax.shard_map(
      grad_fn, mesh=mesh, in_specs=(jax.P(), jax.P(DATA_AXIS), jax.P(DATA_AXIS)), out_specs=jax.P()
    )

  @functools.partial(jax.jit, donate_argnums=(0,))
  def train_step(state: TrainState, data: TrainData, rng: jax.Array):
    pairs = jax.random.randint(rng, (batch_size,), 0, data.num_pairs)
    right = data.pair_right[pairs]
    groups, log_q = (
      (gather(data.left_groups, data.pair_left[pairs]), gather(data.right_groups, right)),
      data.right_log_q[right],
    )
    place = None
    if mesh is not None:
      log_q, place = split_rows(mesh, log_q), functools.partial(split_rows, mesh)
    params, opt_state, metrics = descend(optimizer, grad_fn, state.params, state.opt_state, groups, log_q, place=place)
    return state._replace(params=params, opt_state=opt_state, step=state.step + 1), metrics

  return train_step
