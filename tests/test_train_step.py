"""The one train-step builder (experiments/train_step.py) against float64 NumPy gradient descent, and its errors.

The experiments' steps are checked on their own losses (test_two_tower, test_bc_aligner, test_icl_experiment,
...) and across device counts (test_parallel); here the builder's own contract: the gradient, the descent, the state
it carries, the step count, the learning-rate scale, and eager equal to jit.
"""

import ast
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl.testing import absltest

from bcjax.parallel import DATA_AXIS, data_mesh
from experiments.train_step import (
  TrainState,
  fresh_state,
  make_train_step,
  optax_descent,
  place_inputs,
  require_divisible,
)
from tests._tolerance import assert_close


def _problem(seed: int = 0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(32, 5))
  y = x @ rng.normal(size=3 * 5).reshape(5, 3) + 0.1 * rng.normal(size=(32, 3))
  w0 = rng.normal(size=(5, 3))
  return x, y, w0


def _gradient(params, extra, inputs):
  """Least squares; ``extra`` counts the rows seen (state the loss carries forward)."""
  x, y = inputs
  residual = x @ params["w"] - y
  loss = 0.5 * jnp.mean(jnp.sum(residual**2, axis=1))
  grads = {"w": x.T @ residual / x.shape[0]}
  return grads, (extra + x.shape[0], {"loss": loss})


def _numpy_descent(x, y, w, rate, steps):
  losses = []
  for _ in range(steps):
    residual = x @ w - y
    losses.append(0.5 * np.mean(np.sum(residual**2, axis=1)))
    w = w - rate * x.T @ residual / x.shape[0]
  return w, losses


class TrainStepTest(absltest.TestCase):
  def test_sgd_steps_equal_float64_gradient_descent(self):
    x, y, w0 = _problem()
    rate, steps = 0.1, 4
    step = make_train_step(_gradient, optax_descent(optax.sgd(rate)))
    state = fresh_state(optax.sgd(rate), {"w": jnp.asarray(w0, jnp.float32)}, jnp.zeros((), jnp.int32))
    inputs = (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32))
    losses = []
    for _ in range(steps):
      state, metrics = step(state, inputs, None)
      losses.append(float(metrics["loss"]))
    want_w, want_losses = _numpy_descent(x, y, w0, rate, steps)
    assert_close(np.asarray(state.params["w"]), want_w, "network", precision="float32")
    assert_close(np.asarray(losses), np.asarray(want_losses), "network", precision="float32")
    self.assertEqual(int(state.step), steps)
    self.assertEqual(int(state.extra), steps * x.shape[0])  # the gradient's carried state comes back each step

  def test_scale_is_the_optimiser_at_the_scaled_rate_and_eager_equals_jit(self):
    x, y, w0 = _problem(1)
    inputs = (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), jnp.float32(0.25))
    gradient = lambda p, e, i: _gradient(p, e, i[:2])
    scaled = optax_descent(optax.sgd(0.2), scale=lambda i: i[2])
    params = {"w": jnp.asarray(w0, jnp.float32)}
    jitted = make_train_step(gradient, scaled)(fresh_state(optax.sgd(0.2), params, 0), inputs, None)[0]
    eager = make_train_step(gradient, scaled, jit=False)(fresh_state(optax.sgd(0.2), params, 0), inputs, None)[0]
    want, _ = _numpy_descent(x, y, w0, 0.2 * 0.25, 1)
    assert_close(np.asarray(jitted.params["w"]), want, "network", precision="float32")
    assert_close(np.asarray(eager.params["w"]), np.asarray(jitted.params["w"]), "network")

  def test_prepare_draws_the_inputs_from_the_state_the_batch_and_the_key(self):
    x, y, w0 = _problem(2)
    seen = []

    def prepare(state, batch, rng):
      seen.append(type(state))
      rows = jax.random.permutation(rng, batch[0].shape[0])[:8]
      return batch[0][rows], batch[1][rows]

    step = make_train_step(_gradient, optax_descent(optax.sgd(0.1)), prepare=prepare)
    batch = (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32))
    state = fresh_state(optax.sgd(0.1), {"w": jnp.asarray(w0, jnp.float32)}, jnp.zeros((), jnp.int32))
    state, _ = step(state, batch, jax.random.key(3))
    rows = np.asarray(jax.random.permutation(jax.random.key(3), x.shape[0])[:8])
    want, _ = _numpy_descent(x[rows], y[rows], w0, 0.1, 1)
    assert_close(np.asarray(state.params["w"]), want, "network", precision="float32")
    self.assertEqual(int(state.extra), 8)
    self.assertEqual(seen, [TrainState])

  def test_fresh_state_copies_so_the_donated_step_leaves_the_callers_arrays(self):
    params = {"w": jnp.ones((3, 2))}
    state = fresh_state(optax.adam(1e-2), params, {"stats": jnp.zeros(2)})
    step = make_train_step(lambda p, e, i: (jax.tree.map(jnp.ones_like, p), (e, {})), optax_descent(optax.adam(1e-2)))
    new, _ = step(state, (), None)
    self.assertTrue(state.params["w"].is_deleted())  # the step donated its state's buffers
    self.assertFalse(params["w"].is_deleted())
    np.testing.assert_array_equal(np.asarray(params["w"]), np.ones((3, 2)))  # the caller's array, unchanged
    self.assertEqual(int(new.step), 1)

  def test_a_mesh_without_specs_and_an_uneven_batch_are_refused(self):
    with self.assertRaisesRegex(ValueError, "`mesh` needs the `input_specs`"):
      make_train_step(_gradient, optax_descent(optax.sgd(0.1)), mesh=data_mesh(1))
    mesh = data_mesh(jax.device_count())
    require_divisible("step", mesh, batch_size=jax.device_count() * 4)
    if jax.device_count() > 1:
      with self.assertRaisesRegex(ValueError, r"`batch_size`=\d+ is not divisible by the \d+ devices"):
        require_divisible("step", mesh, batch_size=jax.device_count() * 4 + 1)

  def test_place_inputs_splits_what_the_specs_split_and_leaves_the_rest(self):
    mesh = data_mesh(1)
    specs = (jax.P(DATA_AXIS), jax.P())

    @jax.jit
    def place(a, b):
      return place_inputs(mesh, specs, (a, b))

    a, b = place(jnp.arange(4.0), jnp.ones(3))
    self.assertEqual(a.sharding.spec, jax.P(DATA_AXIS))
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))
    np.testing.assert_array_equal(np.asarray(b), np.ones(3))


