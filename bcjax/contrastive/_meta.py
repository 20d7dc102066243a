r"""First-order meta-optimisation of ICL (section 3.3.1, eqs. 11–12).

Support set = old data with the NCE-II loss, query set = new data with the mixed-negative NCE-I loss:

.. math::
  \theta' = \theta - lr_s \nabla_\theta L^{II}(\theta) \quad (\text{repeated } n_{\rm inner} \text{ times}), \qquad
  \theta \leftarrow \theta - lr_q \nabla_{\theta} L^{I,X'}(\theta') \approx \theta - lr_q \nabla_{\theta'}
  L^{I,X'}(\theta'),

the last step first-order (the inner gradients are constants, so :math:`d\theta'/d\theta = I`), as in the reference
code. The outer update is applied to θ by the caller (SGD with lr_q as in the paper, or Adam as in the code).

Reference: Ji et al., "Unbiased and Efficient Self-Supervised Incremental Contrastive Learning", WSDM 2023.
"""

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bcjax import _checks

INNER_RULES = ("paper", "batch-ratio")
"""The rules of :func:`inner_step_count`: ``paper`` (ceil((1 - alpha) / alpha) support steps per query batch) and
``batch-ratio`` (old batches over new batches, as the reference code counts)."""

# loss_fn(params, aux, batch) -> (loss, aux): aux threads e.g. BatchNorm statistics through the steps.
LossFn = Callable[[Any, Any, Any], tuple[jax.Array, Any]]


