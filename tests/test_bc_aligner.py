"""The BC-Aligner experiment's parts against independent references: the bipartite model's inputs (NumPy), the
joint loss of a train step (NumPy float64 from the same forward pass), the reference's BPR sampler, exact Recall@K
with the reference's exclusion rule (scikit-learn's recall_score), post-hoc B_k recovering a known map and the
consumers. The report is tested in test_bc_aligner_report, the command line in test_bc_aligner_cli."""

import dataclasses
import pickle
import sys
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from absl.testing import absltest
from flax import nnx
from sklearn.metrics import recall_score, roc_auc_score

from bcjax.alignment import (
  PosthocFit,
  affine_transform,
  fit_posthoc,
  linear_transform,
)
from bcjax.data import synthetic_evolving_graph
from bcjax.metrics import evaluate_retrieval
from bcjax.models import BipartiteSAGE, bipartite_inputs
from experiments import harness
from experiments.bc_aligner import train as train_module
from experiments.bc_aligner.configs import PRESETS
from experiments.bc_aligner.consumers import (
  ConsumerMLP,
  above_chance,
  flip_rate,
  predict,
  reference_check,
  score,
  train_consumer,
)
from experiments.bc_aligner.data import Batch, BPRSampler, attribute_sizes, version_data
from experiments.bc_aligner.report import (
  table_3,
)
from experiments.bc_aligner.train import (
  AlignTarget,
  StepInputs,
  Trained,
  apply_model,
  bc_train_step,
  fold_batch,
  lr_scale,
  model_like,
  new_model,
  single_step_error,
  train_posthoc,
  trained_checkpoint,
)
from experiments.bc_methods import POSTHOC_LOSS
from experiments.common import adam
from experiments.train_step import fresh_state
from tests._tolerance import assert_close

CFG = PRESETS["test"]


def small_versions():
  g = synthetic_evolving_graph(300, 150, 4000, seed=2)
  return g, version_data(g)


class BipartiteModelTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_inputs_against_numpy(self):
    # 3 users, 4 items; item 0: categories {0, 2} + brand 1; item 1: category 1; item 2: brand 0; item 3: nothing
    cats = (np.array([0, 0, 1]), np.array([0, 2, 1]))
    brands = (np.array([0, 2]), np.array([1, 0]))
    inputs = bipartite_inputs([0, 1, 2], [0, 1, 3], 3, 4, [cats, brands])
    model = BipartiteSAGE((3, 2), 5, 2, rngs=nnx.Rngs(0))
    x = np.asarray(model.encode(inputs), np.float64)
    c, b = np.asarray(model.tables[0].embedding[...]), np.asarray(model.tables[1].embedding[...])
    user = np.asarray(model.user_vector[...])[0]
    expected = np.stack([user, user, user, (c[0] + c[2]) / 2 + b[1], c[1], b[0], np.zeros(5)])
    assert_close(x, expected)
    assert_close(float(np.std(np.asarray(model.user_vector[...]))), 0.1, "statistical", rtol=0, atol=0.08)
    np.testing.assert_array_equal(inputs.graph.senders, [3, 4, 6, 0, 1, 2])  # both directions, items offset by U,
    np.testing.assert_array_equal(inputs.graph.receivers, [0, 1, 2, 3, 4, 6])  # sorted by receiver

  def test_bad_interactions(self):
    with self.assertRaisesRegex(ValueError, "outside 2 users x 2 items"):
      bipartite_inputs([0, 2], [0, 1], 2, 2, [])


