r"""A consumer model for judging a bridge: multinomial logistic regression fitted on the old model's embeddings.

It minimises scikit-learn's objective for ``LogisticRegression(C=c)`` (multinomial, unpenalised intercept),

.. math::
  c \sum_{i=1}^n -\log \mathrm{softmax}(W x_i + b)_{y_i} + \tfrac12 \lVert W \rVert_F^2,

with L-BFGS (:func:`optax.lbfgs`), divided by :math:`c\,n` for conditioning (same minimiser). A downstream team's
classifier trained on old embeddings is what breaks when the embeddings change; scoring it on bridged embeddings
gives the accuracy it keeps and its negative flips (:func:`bcjax.negative_flip_rate`).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bcjax._device import device_array
from bcjax._unit import unit_rows
from bcjax.metrics import negative_flip_rate
from bcjax.upgrade import _files
from bcjax.upgrade.report._measure import interval, sample_rows
from bcjax.upgrade.report._records import Measure, _reason


@functools.partial(jax.jit, static_argnames=("num_classes", "max_iterations"))
def _fit(x, y, inverse_c, *, num_classes, max_iterations):
  n, d = x.shape
  onehot = jax.nn.one_hot(y, num_classes, dtype=x.dtype)

  def objective(params):
    logits = x @ params["w"].T + params["b"]
    nll = -jnp.sum(onehot * jax.nn.log_softmax(logits), axis=1)
    return jnp.mean(nll) + 0.5 * inverse_c / n * jnp.sum(params["w"] ** 2)

  optimizer = optax.lbfgs()
  value_and_grad = optax.value_and_grad_from_state(objective)
  params = {"w": device_array(np.zeros((num_classes, d), x.dtype)), "b": device_array(np.zeros(num_classes, x.dtype))}

  def step(carry):
    params, state = carry
    value, grad = value_and_grad(params, state=state)
    updates, state = optimizer.update(grad, state, params, value=value, grad=grad, value_fn=objective)
    return optax.apply_updates(params, updates), state

  def keep_going(carry):
    _, state = carry
    count = optax.tree_utils.tree_get(state, "count")
    grad = optax.tree_utils.tree_get(state, "grad")
    return (count == 0) | ((count < max_iterations) & (optax.tree_utils.tree_norm(grad) >= 1e-6))

  params, _ = jax.lax.while_loop(keep_going, step, (params, optimizer.init(params)))
  return params


def fit_logistic_regression(x, y, *, c: float = 1.0, max_iterations: int = 500) -> dict:
  """Fits the consumer (:mod:`bcjax.upgrade.report._consumer`) on features ``x`` [n, d] and classes ``y`` [n] in [0, C).

  Returns ``{"w": [C, d], "b": [C]}`` (C = the largest class + 1).
  """
  x = jnp.asarray(x)
  y = np.asarray(y)
  if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1 or y.shape[0] != x.shape[0]:
    raise ValueError(
      f"fit_logistic_regression: `y` must be integer classes [n] = [{x.shape[0]}], got dtype "
      f"{y.dtype} and shape {y.shape}"
    )
  if y.size and y.min() < 0:
    raise ValueError(f"fit_logistic_regression: classes must be >= 0, got {y.min()}")
  if not c > 0:
    raise ValueError(f"fit_logistic_regression: `c` must be > 0, got {c!r}")
  dtype = jnp.float64 if x.dtype == jnp.float64 else jnp.float32
  return _fit(
    x.astype(dtype),
    device_array(np.asarray(y)),
    jnp.asarray(1.0 / c, dtype),
    num_classes=int(y.max()) + 1,
    max_iterations=int(max_iterations),
  )


def predict(params: dict, x) -> np.ndarray:
  """The consumer's predicted classes [n]."""
  w = params["w"]
  return np.asarray(jnp.argmax(device_array(np.asarray(x), w.dtype) @ w.T + params["b"], axis=1))


def consumer_measures(
  labels, z_prev, rows, zp, mapped, consumer_rows, normalize, max_rows, seed, reasons
) -> dict[str, Measure]:
  """The consumer's accuracy on old and mapped embeddings and its negative flips (:mod:`bcjax.upgrade.report`)."""
  labels = np.asarray(labels)
  if labels.ndim != 1 or labels.shape[0] != z_prev.shape[0] or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(
      f"evaluate_upgrade: `labels` must be integer classes, one per pair row [{z_prev.shape[0]}], got "
      f"dtype {labels.dtype} and shape {labels.shape}"
    )
  if consumer_rows is None or len(consumer_rows) == 0:
    raise ValueError("evaluate_upgrade: `labels` need `consumer_rows`, the training rows the consumer is fitted on")
  fit_rows = sample_rows(np.asarray(consumer_rows), max_rows, seed + 2)
  x = _files.read_rows(z_prev, fit_rows, np.float32)
  x = unit_rows(x) if normalize else x
  params = fit_logistic_regression(x, labels[fit_rows])
  y = labels[rows]

  old_pred = predict(params, unit_rows(zp) if normalize else zp)
  new_pred = predict(params, mapped)
  old_right, new_right = old_pred == y, new_pred == y
  # Chance for this consumer: always answering the training rows' most common class, scored on the held-out rows.
  majority = float(np.mean(y == np.bincount(labels[fit_rows]).argmax()))
  old_acc = interval(
    old_right,
    seed=seed,
    means="a logistic regression fitted on old embeddings, scored on the held-out rows' old embeddings",
    majority=majority,
  )
  measurable = old_acc.low > majority
  if not measurable:
    reasons.append(
      _reason(
        "consumer-at-majority",
        f"the consumer's accuracy on old embeddings ({old_acc.value:.3f}, 95 % interval down to "
        f"{old_acc.low:.3f}) is not above always answering the majority class ({majority:.3f}): its flips are "
        f"not measurable",
      )
    )
  return {
    "consumer_accuracy_old": old_acc._replace(measurable=measurable),
    "consumer_accuracy_bridged": interval(
      new_right, seed=seed, means="the same consumer scored on the mapped new embeddings", measurable=measurable
    ),
    "consumer_negative_flips": interval(
      old_right & ~new_right,
      seed=seed,
      means="share of held-out rows the consumer got right on old embeddings and wrong on mapped ones",
      check=float(negative_flip_rate(y, old_pred, new_pred)),
      measurable=measurable,
    ),
  }