def inner_step_count(
  alpha: float, *, rule: str = "paper", old_batches: int | None = None, new_batches: int | None = None
) -> int:
  r"""Support steps per query batch.

  :math:`\max(\lceil (1-\alpha)/\alpha \rceil, 1)` (the paper), or ``rule="batch-ratio"``: :math:`\max(\lfloor
  \#\text{old batches} / \#\text{new batches} \rfloor, 1)` (the reference code; e.g. 2 instead of 3 on PROTEINS at α =
  0.3).

  Args:
    alpha: α ∈ (0, 1).
    rule: one of :data:`INNER_RULES`.
    old_batches: the old data's batches per epoch (``batch-ratio``).
    new_batches: the new data's batches per epoch (``batch-ratio``).

  Returns:
    The number of support steps, at least 1.

  Raises:
    ValueError: α outside (0, 1), an unknown rule, or ``batch-ratio`` without positive batch counts.
  """
  alpha = _checks.as_float_in("inner_step_count", "alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
  if rule == "paper":
    # the tolerance keeps (1 - 0.5) / 0.5 = 1 from becoming 2 through rounding error
    return max(math.ceil((1.0 - alpha) / alpha - 1e-9), 1)
  if rule == "batch-ratio":
    try:
      old_batches = _checks.check_positive_int("inner_step_count", "old_batches", old_batches)
      new_batches = _checks.check_positive_int("inner_step_count", "new_batches", new_batches)
    except ValueError:
      raise ValueError(
        f"inner_step_count: rule 'batch-ratio' needs positive `old_batches` and `new_batches`, got "
        f"{old_batches!r} and {new_batches!r}"
      ) from None
    return max(old_batches // new_batches, 1)
  raise ValueError(f"inner_step_count: `rule` must be one of {INNER_RULES}, got {rule!r}")


def sgd_step(params, grads, learning_rate):
  """θ − lr·g over a pytree.

  The plain SGD step of the inner loop and of the learned-rate variants. Each leaf keeps its dtype whatever the rate's
  (a float64 rate must not promote float32 parameters).

  Args:
    params: θ, a pytree.
    grads: g, the same pytree.
    learning_rate: lr, a scalar (traced or not).

  Returns:
    θ − lr·g, the same pytree.
  """
  return jax.tree.map(lambda p, g: (p - learning_rate * g).astype(jnp.result_type(p)), params, grads)


class MetaGradient(NamedTuple):
  """:func:`first_order_meta_gradient`'s result.

  The query loss at the fast weights, its gradient there (applied to θ) and the fast weights themselves.
  """

  query_loss: jax.Array
  grads: Any  # ∇_{θ'} L^{I,X'}(θ'), to be applied to θ
  fast_params: Any  # θ'
  aux: Any
  support_losses: tuple | jax.Array  # a tuple, or [n_inner] for stacked support batches
  rate_state: Any = None  # the final state of a stateful rate function


def _default_value_and_grad(loss_fn: LossFn):
  return jax.value_and_grad(loss_fn, has_aux=True)


def first_order_meta_gradient(
  support_loss: LossFn,
  query_loss: LossFn,
  params,
  aux,
  support_batches,
  query_batch,
  support_learning_rates,
  *,
  value_and_grad: Callable[[LossFn], Callable] = _default_value_and_grad,
  update: Callable = sgd_step,
  stacked: bool = False,
  rate_state: Any = None,
) -> MetaGradient:
  r"""The query loss and its first-order meta-gradient after inner SGD steps (eq. 12).

  Runs the inner SGD steps on ``support_batches`` from θ and returns the query loss and its gradient at the fast weights
  θ' (eq. 12, first order). Pure; jittable when the loss functions and the rates are.

  Args:
    support_loss: ``loss(params, aux, batch) -> (loss, aux)`` of the inner steps; ``aux`` (e.g. BatchNorm
      statistics) is threaded through every call in order.
    query_loss: the same for the query batch.
    params: θ.
    aux: the initial auxiliary state.
    support_batches: one batch per inner step (n_inner of them), as a sequence (the steps are unrolled), or with
      ``stacked=True`` one pytree whose leaves carry the steps on a leading axis (the steps run as one
      ``jax.lax.scan``, so the step is traced once whatever n_inner).
    query_batch: the new-data batch.
    support_learning_rates: lr_s for every step, a sequence with one rate per step, or a callable
      ``rate(step, loss) -> lr`` that picks each step's rate from that step's support loss at the current fast
      weights (a learned-rate agent, section 3.3.2; called eagerly, so jittable only if it is). With
      ``rate_state`` the callable is functional, ``rate(rate_state, step, loss) -> (lr, rate_state)``, as a
      :func:`bcjax.learning_rate_agent`'s ``observe``; required for a learned rate with ``stacked=True``.
    value_and_grad: how a loss is differentiated: ``value_and_grad(loss)(params, aux, batch) -> ((loss, aux),
      grads)``; the default is ``jax.value_and_grad(loss, has_aux=True)``. Pass compiled (e.g. jitted, timed)
      equivalents to run the steps eagerly with one dispatch each.
    update: the inner step ``update(params, grads, lr) -> params``; plain SGD (:func:`sgd_step`) by default.
    stacked: whether ``support_batches`` is one stacked pytree (see above).
    rate_state: the initial state of a functional rate callable.

  Returns:
    :class:`MetaGradient` with the query loss and its gradient at θ', θ', the final ``aux``, the support losses and
    the final ``rate_state``.

  Raises:
    ValueError: a ``rate_state`` without a callable rate, or a number of rates unlike the support batches'.
  """
  rates = support_learning_rates
  if stacked:
    n_inner = jax.tree.leaves(support_batches)[0].shape[0]
  else:
    n_inner = len(support_batches)
  if rate_state is not None and not callable(rates):
    raise ValueError("first_order_meta_gradient: `rate_state` needs a callable `support_learning_rates`")
  if stacked and callable(rates) and rate_state is None:
    raise ValueError(
      "first_order_meta_gradient: with `stacked=True` a rate callable must be functional; pass `rate_state`"
    )
  if not callable(rates):
    if not isinstance(rates, (list, tuple)):
      rates = [rates] * n_inner
    if len(rates) != n_inner:
      raise ValueError(f"first_order_meta_gradient: {len(rates)} learning rates for {n_inner} support batches")
  support_grad, query_grad = value_and_grad(support_loss), value_and_grad(query_loss)

  def inner(carry, step, batch, fixed_rate=None):
    fast, aux, state = carry
    (loss, aux), grads = support_grad(fast, aux, batch)
    if rate_state is not None:
      lr, state = rates(state, step, loss)
    elif callable(rates):
      lr = rates(step, loss)
    else:
      lr = fixed_rate
    return (update(fast, grads, lr), aux, state), loss

  carry = (params, aux, rate_state)
  if stacked:
    fixed = None if callable(rates) else jax.numpy.asarray(rates)
    xs = (jax.numpy.arange(n_inner), support_batches, fixed)
    carry, losses = jax.lax.scan(lambda c, x: inner(c, x[0], x[1], x[2]), carry, xs)
  else:
    losses = []
    for step, batch in enumerate(support_batches):
      carry, loss = inner(carry, step, batch, None if callable(rates) else rates[step])
      losses.append(loss)
    losses = tuple(losses)
  fast, aux, rate_state = carry
  (loss, aux), grads = query_grad(fast, aux, query_batch)
  return MetaGradient(loss, grads, fast, aux, losses, rate_state)