def np_loss(h, batch, target, w, history, kind, weight_decay, lam):
  """float64 NumPy reference of the joint loss (the reference code's normalisation)."""
  h = np.asarray(h, np.float64)
  m = np.asarray(batch.mask)
  u, p, n = (np.asarray(a)[m] for a in (batch.user, batch.pos, batch.neg))
  zu, zp, zn = h[u], h[p], h[n]
  bpr = np.mean(np.logaddexp(0.0, (zu * zn).sum(1) - (zu * zp).sum(1)))
  reg = 0.5 * np.mean((zu**2 + zp**2 + zn**2).sum(1))
  z_prev = np.asarray(target.z_prev, np.float64)
  align = 0.0
  for rows in (u, p, n):
    delta = h[rows] @ np.asarray(w, np.float64).T - z_prev[rows]
    terms = [np.mean(delta**2)]
    if kind == "linear-mloss":
      for w_j in reversed(history):
        delta = delta @ np.asarray(w_j, np.float64).T
        terms.append(np.mean(delta**2))
    align += np.mean(terms) if kind == "linear-mloss" else terms[0]
  return bpr + weight_decay * reg + lam * align


class TrainStepTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_joint_loss_matches_numpy(self):
    g, versions = small_versions()
    vd = versions[2]
    model = new_model(attribute_sizes(g), 2, 12, jax.random.key(0))
    key = jax.random.key(1)
    history = (0.3 * jax.random.normal(key, (8, 10)), 0.3 * jax.random.normal(jax.random.fold_in(key, 1), (10, 6)))
    z_prev = jax.random.normal(jax.random.fold_in(key, 2), (vd.num_nodes, 6))
    w = 0.3 * jax.random.normal(jax.random.fold_in(key, 3), (6, 12))
    batch = BPRSampler(vd.split, 256).epoch(np.random.default_rng(0))[-1]  # the partial, padded batch
    self.assertFalse(bool(batch.mask.all()))
    h = nnx.merge(model.train_def, model.params, model.batch_stats)(vd.inputs)
    for kind in ("linear-sloss", "linear-mloss"):
      params = {"model": model.params, "w": w}
      state = fresh_state(adam(1e-3), params, model.batch_stats)
      step = bc_train_step(model.train_def, kind, 1e-3, 0.01, 16.0)
      target = AlignTarget(z_prev, history)
      state, metrics = step(state, StepInputs(vd.inputs, batch, target), jax.random.key(0))
      expected = np_loss(h, batch, target, w, history, kind, 0.01, 16.0)
      # A float32 train step against float64 NumPy: the loss comes back float64 under x64, but its parts are float32.
      assert_close(metrics["loss"], expected, "network", precision="float32")
      self.assertEqual(int(state.step), 1)
      self.assertTrue(np.isfinite(np.asarray(state.params["w"])).all())
      # --transform: the same step through the transform kinds' path. An affine map with zero biases is this W's map
      # (the general chain path, which carries both sides down the chain); the linear kind is the array path itself.
      zero = lambda d: jnp.zeros(d)
      for transform, p, hist in (
        (
          affine_transform(),
          {"w": w, "b": zero(6)},
          ({"w": history[0], "b": zero(8)}, {"w": history[1], "b": zero(10)}),
        ),
        (linear_transform(), {"w": w}, tuple({"w": h} for h in history)),
      ):
        params = {"model": model.params, "w": p}
        state = fresh_state(adam(1e-3), params, model.batch_stats)
        step = bc_train_step(model.train_def, kind, 1e-3, 0.01, 16.0, transform=transform)
        _, got = step(state, StepInputs(vd.inputs, batch, AlignTarget(z_prev, hist)), jax.random.key(0))
        assert_close(got["loss"], expected, "network", err_msg=transform.kind)

  @pytest.mark.heavy
  def test_posthoc_fit_of_another_kind_lowers_the_selection_error(self):
    g, versions = small_versions()
    vd, cfg = versions[1], dataclasses.replace(PRESETS["test"], posthoc_epochs=3, eval_every=1)
    z_new = np.asarray(jax.random.normal(jax.random.key(0), (vd.num_nodes, 8)))
    target = AlignTarget(jnp.asarray(z_new[:, :6] * 2.0 + 1.0), ())
    transform = affine_transform(rank=2)
    fitted, err = train_posthoc(vd, z_new, target, "linear-sloss", cfg, jax.random.key(1), transform=transform)
    self.assertEqual(set(fitted), {"u", "v", "b"})
    start = transform.init(jax.random.split(jax.random.key(1))[0], 6, 8)
    before = float(single_step_error(jnp.asarray(z_new), target.z_prev, start, vd.split.num_users, transform))
    self.assertLess(err, before)
    assert_close(
      err,
      float(single_step_error(jnp.asarray(z_new), target.z_prev, fitted, vd.split.num_users, transform)),
      "reduction",
    )

  @pytest.mark.heavy
  def test_lr_scale_is_adam_at_the_scaled_rate(self):
    # One step with lr_scale s must equal one step of an Adam whose rate is s * lr (Adam is linear in its rate);
    # the reference, optax.adam at the product rate, applied to the same gradients.
    g, versions = small_versions()
    vd = versions[1]
    model = new_model(attribute_sizes(g), 1, 8, jax.random.key(3))
    batch = BPRSampler(vd.split, 256).epoch(np.random.default_rng(1))[0]
    params = {"model": model.params}

    def loss(p):
      h = nnx.merge(model.train_def, p["model"], model.batch_stats, copy=True)(vd.inputs)
      zu, zp, zn = h[batch.user], h[batch.pos], h[batch.neg]
      bpr = jnp.mean(jax.nn.softplus(jnp.sum(zu * zn, -1) - jnp.sum(zu * zp, -1)))
      return bpr + 0.01 * 0.5 * jnp.mean(jnp.sum(zu * zu + zp * zp + zn * zn, -1))

    grads = jax.grad(loss)(params)
    moved = {}
    for scale in (1.0, 0.25):
      state = fresh_state(adam(1e-2), params, model.batch_stats)
      step = bc_train_step(model.train_def, None, 1e-2, 0.01, 16.0)
      state, _ = step(state, StepInputs(vd.inputs, batch, None, jnp.float32(scale)), jax.random.key(0))
      moved[scale] = [
        np.asarray(a) - np.asarray(b)  # float32, as trained
        for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(params))
      ]
      opt = optax.adam(1e-2 * scale)
      updates, _ = opt.update(grads, opt.init(params), params)
      for got, want, g_leaf in zip(moved[scale], jax.tree.leaves(updates), jax.tree.leaves(grads)):
        # Adam's first step is lr * g / (|g| + eps): only entries whose gradient is well above eps are stable
        # across two float32 gradient computations
        firm = np.abs(np.asarray(g_leaf)) > 1e-4
        assert_close(got[firm], np.asarray(want)[firm], "network")
    held = 0
    for quarter, full in zip(moved[0.25], moved[1.0]):  # the same gradients: linear in the scale up to rounding
      if not np.any(full):  # the SAGE biases under BatchNorm: held out of the gradient, they do not move at all
        self.assertFalse(np.any(quarter))
        held += 1
        continue
      assert_close(quarter, 0.25 * full, "network")
    self.assertEqual(held, 1)  # one layer, one bias

  def test_lr_schedules(self):
    self.assertEqual([lr_scale("constant", e, 4) for e in (1, 4)], [1.0, 1.0])
    assert_close(
      np.array([lr_scale("cosine", e, 4) for e in range(1, 5)]), 0.5 * (1 + np.cos(np.pi * np.arange(4) / 4))
    )
    with self.assertRaisesRegex(ValueError, "`schedule` must be 'constant' or 'cosine', got 'linear'"):
      lr_scale("linear", 1, 4)

  @pytest.mark.heavy
  def test_the_optax_schedule_gives_the_hand_written_factor_bit_for_bit(self):
    """The factor the train step multiplies Adam's update by (a float32 scalar), for every epoch of schedules of
    1..40 epochs and the presets' lengths, equals the hand-written float64 cosine it replaced, rounded to float32."""
    compared = 0
    for epochs in [*range(1, 41), 80, 250, 500]:
      for epoch in range(1, epochs + 1):
        old = np.float32(0.5 * (1.0 + float(np.cos(np.pi * (epoch - 1) / epochs))))
        self.assertEqual(np.float32(lr_scale("cosine", epoch, epochs)).tobytes(), old.tobytes(), (epoch, epochs))
        compared += 1
    self.assertEqual(compared, 820 + 80 + 250 + 500)


