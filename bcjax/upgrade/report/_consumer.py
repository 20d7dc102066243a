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
  params = {"w": jnp.zeros((num_classes, d), x.dtype), "b": jnp.zeros(num_classes, x.dtype)}

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
    jnp.asarray(y),
    jnp.asarray(1.0 / c, dtype),
    num_classes=int(y.max()) + 1,
    max_iterations=int(max_iterations),
  )


def predict(params: dict, x) -> np.ndarray:
  """The consumer's predicted classes [n]."""
  w = params["w"]
  return np.asarray(jnp.argmax(jnp.asarray(x, w.dtype) @ w.T + params["b"], axis=1))
