"""The BC-Aligner experiment's parts against independent references: the bipartite model's inputs (NumPy), the
joint loss of a train step (NumPy float64 from the same forward pass), the reference's BPR sampler, exact Recall@K
with the reference's exclusion rule (scikit-learn's recall_score), post-hoc B_k recovering a known map, consumers,
the notebook's degradation arithmetic, and the command line end to end."""

import contextlib
import dataclasses
import io
import json
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
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
  semi_orthogonal,
  single_step_loss,
)
from bcjax.data import TASKS, synthetic_evolving_graph
from bcjax.metrics import evaluate_retrieval
from bcjax.models import BipartiteSAGE, bipartite_inputs
from bcjax.versioning import Registry
from experiments import harness
from experiments.bc_aligner import __main__ as cli
from experiments.bc_aligner import noise, seeds
from experiments.bc_aligner import train as train_module
from experiments.bc_aligner.configs import KEEP_LATEST, METHODS, PRESETS
from experiments.bc_aligner.consumers import (
  ConsumerMLP,
  above_chance,
  flip_rate,
  predict,
  reference_check,
  score,
  train_consumer,
)
from experiments.bc_aligner.data import Batch, BPRSampler, VersionData, attribute_sizes, check_cutoffs, version_data
from experiments.bc_aligner.experiment import EXPERIMENT, BCAligner
from experiments.bc_aligner.report import (
  figure_5,
  headline,
  summarise,
  table_3,
  transform_figure,
  transform_headline,
  transform_table,
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
  recall,
  single_step_error,
  train_posthoc,
  trained_checkpoint,
  user_recall50,
)
from experiments.bc_methods import POSTHOC_LOSS
from experiments.common import adam
from experiments.train_step import fresh_state
from tests._resume import assert_same_results
from tests._runs import assert_runs_agree
from tests._tolerance import assert_close
from tests.test_parallel import ROOT, forced_device_env

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


class ReportTest(absltest.TestCase):
  def test_headline_names_the_best_backward_compatible_method(self):
    def row(i, u):
      return {
        "intended_degradation_pct": i,
        "unintended_degradation_pct": u,
        "combined_degradation_pct": None if u is None else i + u,
      }

    methods = {
      "keep-all": row(0.0, 0.0),
      "non-bc": row(0.0, -30.0),
      "fix-m0": row(-6.0, 0.0),
      "joint-notrans": row(-3.0, -3.5),
      "bc-aligner": row(-3.0, -1.0),
      "post-lin-sloss": row(0.0, -14.0),
    }
    line = headline({"methods": methods})
    self.assertTrue(line.startswith("Best backward-compatible trade-off: bc-aligner, combined -4.00 %"), line)
    self.assertIn("intended -3.00 % vs Keep-All", line)
    self.assertIn("next: fix-m0 -6.00 %", line)  # Keep-All and Non-BC are not backward compatible
    methods["fix-m0"] = row(-1.0, 0.0)
    self.assertIn("trade-off: fix-m0", headline({"methods": methods}))
    self.assertIn("left out", headline({"methods": {m: row(0.0, None) for m in methods}}))
    reason = "1 consumer task(s) left with version-0 consumers clearly above chance (at least 2 needed)"
    line = headline({"methods": {m: row(0.0, None) for m in methods}, "unintended_not_measurable": reason})
    self.assertEqual(line.split(". ")[0], f"Unintended side not measurable on this data: {reason}")
    self.assertIn("No best backward-compatible method is named", line)
    self.assertNotIn("trade-off:", line)

  def test_headline_says_whether_the_lead_survives_redrawn_val_users(self):
    def row(i, u):
      return {"intended_degradation_pct": i, "unintended_degradation_pct": u, "combined_degradation_pct": i + u}

    results = {
      "methods": {"joint-lin-sloss": row(-3.0, -1.5), "bc-aligner": row(-2.0, -1.0)},
      "gap": {
        "best": "bc-aligner",
        "next": "joint-lin-sloss",
        "gap_pct": 1.5,
        "ci95": [0.25, 2.75],
        "intended_ci95": [-0.25, 2.25],
      },
    }
    self.assertIn(
      "The lead of 1.50 points has a 95 % interval of [+0.25, +2.75] over redrawn val users (consumer "
      "AUCs held fixed): it holds when the val users are redrawn.",
      headline(results),
    )
    results["gap"]["ci95"] = [-0.5, 3.5]
    self.assertIn(
      "[-0.50, +3.50] over redrawn val users (consumer AUCs held fixed): within the noise of the val "
      "users' draw: one run does not order the two",
      headline(results),
    )
    same_models = {**results, "gap": {**results["gap"], "ci95": [0.5, 0.5], "intended_ci95": [0.0, 0.0]}}
    self.assertTrue(
      headline(same_models).endswith(
        "Both serve the same models, so the lead of 1.50 points is all on the consumer tasks, whose noise one run "
        "does not measure."
      ),
      headline(same_models),
    )
    results["gap"]["best"] = "joint-lin-sloss"  # intervals of another ranking are never quoted
    self.assertTrue(headline(results).endswith("next: joint-lin-sloss -4.50 %."), headline(results))