class _WrittenLayout(BipartiteSAGE):
  """The model class a run's stage was written with; it is gone (renamed, moved) by the time the run resumes."""


class _LaterLayout(BipartiteSAGE):
  """The same model after a change to its Python class layout: another class, with an attribute the written one
  lacks, and the same parameters."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.revision = "later"


@pytest.mark.heavy
class CheckpointTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self.graph, self.versions = small_versions()
    self.sizes = attribute_sizes(self.graph)

  def trained(self, cls):
    """A Trained M_0 built with ``cls``, its parameters and batch statistics moved off their initial values."""
    with mock.patch.object(train_module, "BipartiteSAGE", cls):
      model = new_model(self.sizes, 2, 8, jax.random.key(0))
    rng = np.random.default_rng(0)
    moved = lambda tree: jax.tree.map(lambda a: np.asarray(a) + rng.normal(size=a.shape).astype(a.dtype), tree)
    model = model._replace(params=moved(model.params), batch_stats=moved(model.batch_stats))
    w = rng.normal(size=(4, 8)).astype(np.float32)
    return Trained(model, w, {"recall@10": 0.125, "recall@50": 0.25}, 7, apply_model(model, self.versions[0]))

  def test_a_stage_resumes_after_the_model_class_layout_changed(self):
    """The stage holds arrays only; the graph definitions come from the config and today's class. A pickled stage,
    as stages were stored before, cannot be read once the class it names is gone."""
    written = self.trained(_WrittenLayout)
    self.assertGreater(len(jax.tree.leaves(written.model.batch_stats)), 0)
    checkpoint = trained_checkpoint(lambda: model_like(self.sizes, 2, 8))
    out = Path(self.create_tempdir().full_path)
    run = harness.Run(out, resumed=False, progress=False)
    run.stage("m0", lambda: written, checkpoint)
    run.close()
    pickled = pickle.dumps(written)
    module, written_class = sys.modules[__name__], _WrittenLayout
    delattr(module, "_WrittenLayout")
    try:
      with self.assertRaisesRegex(AttributeError, "_WrittenLayout"):
        pickle.loads(pickled)
      with mock.patch.object(train_module, "BipartiteSAGE", _LaterLayout):
        resumed = harness.Run(out, resumed=True, progress=False)
        restored = resumed.stage("m0", lambda: self.fail("recomputed a checkpointed stage"), checkpoint)
        resumed.close()
    finally:
      module._WrittenLayout = written_class
    model = nnx.merge(restored.model.eval_def, restored.model.params, restored.model.batch_stats)
    self.assertIsInstance(model, _LaterLayout)
    self.assertEqual(model.revision, "later")
    for name in ("params", "batch_stats"):
      before, after = getattr(written.model, name), getattr(restored.model, name)
      self.assertEqual(jax.tree.structure(before), jax.tree.structure(after))
      for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(restored.w, written.w)
    np.testing.assert_array_equal(restored.z, written.z)
    self.assertEqual((restored.recall, restored.epoch, restored.model.dim), (written.recall, 7, 8))
    # the later class computes the written model's embeddings from the restored state
    np.testing.assert_array_equal(apply_model(restored.model, self.versions[0]), written.z)

  def test_a_checkpoint_for_another_architecture_is_refused_naming_the_difference(self):
    tree = trained_checkpoint(lambda: model_like(self.sizes, 2, 8)).save(self.trained(BipartiteSAGE))
    with self.assertRaisesRegex(ValueError, r"parameters: the checkpoint's .*float32\[.*8\]; the model built .*12\]"):
      trained_checkpoint(lambda: model_like(self.sizes, 2, 12)).restore(harness.as_read_back(tree))
    with self.assertRaisesRegex(ValueError, r"parameters: the checkpoint holds .* the model built from the config has"):
      trained_checkpoint(lambda: model_like(self.sizes, 3, 8)).restore(harness.as_read_back(tree))


class SamplerTest(absltest.TestCase):
  def test_reference_sampling_rules(self):
    _, versions = small_versions()
    s = versions[1].split
    sampler = BPRSampler(s, 512)
    batches = sampler.epoch(np.random.default_rng(0))
    self.assertEqual(sum(int(b.mask.sum()) for b in batches), len(s.train_user))  # |train edges| per epoch
    self.assertEqual(len(batches), -(-len(s.train_user) // 512))
    u = np.concatenate([np.asarray(b.user)[np.asarray(b.mask)] for b in batches])
    p = np.concatenate([np.asarray(b.pos)[np.asarray(b.mask)] for b in batches]) - s.num_users
    n = np.concatenate([np.asarray(b.neg)[np.asarray(b.mask)] for b in batches]) - s.num_users
    train = set(zip(s.train_user.tolist(), s.train_item.tolist()))
    self.assertTrue(all((a, b) in train for a, b in zip(u.tolist(), p.tolist())))  # positives are train edges
    self.assertFalse(any((a, b) in train for a, b in zip(u.tolist(), n.tolist())))  # negatives never are
    self.assertTrue(np.all((n >= 0) & (n < s.num_items)))
    # users are drawn uniformly (not by degree): heavy and light users appear equally often on average
    draws = np.concatenate(
      [u]
      + [
        np.concatenate([np.asarray(b.user)[np.asarray(b.mask)] for b in sampler.epoch(np.random.default_rng(i))])
        for i in range(1, 20)
      ]
    )
    deg = np.bincount(s.train_user, minlength=s.num_users)
    counts = np.bincount(draws, minlength=s.num_users)[deg > 0]
    heavy = deg[deg > 0] >= np.median(deg[deg > 0])
    assert_close(counts[heavy].mean() / counts[~heavy].mean(), 1.0, "statistical", rtol=0, atol=0.1)


class RecallTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_reference_exclusion_rule_against_sklearn(self):
    rng = np.random.default_rng(0)
    n_users, n_items = 30, 40
    zu, zi = rng.normal(size=(n_users, 6)), rng.normal(size=(n_items, 6))
    train = (rng.integers(0, n_users, 200), rng.integers(0, n_items, 200))
    val = (rng.integers(0, n_users, 60), rng.integers(0, n_items, 60))
    val = (np.concatenate([val[0], train[0][:5]]), np.concatenate([val[1], train[1][:5]]))  # 5 re-interactions
    res = evaluate_retrieval(zu, zi, val, exclude=train, ks=(5, 10), rank_excluded_relevant=False)
    scores = zu @ zi.T
    for k in (5, 10):
      recalls = []
      for q in np.unique(val[0]):
        s = scores[q].copy()
        s[train[1][train[0] == q]] = -1024.0  # the reference's masking of train items
        y_true = np.zeros(n_items, int)
        y_true[val[1][val[0] == q]] = 1
        y_pred = np.zeros(n_items, int)
        y_pred[np.argsort(-s, kind="stable")[:k]] = 1
        recalls.append(recall_score(y_true, y_pred))
      assert_close(res[f"recall@{k}"], float(np.mean(recalls)))


def numpy_alignment_rows(z_new, z_prev, w, history):
  """Per-row float64 reference of the reference code's alignment terms: single-step MSE and the multi-step mean
  of the residual carried back through W_(k-1), ..., W_1 (each divided by its dimension)."""
  delta = z_new @ w.T - z_prev
  terms = [np.mean(delta**2, axis=1)]
  for wj in reversed(history):
    delta = delta @ wj.T
    terms.append(np.mean(delta**2, axis=1))
  return terms[0], np.mean(terms, axis=0)


class PosthocTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_folded_loss_equals_the_row_gather_mean(self):
    """The reference sums the mean alignment term of the batch's users, positives and negatives; folded into
    distinct nodes with counts, :func:`bcjax.fit_posthoc`'s count-weighted loss is that sum over 3 (the mean over all
    3m valid rows), evaluated at W before the step."""
    rng = np.random.default_rng(3)
    n, d1, d2, d3 = 40, 5, 6, 7
    z_new, z_prev = rng.normal(size=(n, d3)), rng.normal(size=(n, d2))
    w, w1 = rng.normal(size=(d2, d3)), rng.normal(size=(d1, d2))
    f32 = lambda a: jnp.asarray(a, jnp.float32)
    for b in (30, 8):  # 3B >= n folds onto every node; 3B < n onto the batch's distinct nodes
      rows = [rng.integers(0, n, b) for _ in range(3)]
      mask = np.arange(b) < b - 3
      batch = Batch(*(jnp.asarray(r, jnp.int32) for r in rows), jnp.asarray(mask))
      fold = fold_batch(batch, n)
      self.assertEqual(fold.node.shape, (min(n, 3 * b),))
      for kind, history in (("linear-sloss", ()), ("linear-mloss", (w1,))):
        single, multi = numpy_alignment_rows(z_new, z_prev, w, history)
        per_row = single if kind == "linear-sloss" else multi
        expected = sum(per_row[r[mask]].mean() for r in rows) / 3
        fit = fit_posthoc(
          f32(z_new),
          f32(z_prev),
          tuple(map(f32, history)),
          loss=POSTHOC_LOSS[kind],
          per_dim=True,
          batches=(fold.node[None], fold.count[None]),
          init=PosthocFit(f32(w), None, None),
        )
        assert_close(fit.losses[0], expected, err_msg=f"{kind}, B={b}")

  @pytest.mark.heavy
  def test_recovers_a_known_map(self):
    _, versions = small_versions()
    vd = versions[1]
    rng = np.random.default_rng(0)
    z_new = rng.normal(size=(vd.num_nodes, 8)).astype(np.float32)
    w_true = rng.normal(size=(4, 8)).astype(np.float32) / 3
    target = AlignTarget(jnp.asarray(z_new @ w_true.T), ())
    cfg = PRESETS["test"].__class__(**{**PRESETS["test"].__dict__, "posthoc_epochs": 60, "learning_rate": 1e-2})
    w, err = train_posthoc(vd, z_new, target, "linear-sloss", cfg, jax.random.key(0))
    self.assertLess(err, 1e-3)
    assert_close(w, w_true, "statistical", rtol=0, atol=0.05)


class ConsumerTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_learns_a_separable_task(self):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 5)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int32)
    cfg = PRESETS["test"].__class__(**{**PRESETS["test"].__dict__, "consumer_epochs": 15, "consumer_batch_size": 128})
    c = train_consumer(x[:400], y[:400], x[400:500], y[400:500], 16, 0.25, 0, cfg)
    self.assertGreater(c.stop_auc, 0.95)
    self.assertGreater(score(c, x[500:], y[500:]), 0.95)
    # negative flips: right on the old inputs, wrong on the new, counted directly from the logits' signs
    old_right = (np.asarray(predict(c, x[500:])) > 0) == y[500:]
    new_right = (np.asarray(predict(c, -x[500:])) > 0) == y[500:]
    assert_close(flip_rate(c, x[500:], -x[500:], y[500:]), float(np.mean(old_right & ~new_right)), "elementwise")
    self.assertGreater(flip_rate(c, x[500:], -x[500:], y[500:]), 0.5)  # a mirrored input flips most examples
    self.assertEqual(flip_rate(c, x[500:], x[500:], y[500:]), 0.0)

  @pytest.mark.heavy
  def test_consumers_at_chance_are_left_out_and_one_class_predictions_are_named(self):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(900, 5)).astype(np.float32)
    learnable = (x[:, 0] > 0).astype(np.int32)
    noise = rng.integers(0, 2, 900).astype(np.int32)  # labels the inputs say nothing about
    cfg = PRESETS["test"].__class__(**{**PRESETS["test"].__dict__, "consumer_epochs": 10, "consumer_batch_size": 128})
    checks = {}
    for task, y in (("learnable", learnable), ("noise", noise)):
      c = train_consumer(x[:400], y[:400], x[400:500], y[400:500], 16, 0.0, 0, cfg)
      checks[task] = reference_check([c], [x[500:700], x[700:]], [y[500:700], y[700:]])
      # the pooled AUC of the one consumer's logits over both evaluation sets, against sklearn: bcjax counts two
      # logits within their own float32 rounding as a tie (half a pair), sklearn only equal ones, so they may differ
      # by a pair or two (1/(n+ n-) each)
      logits = np.concatenate([np.asarray(predict(c, x[500:700])), np.asarray(predict(c, x[700:]))])
      positives = int(np.sum(y[500:]))
      pair = 1.0 / (positives * (len(logits) - positives))
      assert_close(checks[task]["reference_auc"], roc_auc_score(y[500:], logits), "statistical", rtol=0, atol=2 * pair)
      self.assertEqual(checks[task]["predicted_positive_share"], float(np.mean(logits > 0)))
    self.assertGreater(checks["learnable"]["reference_auc_ci95"][0], 0.9)
    low, high = checks["noise"]["reference_auc_ci95"]
    self.assertLess(low, 0.5)
    self.assertGreater(high, 0.5)
    kept, at_chance = above_chance({"a": checks["learnable"], "b": checks["noise"], "old": {}})
    self.assertEqual(sorted(kept), ["a", "old"])  # a stage saved before the check is kept
    self.assertEqual(list(at_chance), ["b"])
    self.assertIn("not clearly above chance (0.5)", at_chance["b"])
    # a consumer whose logits are all negative: every example one class, named under the table
    results = {
      "dataset": "d",
      "preset": "p",
      "seed": 0,
      "config": {"lam": 1.0},
      "methods": {},
      "consumers": {
        "user-activity": {"predicted_positive_share": 0.5, "predicted_positive_share_by_seed": [0.0, 1.0]},
        "binary-edge-rating": checks["learnable"],
      },
    }
    # one seed all negative, the other all positive: their mean share, 0.5, alone would hide it
    self.assertIn("The version-0 consumers of user-activity each predict one class for every example", table_3(results))
    self.assertEqual(
      checks["learnable"]["predicted_positive_share_by_seed"], [checks["learnable"]["predicted_positive_share"]]
    )

  @pytest.mark.heavy
  def test_second_block_has_no_relu(self):
    model = ConsumerMLP(3, 4, 0.0, rngs=nnx.Rngs(0))
    model.eval()
    x = jnp.ones((2, 3))
    h = model.bn2(model.l2(jax.nn.relu(model.bn1(model.l1(x)))))  # the reference's quirk: no ReLU here
    assert_close(model(x), model.l3(h)[:, 0])

  def test_biases_under_batchnorm_take_their_exact_zero_gradient(self):
    # In training mode BatchNorm removes the mean, so b1 and b2 have an exact gradient of zero; their computed one
    # is rounding noise that Adam turns into full steps. The consumer holds them, and only them.
    model = ConsumerMLP(5, 6, 0.0, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(0), (32, 5), jnp.float32) * 30.0
    graphdef, params, stats = nnx.split(model, nnx.Param, nnx.BatchStat)

    def loss(p):
      return jnp.sum(nnx.merge(graphdef, p, stats, copy=True)(x) ** 2)

    grads = nnx.to_pure_dict(jax.grad(loss)(params))
    for layer in ("l1", "l2"):
      self.assertEqual(float(jnp.max(jnp.abs(grads[layer]["bias"]))), 0.0, layer)
      self.assertGreater(float(jnp.max(jnp.abs(grads[layer]["kernel"]))), 0.0, layer)
    self.assertGreater(float(jnp.max(jnp.abs(grads["l3"]["bias"]))), 0.0)
    # the forward pass is nn.Linear's, bias included (eval mode uses the running statistics, where the bias counts)
    model.eval()
    h = model.bn2(model.l2(jax.nn.relu(model.bn1(model.l1(x)))))
    assert_close(model(x), model.l3(h)[:, 0], "network")


if __name__ == "__main__":
  absltest.main()