class OneBuilderTest(absltest.TestCase):
  """The experiment stack has one TrainState and one step builder: no other experiment module defines a state
  class of that name, jits with donated arguments or applies an optimiser's updates (the row-sparse descent, which
  applies them to the table's rows, is the one parameter of the builder that must)."""

  def test_no_experiment_module_builds_its_own_step(self):
    root = Path(__file__).resolve().parents[1] / "experiments"
    patterns = ("class TrainState", "donate_argnums", "apply_updates")
    allowed = {"train_step.py": set(patterns), "two_tower/sparse.py": {"apply_updates"}}
    offenders = []
    for path in sorted(root.rglob("*.py")):
      rel, text = str(path.relative_to(root)), path.read_text()
      offenders += [f"{rel}: {p}" for p in patterns if p in text and p not in allowed.get(rel, set())]
    self.assertEqual(offenders, [])


def _experiment_package_imports() -> dict[str, set[str]]:
  """experiments' package -> the other experiments packages it imports (module-level and function-level)."""
  root = Path(__file__).resolve().parents[1] / "experiments"

  def package(module: str) -> str:
    return ".".join(module.split(".")[:2])

  edges: dict[str, set[str]] = {}
  for path in root.rglob("*.py"):
    source = package(".".join(path.relative_to(root.parent).with_suffix("").parts))
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "experiments":
        names = [f"experiments.{a.name}" for a in node.names] if node.module == "experiments" else [node.module]
      elif isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name.startswith("experiments.")]
      else:
        continue
      edges.setdefault(source, set()).update(package(n) for n in names if package(n) != source)
  return edges


class ExperimentStackTest(absltest.TestCase):
  """The data flow of the experiment stack is one way: the harness and the train step import no experiment's
  package (only the shared helpers), so neither can call back into a method module, and the packages of
  ``experiments`` import each other without a cycle."""

  def test_the_harness_and_the_train_step_import_no_experiment(self):
    edges = _experiment_package_imports()
    shared = {"experiments.common", "experiments.provenance"}
    self.assertLessEqual(edges.get("experiments.harness", set()), shared)
    self.assertEqual(edges.get("experiments.train_step", set()), set())
    self.assertIn("experiments.harness", edges["experiments.bc_aligner"])  # the scan sees real imports

  def test_the_experiment_packages_have_no_import_cycle(self):
    edges, state, cycles = _experiment_package_imports(), {}, []

    def visit(node, path):
      state[node] = "open"
      for nxt in sorted(edges.get(node, ())):
        if state.get(nxt) == "open":
          cycles.append([*path[path.index(nxt) :], nxt])
        elif nxt not in state:
          visit(nxt, [*path, nxt])
      state[node] = "done"

    for node in sorted(edges):
      if node not in state:
        visit(node, [node])
    self.assertEqual(cycles, [])


if __name__ == "__main__":
  absltest.main()