class ValUserNoiseTest(absltest.TestCase):
  """The intended degradation's and the gap's intervals over redrawn val users against their closed forms: the
  degradation is 100 (x̄_m / x̄_0 - 1), a ratio whose bootstrap standard error is the delta method's
  100 / (K x̄_0) sqrt(sum_k var_k(a - r b) / n_k); the gap is 100/(K x0) times the sum over versions of the mean
  per-user difference, with standard error sqrt(sum_k w^2 var_k / n_k)."""

  def per_user(self, rng, sizes, level):
    return [(np.arange(n) * 3, np.clip(rng.normal(level, 0.3, n), 0, 1)) for n in sizes]

  @pytest.mark.heavy
  def test_intervals_are_centred_on_the_degradation_with_the_closed_form_width(self):
    rng = np.random.default_rng(0)
    sizes = (300, 250, 400)
    per_user = {"non-bc": self.per_user(rng, sizes, 0.4), "bc-aligner": self.per_user(rng, sizes, 0.35)}
    x0 = float(np.mean([r.mean() for _, r in per_user["non-bc"]]))
    xm = float(np.mean([r.mean() for _, r in per_user["bc-aligner"]]))
    d = [rb - r0 for (_, rb), (_, r0) in zip(per_user["bc-aligner"], per_user["non-bc"])]
    degradation = 100.0 * np.mean([x.mean() for x in d]) / x0
    assert_close(degradation, 100.0 * (xm / x0 - 1.0))
    # the delta method for the ratio of the two means over versions: the linearised residual a - r b per version
    ratio = xm / x0
    lin = [rb - ratio * r0 for (_, rb), (_, r0) in zip(per_user["bc-aligner"], per_user["non-bc"])]
    se = np.sqrt(sum((100.0 / (3 * x0)) ** 2 * x.var() / x.size for x in lin))
    got = noise.intended_intervals(per_user, jax.random.key(0))
    self.assertEqual(got["non-bc"], [0.0, 0.0])
    low, high = got["bc-aligner"]
    assert_close((low + high) / 2, degradation, op="statistical", rtol=0.0, atol=0.15 * se)
    assert_close(high - low, 2 * 1.959964 * se, op="statistical", rtol=0.1, atol=0.0)
    self.assertLess(high, 0.0)  # a 5-point drop on 950 users is beyond their draw

    results = {
      "methods": {
        "non-bc": {"intended_recall50_mean": x0},
        "bc-aligner": {
          "intended_degradation_pct": degradation,
          "unintended_degradation_pct": -1.0,
          "combined_degradation_pct": degradation - 1.0,
        },
        "fix-m0": {
          "intended_degradation_pct": -40.0,
          "unintended_degradation_pct": 0.0,
          "combined_degradation_pct": -40.0,
        },
      }
    }
    per_user["fix-m0"] = self.per_user(rng, sizes, 0.1)
    gap = noise.gap_interval(results, per_user, jax.random.key(1))
    self.assertEqual((gap["best"], gap["next"]), ("bc-aligner", "fix-m0"))
    assert_close(gap["gap_pct"], degradation - 1.0 + 40.0)
    # the consumers' gap (-1 - 0) shifts the intended gap's interval
    assert_close(np.array(gap["ci95"]), np.array(gap["intended_ci95"]) - 1.0)
    self.assertGreater(gap["ci95"][0], 0.0)
    del results["methods"]["fix-m0"]
    self.assertIsNone(noise.gap_interval(results, per_user, jax.random.key(1)))

  def test_every_backward_compatible_method_gets_an_interval_when_the_unintended_side_is_not_measurable(self):
    # the Amazon 2014 report: no consumer task measured, so no combined degradation ranks anything; the intended
    # side is still shown and every backward-compatible method's intended degradation carries its interval
    rng = np.random.default_rng(4)
    sizes = (2000, 1800)
    levels = {"non-bc": 0.30, "fix-m0": 0.36, "bc-aligner": 0.29, "joint-lin-sloss": 0.30}
    per_user = {m: self.per_user(rng, sizes, level) for m, level in levels.items()}
    per_user["keep-all"] = per_user["non-bc"]  # Keep-All serves Non-BC's models
    x0 = float(np.mean([r.mean() for _, r in per_user["non-bc"]]))
    methods = {
      m: {
        "intended_recall50_mean": float(np.mean([r.mean() for _, r in pu])),
        "intended_degradation_pct": 100.0 * (np.mean([r.mean() for _, r in pu]) - x0) / x0,
        "unintended_degradation_pct": None,
        "combined_degradation_pct": None,
      }
      for m, pu in per_user.items()
    }
    results = {"methods": methods, "unintended_not_measurable": "no consumer task measured"}
    runs = {m: SimpleNamespace(serving=m) for m in per_user}
    cfg = SimpleNamespace(seed=0)
    with mock.patch.object(noise, "user_recalls", lambda serving, versions: {m: per_user[m] for m in serving}):
      BCAligner._val_user_noise(results, runs, None, cfg)
    for m in ("fix-m0", "bc-aligner", "joint-lin-sloss"):
      low, high = methods[m]["intended_degradation_ci95"]
      self.assertLess(low, methods[m]["intended_degradation_pct"], m)
      self.assertGreater(high, methods[m]["intended_degradation_pct"], m)
    self.assertNotIn("gap", results)  # nothing is ranked
    self.assertNotIn("intended_degradation_ci95", methods["keep-all"])  # not backward compatible
    # the table shows the intervals, the sign convention, and Fix-M0 beating Keep-All
    results.update(dataset="d", preset="p", seed=0, config={"lam": 1.0}, consumers={}, data_notes=["a note"])
    results["consumers_left_out"] = {}
    results["consumers_at_chance"] = {t: "at chance" for t in ("user-activity", "binary-edge-rating")}
    for m in methods.values():
      m.update(
        intended_recall50_by_version=[0.3, 0.3],
        unintended_auc_mean=None,
        alignment_error=0.0,
        alignment_error_by_version=[0.0],
      )
    table = table_3(results)
    low, high = methods["bc-aligner"]["intended_degradation_ci95"]
    self.assertIn(f"[{low:+.2f}, {high:+.2f}]", table)
    self.assertIn("negative is worse than Keep-All, positive better", table)
    self.assertIn("binary-edge-rating, user-activity: version-0 consumers not above chance", table)
    self.assertNotIn("one class", table.split("\n")[0])  # no task had one class: the caption does not say so
    self.assertIn("Data: a note", table)
    self.assertIn("Never updating beats updating here: Fix-M0", table)

  def test_few_val_users_never_give_a_bound_below_minus_100_percent(self):
    # 28 sampled users (the MovieLens test preset): sparse recalls, where the interval around a fixed Keep-All mean
    # reached -124 %; the ratio's interval cannot go below -100 % (a recall of 0 everywhere)
    rng = np.random.default_rng(6)
    users = lambda n, p: (np.arange(n), np.where(rng.random(n) < p, rng.random(n), 0.0))
    per_user = {"non-bc": [users(6, 0.3), users(5, 0.3)], "fix-m0": [users(6, 0.2), users(5, 0.2)]}
    per_user["non-bc"][0][1][0] = 0.5  # Keep-All scores somewhere
    per_user["zero"] = [(u, np.zeros_like(r)) for u, r in per_user["non-bc"]]
    got = noise.intended_intervals(per_user, jax.random.key(0))
    self.assertGreaterEqual(got["fix-m0"][0], -100.0)
    self.assertEqual(got["zero"], [-100.0, -100.0])
    # one val user in a version: no interval (None, shown as a dash), never a zero-width one
    one = {m: [(u[:1], r[:1]) for u, r in v] for m, v in per_user.items()}
    self.assertIsNone(noise.intended_intervals(one, jax.random.key(0))["fix-m0"])

  def test_methods_scored_on_other_val_users_are_refused(self):
    rng = np.random.default_rng(1)
    per_user = {"non-bc": self.per_user(rng, (5, 6), 0.4), "bc-aligner": self.per_user(rng, (5, 7), 0.4)}
    with self.assertRaisesRegex(ValueError, "version 1: the two methods were scored on different val users"):
      noise.intended_intervals(per_user, jax.random.key(0))

  @pytest.mark.heavy
  def test_per_user_recalls_average_to_the_val_recall_and_shared_models_are_scored_once(self):
    _, versions = small_versions()
    rng = np.random.default_rng(2)
    zs = [rng.normal(size=(v.num_nodes, 8)).astype(np.float32) for v in versions[:2]]
    for z, vd in zip(zs, versions):
      users, values = user_recall50(z, vd)
      np.testing.assert_array_equal(users, np.unique(vd.split.val_user))
      self.assertEqual(float(np.mean(values)), recall(z, vd)["recall@50"])
    with mock.patch.object(noise, "user_recall50", wraps=user_recall50) as scorer:
      out = noise.user_recalls({"non-bc": zs, "post-lin-sloss": zs}, versions[:2])
    self.assertEqual(scorer.call_count, 2)
    self.assertIs(out["non-bc"][1], out["post-lin-sloss"][1])

  def test_notebook_arithmetic(self):
    recalls = {
      "non-bc": [{"recall@50": 0.4}] * 2,
      "fix-m0": [{"recall@50": 0.2}] * 2,
      "bc-aligner": [{"recall@50": 0.3}, {"recall@50": 0.5}],
    }
    z = [np.zeros((3, 2)), np.zeros((3, 2))]
    published = {"non-bc": [z[0], np.full((3, 2), 1.0)], "fix-m0": z, "bc-aligner": [z[0], np.full((3, 2), 0.5)]}
    consumers = {
      "t1": {
        "steps": [1],
        "auc": {"non-bc": [[0.5]], "fix-m0": [[0.8], [0.6]], "bc-aligner": [[0.7]]},
        "negative_flips": {"non-bc": [[0.3]], "fix-m0": [[0.0], [0.0]], "bc-aligner": [[0.1], [0.2]]},
      },
      "t2": {
        "steps": [1],
        "auc": {"non-bc": [[0.6]], "fix-m0": [[0.9]], "bc-aligner": [[0.8]]},
        "negative_flips": {"non-bc": [[0.1]], "fix-m0": [[0.0]], "bc-aligner": [[0.05]]},
      },
    }
    published_recalls = {"non-bc": [0.1, 0.3], "fix-m0": [0.2, 0.2], "bc-aligner": [0.3, 0.3]}
    out = summarise(recalls, published, consumers, published_recalls)
    assert_close(out["bc-aligner"]["negative_flip_pct"], 100 * (0.15 + 0.05) / 2, scale=100.0)  # seeds, then tasks
    assert_close(out["non-bc"]["negative_flip_pct_by_task"]["t1"], 30.0, scale=100.0)
    assert_close(out["bc-aligner"]["recall_recovery_pct"], 100 * 0.3 / 0.4, scale=100.0)  # over Keep-All's 0.4
    assert_close(out["non-bc"]["recall_recovery_pct"], 50.0, scale=100.0)
    del consumers["t2"]["negative_flips"]  # a consumers stage saved before flips were measured
    self.assertEqual(set(summarise(recalls, published, consumers)["fix-m0"]["negative_flip_pct_by_task"]), {"t1"})
    assert_close(out["fix-m0"]["intended_degradation_pct"], -50.0)
    assert_close(out["bc-aligner"]["intended_degradation_pct"], 0.0, scale=100.0)  # percentages
    y0 = (0.7 + 0.9) / 2  # fix-m0: mean over seeds per task, then over tasks
    assert_close(out["non-bc"]["unintended_degradation_pct"], 100 * (0.55 - y0) / y0)
    assert_close(out["bc-aligner"]["combined_degradation_pct"], 100 * (0.75 - y0) / y0)
    assert_close(out["non-bc"]["alignment_error_by_version"], [0.0, np.sqrt(2)])
    assert_close(out["bc-aligner"]["alignment_error"], np.sqrt(0.5) / 2)

  @pytest.mark.heavy
  def test_transform_table_and_headline(self):
    def row(i, u, flips):
      return {
        "intended_degradation_pct": i,
        "unintended_degradation_pct": u,
        "combined_degradation_pct": i + u,
        "alignment_error": 1.0,
        "negative_flip_pct": flips,
        "recall_recovery_pct": 90.0,
      }

    results = {
      "dataset": "synthetic",
      "preset": "quick",
      "seed": 0,
      "transform_sweep": {
        "linear": {
          "transform": "linear",
          "methods": {"post-lin-mloss": row(0.0, -8.0, 20.0), "bc-aligner": row(-3.0, -2.0, 6.0)},
        },
        "mlp": {
          "transform": "mlp(hidden=64)",
          "methods": {"post-lin-mloss": row(0.0, -5.0, 15.0), "bc-aligner": row(-4.5, -1.0, 5.0)},
        },
      },
    }
    table = transform_table(results)
    self.assertIn("| mlp(hidden=64) | post-lin-mloss | post-hoc | -5.00 | +0.00 | -5.00 |", table)
    self.assertEqual(table.count("\n| "), 5)  # header and four rows
    lines = transform_headline(results).splitlines()
    self.assertEqual(
      lines[0], "Best B_k, joint: linear (bc-aligner), combined -5.00 % (intended -3.00 %, negative flips 6.00 %)."
    )  # -5.0 beats mlp's -5.5
    self.assertTrue(lines[1].startswith("Best B_k, post-hoc: mlp(hidden=64) (post-lin-mloss), combined -5.00 %"))
    path = Path(self.create_tempdir()) / "transforms.png"
    transform_figure(path, results)
    self.assertEqual(path.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

  @pytest.mark.heavy
  def test_figure_5(self):
    path = Path(self.create_tempdir()) / "figure5.png"
    sweep = {
      str(lam): {
        "intended_degradation_pct": -lam / 4,
        "unintended_degradation_pct": -8 / lam,
        "combined_degradation_pct": -lam / 4 - 8 / lam,
      }
      for lam in (1, 4, 16)
    }
    figure_5(path, sweep)
    self.assertEqual(path.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


@pytest.mark.heavy
class CutoffTest(absltest.TestCase):
  """Recall@K cut-offs are checked against the items of every version before the first step (the test preset's
  synthetic graph ranks 123, 125, 127, 134 and 141 items at versions 0..4)."""

  def run_cli(self, *argv):
    out = Path(self.create_tempdir().full_path) / "run"
    err = io.StringIO()
    with mock.patch("sys.stderr", err), mock.patch("sys.stdout", io.StringIO()):
      code = cli.main(["--preset", "test", *argv, "--out", str(out), "--no-progress"])
    return code, err.getvalue(), out

  def test_a_cut_off_above_the_items_exits_2_before_anything_is_written(self):
    code, err, out = self.run_cli("--ks", "10,20,50,124")
    self.assertEqual(code, 2)
    self.assertFalse(out.exists())
    self.assertIn(
      "--ks: cut-off(s) [124] exceed the ranked items: version 0 ranks 123 items (items by version: "
      "[123, 125, 127, 134, 141]); e.g. --ks 10,20,50",
      err,
    )

  def test_the_intended_metric_needs_its_k_items_at_every_version(self):
    split = lambda n: VersionData(mock.Mock(num_items=n), None)
    check_cutoffs([split(60), split(50), split(70)], (10,), 50)  # 50 items at every version: fine
    with self.assertRaisesRegex(ValueError, r"too small for the intended metric Recall@50: version 1 ranks 49 "):
      check_cutoffs([split(60), split(49), split(70)], (10,), 50)

  def test_the_cut_offs_are_logged_and_recall_at_50_always_computed(self):
    graph = synthetic_evolving_graph(**dict(PRESETS["test"].synthetic), seed=0)
    vd = version_data(graph)[0]
    z = jax.random.normal(jax.random.key(0), (vd.num_nodes, 4))
    n = vd.split.num_items
    self.assertEqual(list(recall(z, vd, (n, 5))), ["recall@5", "recall@50", f"recall@{n}"])
    values = list(recall(z, vd, (n, 5)).values())
    self.assertEqual(values, sorted(values))  # a longer list holds the shorter one's hits
    self.assertEqual(recall(z, vd, (5,))["recall@50"], recall(z, vd)["recall@50"])
    self.assertEqual(EXPERIMENT.parse(["--ks", "5,10"])[2].ks, (5, 10))
    with self.assertRaises(SystemExit):
      EXPERIMENT.parse(["--ks", "0,10"])


class PresetTest(absltest.TestCase):
  def test_quick_widths_are_the_papers_over_eight_at_every_version(self):
    quick, paper = PRESETS["quick"].versions, PRESETS["paper"].versions
    self.assertEqual([layers for layers, _ in quick], [layers for layers, _ in paper])
    self.assertEqual([8 * d for _, d in quick], [d for _, d in paper])

  def test_quick_lambda_pulls_on_the_squared_error_as_the_papers_does(self):
    """λ times the reference-scaled single-step loss of a residual of fixed Euclidean norm is the same at both
    presets' widths, at every version (so λ = 16 at widths ÷ 8 would pull 8x harder)."""
    rng = np.random.default_rng(0)
    pulls = {}
    for name in ("paper", "quick"):
      cfg = PRESETS[name]
      pulls[name] = []
      for (_, d_prev), (_, d_new) in zip(cfg.versions[:-1], cfg.versions[1:]):
        delta = rng.normal(size=(16, d_prev))
        delta *= 3.0 / np.linalg.norm(delta, axis=1, keepdims=True)  # every row's squared error is 9
        loss = single_step_loss(
          jnp.zeros((16, d_new)), jnp.asarray(delta, jnp.float32), jnp.zeros((d_prev, d_new)), per_dim=True
        )
        pulls[name].append(cfg.lam * float(loss))
    self.assertEqual(PRESETS["paper"].lam, 16.0)  # the reference's lam16
    assert_close(np.float32(pulls["quick"]), np.float32(pulls["paper"]), "reduction")
    assert_close(np.float32(pulls["paper"]), np.float32(16.0 * 9.0 / np.array([256, 320, 384, 448])), "reduction")


def best_of(combined: dict, candidates: tuple, i: int) -> str:
  return max(candidates, key=lambda m: combined[m][i])


class SeedsTest(absltest.TestCase):
  """``experiments.bc_aligner.seeds`` on runs written here, against NumPy means, stds and paired differences."""

  METHODS = ("keep-all", "fix-m0", "finetune-m0", "non-bc", "joint-lin-sloss", "bc-aligner")

  def make_runs(self, degradations: dict[str, np.ndarray], config_changes: dict | None = None) -> list[Path]:
    """One run per row of ``degradations[m]`` = [[intended, unintended], ...]; seeds 10, 11, ..."""
    root = Path(self.create_tempdir().full_path)
    paths = []
    for i in range(len(next(iter(degradations.values())))):
      path = root / f"s{i}"
      path.mkdir()
      config = {
        "experiment": "bc_aligner",
        "argv": ["--seed", str(10 + i)],
        "preset": "quick",
        "dataset": "synthetic",
        "config": {"lam": 2.0, "epochs": 80, "seed": 10 + i},
      }
      for key, value in (config_changes or {}).get(i, {}).items():
        config["config"][key] = value
      methods = {
        m: {
          "intended_degradation_pct": float(d[i, 0]),
          "unintended_degradation_pct": float(d[i, 1]),
          "combined_degradation_pct": float(d[i].sum()),
        }
        for m, d in degradations.items()
      }
      (path / "config.json").write_text(json.dumps(config))
      (path / "results.json").write_text(json.dumps({"methods": methods}))
      paths.append(path)
    return paths

  def random_degradations(self, runs: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out = {m: rng.normal(-5.0, 3.0, size=(runs, 2)) for m in self.METHODS}
    out["keep-all"][:] = 0.0
    return out

  def run_main(self, argv) -> str:
    with mock.patch("sys.stdout", new_callable=io.StringIO) as stdout:
      self.assertEqual(seeds.main([str(a) for a in argv]), 0)
    return stdout.getvalue()

  def test_means_stds_wins_and_paired_leads_match_numpy(self):
    d = self.random_degradations()
    text = self.run_main(self.make_runs(d))
    combined = {m: v.sum(axis=1) for m, v in d.items()}
    candidates = ("fix-m0", "finetune-m0", "joint-lin-sloss", "bc-aligner")  # the backward-compatible ones here
    best = [max(candidates, key=lambda m, i=i: combined[m][i]) for i in range(3)]
    for m in self.METHODS:
      row = next(line for line in text.splitlines() if line.startswith(f"| {m} |"))
      cells = [c.strip() for c in row.strip("|").split("|")]
      for cell, values in zip(cells[1:4], (combined[m], d[m][:, 0], d[m][:, 1])):
        self.assertEqual(cell, f"{np.mean(values):+.2f} ± {np.std(values, ddof=1):.2f}", (m, cells))
      if m in ("keep-all", "non-bc"):  # not backward compatible: no win count, no lead
        self.assertEqual(cells[4:], ["—", "—"])
        continue
      self.assertEqual(cells[4], f"{best.count(m)} / 3")
      lead = combined["bc-aligner"] - combined[m]
      self.assertEqual(cells[5], "—" if m == "bc-aligner" else f"{np.mean(lead):+.2f} ± {np.std(lead, ddof=1):.2f}")
    holds = int(np.sum(d["finetune-m0"][:, 0] <= 0.0))
    self.assertIn(
      f"Keep-All ≥ Finetune-M0 on {holds} of 3 seeds; BC-Aligner has the best combined degradation on "
      f"{best.count('bc-aligner')} of 3.",
      text,
    )
    for i in range(3):
      self.assertIn(
        f"| {10 + i} | {'yes' if d['finetune-m0'][i, 0] <= 0 else 'no'} | {best[i]} | n/a | "
        f"{d['bc-aligner'][i, 0]:+.2f} |",
        text,
      )

  def test_leads_by_component_match_numpy_with_t_intervals(self):
    d = self.random_degradations()
    runs = self.make_runs(d)
    flips = {m: np.random.default_rng(hash(m) % 1000).uniform(0, 10, 3) for m in self.METHODS}
    for i, run in enumerate(runs):
      results = json.loads((run / "results.json").read_text())
      for m in self.METHODS:
        results["methods"][m]["negative_flip_pct"] = float(flips[m][i])
      (run / "results.json").write_text(json.dumps(results))
    text = self.run_main(runs)
    t = 4.302652729911275  # the 97.5 % quantile of Student's t with 2 degrees of freedom

    def cell(lead):
      half = t * np.std(lead, ddof=1) / np.sqrt(3)
      return f"{np.mean(lead):+.2f} [{np.mean(lead) - half:+.2f}, {np.mean(lead) + half:+.2f}] ({np.sum(lead > 0)} / 3)"

    section = text.split("by component")[1]
    for m in ("fix-m0", "finetune-m0", "joint-lin-sloss"):
      row = next(line for line in section.splitlines() if line.startswith(f"| {m} |"))
      bc, other = d["bc-aligner"], d[m]
      expected = [
        cell(bc.sum(1) - other.sum(1)),
        cell(bc[:, 0] - other[:, 0]),
        cell(bc[:, 1] - other[:, 1]),
        cell(flips[m] - flips["bc-aligner"]),
      ]  # fewer flips is better: the method's minus BC-Aligner's
      self.assertEqual([c.strip() for c in row.strip("|").split("|")][1:], expected, m)
    for m in ("keep-all", "non-bc", "bc-aligner"):  # not a rival BC-Aligner is compared with
      self.assertNotIn(f"| {m} |", section.split("| seed |")[0])

  def test_without_stored_flips_the_flip_lead_is_not_available(self):
    text = self.run_main(self.make_runs(self.random_degradations()))
    row = next(line for line in text.split("by component")[1].splitlines() if line.startswith("| joint-lin-sloss |"))
    self.assertTrue(row.endswith("| n/a |"), row)

  def test_the_best_methods_val_user_interval_is_quoted_per_seed(self):
    d = self.random_degradations()
    runs = self.make_runs(d)
    combined = {m: v.sum(axis=1) for m, v in d.items()}
    candidates = ("fix-m0", "finetune-m0", "joint-lin-sloss", "bc-aligner")
    for i, (run, low) in enumerate(zip(runs, (0.5, -1.25, 0.75))):
      best, runner_up = sorted(candidates, key=lambda m, i=i: -combined[m][i])[:2]
      results = json.loads((run / "results.json").read_text())
      results["gap"] = {
        "best": best,
        "next": runner_up,
        "gap_pct": combined[best][i] - combined[runner_up][i],
        "ci95": [low, 3.0],
        "intended_ci95": [low - 0.5, 2.5],
      }
      if i == 2:
        results["gap"]["best"] = runner_up  # an interval of another ranking is not quoted
      (run / "results.json").write_text(json.dumps(results))
    text = self.run_main(runs)
    for i, low in enumerate((0.5, -1.25)):
      best, runner_up = sorted(candidates, key=lambda m, i=i: -combined[m][i])[:2]
      self.assertIn(
        f"| {best} | {combined[best][i] - combined[runner_up][i]:.2f} over {runner_up} [{low:+.2f}, +3.00] |", text
      )
    self.assertIn(f"| {best_of(combined, candidates, 2)} | n/a |", text)
    self.assertIn(
      "the best method's lead is beyond the val users' sampling noise on 1 of the 2 runs that measured it.", text
    )
    results = json.loads((runs[0] / "results.json").read_text())
    results["gap"]["intended_ci95"] = [0.0, 0.0]  # two methods that serve the same models: not a val-user test
    (runs[0] / "results.json").write_text(json.dumps(results))
    text = self.run_main(runs)
    self.assertIn(f"over {results['gap']['next']} (same models: consumers only) |", text)
    self.assertIn("beyond the val users' sampling noise on 0 of the 1 runs that measured it.", text)

  def test_a_bc_aligner_ahead_on_every_seed_counts_every_seed(self):
    d = self.random_degradations()
    d["bc-aligner"][:] = [0.5, -0.1]  # combined +0.4: above every other backward-compatible method
    d["finetune-m0"][:, 0] = [-1.0, 0.0, 2.0]  # Keep-All >= Finetune-M0 on the first two only (ties count)
    text = self.run_main(self.make_runs(d))
    self.assertIn(
      "Keep-All ≥ Finetune-M0 on 2 of 3 seeds; BC-Aligner has the best combined degradation on 3 of 3.", text
    )

  def test_report_file_is_written_once_and_never_over_another(self):
    paths = self.make_runs(self.random_degradations(2))
    out = Path(self.create_tempdir().full_path) / "seeds.md"
    text = self.run_main([*paths, "--out", out])
    self.assertEqual(out.read_text(), text)
    with self.assertRaises(SystemExit):
      seeds.main([*map(str, paths), "--out", str(out)])
    self.assertEqual(out.read_text(), text)

  def test_runs_of_different_protocols_unfinished_runs_and_repeated_seeds_are_refused(self):
    d = self.random_degradations()
    cases = {
      "config.lam: 2.0 vs 16.0": self.make_runs(d, {2: {"lam": 16.0}}),
      "seed 10 appears in more than one run": self.make_runs(d, {1: {"seed": 10}}),
    }
    unfinished = self.make_runs(d)
    (unfinished[1] / "results.json").unlink()
    cases["no results.json (not finished"] = unfinished
    at_chance = self.make_runs(d)
    results = json.loads((at_chance[1] / "results.json").read_text())
    results["unintended_not_measurable"] = "0 consumer task(s) left"
    (at_chance[1] / "results.json").write_text(json.dumps(results))
    cases["its unintended side is not measurable on this data (0 consumer task(s) left)"] = at_chance
    for message, paths in cases.items():
      with mock.patch("sys.stderr", new_callable=io.StringIO) as stderr, self.assertRaises(SystemExit) as exit_:
        seeds.main([str(p) for p in paths])
      self.assertEqual(exit_.exception.code, 2)
      self.assertIn(message, stderr.getvalue())
    with mock.patch("sys.stderr", new_callable=io.StringIO), self.assertRaises(SystemExit):
      seeds.main([str(self.make_runs(d)[0])])  # one run: nothing to compare


@pytest.mark.heavy
class CommandLineTest(absltest.TestCase):
  ARGV = [
    "--preset",
    "test",
    "--methods",
    "bc-aligner,post-lin-mloss,keep-all",
    "--epochs",
    "2",
    "--transform-sweep",
    "linear,orthogonal",
    # M_0 at 10x the test preset's rate and consumers trained for 10 epochs: four of the five version-0
    # consumers clearly above chance, so the unintended side is measured (at the preset's own settings every
    # consumer is at chance and the run says the unintended side is not measurable).
    "--learning-rate",
    "0.01",
    "--consumer-epochs",
    "10",
  ]

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = Path(tempfile.mkdtemp(prefix="bcjax-bc-aligner-"))
    cls.code = cli.main([*cls.ARGV, "--out", str(cls.tmp / "run"), "--no-progress"])

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def test_a_run_stopped_while_training_consumers_resumes_to_the_same_results(self):
    """The third consumer task raises (exit 1, partial results naming it); ``--resume`` reads back every trained
    method and the first two tasks, trains the rest and gives the uninterrupted run's results. The run goes on in
    this process, whose compiled steps setUpClass left warm; a SIGKILL right after an orbax stage is saved is resumed
    in a fresh process by test_error_amplification."""
    out, failing = self.tmp / "stopped", f"consumers/{TASKS[2]}"
    with (
      mock.patch.dict("os.environ", {harness.FAULT_ENV: f"fail:{failing}"}),
      contextlib.redirect_stderr(io.StringIO()) as err,
    ):
      self.assertEqual(cli.main([*self.ARGV, "--out", str(out), "--no-progress"]), 1)
    self.assertIn(f"stage {failing!r} failed", err.getvalue())
    partial = json.loads((out / "results.partial.json").read_text())
    self.assertEqual(partial["failed_stage"], failing)
    self.assertTrue({f"consumers/{t}" for t in TASKS[:2]} <= set(partial["finished_stages"]), partial)
    self.assertIn("bc-aligner/v4", partial["finished_stages"])
    self.assertFalse((out / "results.json").exists())
    self.assertEqual(cli.main(["--resume", str(out), "--no-progress"]), 0)
    resumed = json.loads((out / "results.json").read_text())
    assert_same_results(self, resumed, json.loads((self.tmp / "run" / "results.json").read_text()))

  def test_end_to_end_schema(self):
    out = self.tmp / "run"
    self.assertEqual(self.code, 0)
    results = json.loads((out / "results.json").read_text())
    self.assertEqual(set(results["methods"]), {"keep-all", "fix-m0", "non-bc", "post-lin-mloss", "bc-aligner"})
    self.assertIsNone(results["unintended_not_measurable"])
    measured = {t for t, c in results["consumers"].items() if c["reference_auc_ci95"][0] > 0.5}
    self.assertGreaterEqual(len(measured), 2)
    self.assertEqual(set(results["consumers"]) - measured, set(results["consumers_at_chance"]))
    for r in results["methods"].values():  # the unintended side averages the measured tasks only
      assert_close(r["unintended_auc_mean"], np.mean([r["unintended_auc_by_task"][t] for t in measured]), scale=1.0)
    for m, r in results["methods"].items():
      self.assertEqual(len(r["intended_recall50_by_version"]), 5)
      self.assertEqual(len(r["alignment_error_by_version"]), 5)
      self.assertEqual(len(r["unintended_auc_by_task"]), 5)
      for key in (
        "intended_degradation_pct",
        "unintended_degradation_pct",
        "combined_degradation_pct",
        "alignment_error",
        "negative_flip_pct",
        "recall_recovery_pct",
      ):
        self.assertTrue(np.isfinite(r[key]), (m, key))
      self.assertEqual(len(r["published_recall50_by_version"]), 5)
    self.assertEqual(results["methods"]["fix-m0"]["negative_flip_pct"], 0.0)  # its published embeddings are M_0's
    fix = results["methods"]["fix-m0"]  # its published embeddings are M_0's own: its index recovers its own recall
    assert_close(
      fix["recall_recovery_pct"],
      100 * np.mean(fix["intended_recall50_by_version"]) / results["methods"]["non-bc"]["intended_recall50_mean"],
      scale=100.0,
    )
    self.assertEqual(results["methods"]["fix-m0"]["alignment_error"], 0.0)
    self.assertEqual(results["methods"]["keep-all"]["unintended_degradation_pct"], 0.0)
    self.assertEqual(results["methods"]["non-bc"]["intended_degradation_pct"], 0.0)
    for name in ("table.md", "figure3.png", "metrics.jsonl", "config.json"):
      self.assertTrue((out / name).stat().st_size > 0, name)
    self.assertEqual(len(list((out / "registries" / "bc-aligner").iterdir())), 5)  # versions 0..4
    self.assertIn("| bc-aligner |", (out / "table.md").read_text())
    self.assertIn("neg. flips %", (out / "table.md").read_text())
    for m in ("fix-m0", "post-lin-mloss", "bc-aligner"):  # val-user intervals around each intended degradation
      low, high = results["methods"][m]["intended_degradation_ci95"]
      self.assertLessEqual(low, results["methods"][m]["intended_degradation_pct"] + 1e-9)
      self.assertLessEqual(results["methods"][m]["intended_degradation_pct"] - 1e-9, high)
    self.assertEqual(results["methods"]["post-lin-mloss"]["intended_degradation_ci95"], [0.0, 0.0])  # Non-BC's M_k
    for m in ("post-lin-mloss", "bc-aligner"):  # the chain's statistics against its maps multiplied in float64
      registry, product, expected = Registry(out / "registries" / m), None, []
      ws = [np.float64(registry.backward(k)) for k in range(1, 5)]
      for w in ws:
        product = w if product is None else product @ w
        expected.append(np.linalg.svd(product, compute_uv=False)[0])
      # the run computes in float32 (the harness turns x64 off, as the command line has it), the references in float64
      assert_close(results["methods"][m]["chain_norm_by_version"], expected, "linalg", precision="float32")
      # κ_k = (1/k) Σ_j ‖W_(j+1)⋯W_(k-1)‖_F² / D_j (the empty product is I_(D_(k-1)): that term is 1)
      # and R_k's eigenvalues from the same products: R_k = (1/k) Σ_j (D_(k-1)/D_j) (W^j_(k-1))ᵀ W^j_(k-1)
      kappa, ranges = [], []
      for k in range(1, 5):
        d = ws[k - 1].shape[0]
        terms, carried, r = [1.0], np.eye(d), np.eye(d)
        for w in reversed(ws[: k - 1]):
          carried = w @ carried
          terms.append(np.sum(carried**2) / carried.shape[0])
          r = r + d / carried.shape[0] * carried.T @ carried
        kappa.append(np.mean(terms))
        ranges.append(np.linalg.eigvalsh(r / k)[[0, -1]])
      assert_close(results["methods"][m]["multistep_weight_by_version"], kappa, precision="float32")
      assert_close(results["methods"][m]["multistep_pull_range_by_version"], ranges, "linalg", precision="float32")
      self.assertEqual(results["methods"][m]["multistep_weight_by_version"][0], 1.0)
      self.assertIn(f"| {expected[-1]:.2f} | {kappa[-1]:.2f} |", (out / "table.md").read_text())
    for m in ("keep-all", "fix-m0", "non-bc"):  # no backward chain
      self.assertIsNone(results["methods"][m]["chain_norm_by_version"])
      self.assertIsNone(results["methods"][m]["multistep_weight_by_version"])
      self.assertIsNone(results["methods"][m]["multistep_pull_range_by_version"])
    self.assertEqual(
      {results["gap"]["best"], results["gap"]["next"]},
      {"fix-m0", "post-lin-mloss", "bc-aligner"} & {results["gap"]["best"], results["gap"]["next"]},
    )
    self.assertEqual(cli.main(["--preset", "test", "--out", str(out), "--no-progress"]), 2)  # never overwrites

  def test_four_devices_give_the_one_device_run(self):
    """The whole run (M_0, Non-BC, post-hoc fits, BC-Aligner's joint steps with both B_k kinds of the sweep,
    registries, consumers, report) on 4 forced CPU devices, every batch split over them, against setUpClass's run on
    one device. Every logged number (losses, Recall@K) and every continuous result agrees to float32 rounding (the
    policy's deep-composition tolerance: each is the end of a chain of Adam steps through GraphSAGE); an AUC counts
    ordered pairs of examples, so it may move by a pair or two whose logits lie within the runs' rounding of each
    other (one pair is 1/(n+ n-), about 3e-5 here), and what is computed from AUCs with it."""
    out = self.tmp / "four-devices"
    proc = subprocess.run(
      [
        sys.executable,
        "-m",
        "experiments.bc_aligner",
        *self.ARGV,
        "--devices",
        "4",
        "--out",
        str(out),
        "--no-progress",
      ],
      env=forced_device_env(4),
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=540,
    )
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    one = self.tmp / "run"
    records = [[json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()] for d in (one, out)]
    self.assertEqual(len(records[0]), len(records[1]))
    continuous = sum(assert_runs_agree(self, a, b, "metrics.jsonl") for a, b in zip(*records))
    self.assertGreater(continuous, 100)
    results = [json.loads((d / "results.json").read_text()) for d in (one, out)]
    self.assertGreater(assert_runs_agree(self, *results, "results.json"), 100)

  def test_the_seeds_report_reads_finished_runs(self):
    other = self.tmp / "run-next-seed"
    shutil.copytree(self.tmp / "run", other)
    config = json.loads((other / "config.json").read_text())
    config["config"]["seed"] += 1  # the same numbers under another seed: every std is 0
    (other / "config.json").write_text(json.dumps(config))
    with mock.patch("sys.stdout", new_callable=io.StringIO) as stdout:
      self.assertEqual(seeds.main([str(self.tmp / "run"), str(other)]), 0)
    results = json.loads((self.tmp / "run" / "results.json").read_text())
    bc = results["methods"]["bc-aligner"]
    self.assertIn(
      f"| bc-aligner | {bc['combined_degradation_pct']:+.2f} ± 0.00 | {bc['intended_degradation_pct']:+.2f} ± 0.00 |",
      stdout.getvalue(),
    )
    self.assertIn("Finetune-M0 not run; BC-Aligner has the best combined degradation on", stdout.getvalue())

  def test_the_transform_sweep_reruns_the_transformed_methods_with_each_kind(self):
    out = self.tmp / "run"
    results = json.loads((out / "results.json").read_text())
    sweep = results["transform_sweep"]
    self.assertEqual(list(sweep), ["linear", "orthogonal"])
    self.assertEqual(
      {k: set(s["methods"]) for k, s in sweep.items()}, {k: {"post-lin-mloss", "bc-aligner"} for k in sweep}
    )
    for m in ("post-lin-mloss", "bc-aligner"):  # the run's own kind is the main table's row, not a rerun
      self.assertEqual(sweep["linear"]["methods"][m], results["methods"][m])
      self.assertNotEqual(
        sweep["orthogonal"]["methods"][m]["alignment_error"], results["methods"][m]["alignment_error"]
      )
    # the post-hoc kinds fit B_k on the shared Non-BC models: same intended recall, different published embeddings
    self.assertEqual(
      sweep["orthogonal"]["methods"]["post-lin-mloss"]["intended_recall50_by_version"],
      results["methods"]["non-bc"]["intended_recall50_by_version"],
    )
    registry = Registry(out / "registries" / "transform=orthogonal" / "bc-aligner")
    for k in range(1, 5):
      transform, params = registry.backward_map(k)
      self.assertEqual(transform.kind, "orthogonal")
      q = np.asarray(semi_orthogonal(np.float64(params["a"])))  # the registry applies its maps in float64
      assert_close(q @ q.T, np.eye(q.shape[0]), "linalg", scale=1.0)  # D_(k-1) <= D_k: orthonormal rows
    for m in ("post-lin-mloss", "bc-aligner"):  # products of matrices with orthonormal rows keep them: norm 1
      assert_close(sweep["orthogonal"]["methods"][m]["chain_norm_by_version"], [1.0] * 4, "linalg", precision="float32")
      # and with the per-coordinate scaling each carried term keeps the residual's mean pull: κ = 1
      assert_close(
        sweep["orthogonal"]["methods"][m]["multistep_weight_by_version"], [1.0] * 4, "linalg", precision="float32"
      )
    self.assertEqual(Registry(out / "registries" / "bc-aligner").backward_map(1)[0].kind, "linear")
    table = (out / "table.md").read_text()
    self.assertIn("| orthogonal | bc-aligner | joint |", table)
    self.assertIn("| post-lin-mloss | linear |", table)  # the main table's B_k column
    self.assertEqual((out / "transforms.png").read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

  def test_bad_arguments(self):
    with self.assertRaises(SystemExit):
      cli.main(["--methods", "magic"])
    with self.assertRaises(SystemExit):
      cli.main(["--lambda-sweep", "1,x"])
    for flag, value in (
      ("--consumer-hidden", "0"),
      ("--consumer-dropout", "1.0"),
      ("--consumer-seeds", "0"),
      ("--consumer-epochs", "-1"),
      ("--lambda-sweep", "0"),
    ):
      with self.assertRaises(SystemExit, msg=flag):
        EXPERIMENT.parse([flag, value])

  def test_bad_transform_flags_exit_2_before_writing(self):
    out = Path(self.create_tempdir().full_path) / "run"
    for flags in (
      ["--transform", "affine", "--transform-rank", "100"],
      ["--transform-sweep", "linear,affine", "--transform-rank", "100"],
      ["--transform-sweep", "linear,mlp", "--lambda-sweep", "1,4"],
      ["--transform-sweep", "linear,mlp", "--methods", "finetune-m0,joint-notrans"],
      ["--transform-sweep", "linear,rotation"],
    ):
      with self.assertRaises(SystemExit, msg=flags) as exit_:
        cli.main(["--preset", "test", *flags, "--out", str(out), "--no-progress"])
      self.assertEqual(exit_.exception.code, 2, flags)
      self.assertFalse(out.exists(), flags)

  def test_consumer_overrides(self):
    _, _, cfg = EXPERIMENT.parse(
      [
        "--preset",
        "paper",
        "--consumer-hidden",
        "128,256",
        "--consumer-dropout",
        "0,0.5",
        "--consumer-seeds",
        "3",
        "--consumer-epochs",
        "50",
      ]
    )
    self.assertEqual(
      (cfg.consumer_hidden, cfg.consumer_dropout, cfg.consumer_seeds, cfg.consumer_epochs),
      ((128, 256), (0.0, 0.5), 3, 50),
    )
    self.assertEqual(cfg.epochs, PRESETS["paper"].epochs)

  def test_epochs_scale_the_schedule(self):
    _, _, cfg = EXPERIMENT.parse(["--preset", "paper", "--epochs", "100"])
    self.assertEqual((cfg.epochs, cfg.finetune_epochs, cfg.eval_every, cfg.select_after), (100, 50, 2, 10))

  def test_method_keys(self):
    self.assertEqual(len(METHODS), 9)
    self.assertTrue(set(KEEP_LATEST) <= set(METHODS))


if __name__ == "__main__":
  absltest.main()
