"""The data-mesh layer (``bcjax.parallel``) on 4 forced CPU devices, in a subprocess (the device count is fixed when
JAX starts): the mesh, rows sharded and reduced inside ``jax.shard_map`` against float64 NumPy (the Gramian with
``axis_name``), masked padding, row-sharded tables holding 1/N of the bytes per device, replication, and the errors
that name the argument and the counts."""

import contextlib
import functools
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from absl.testing import absltest

from bcjax import parallel
from experiments import harness
from tests._runs import assert_runs_agree
from tests._tolerance import assert_close, row_scale
from tests.conftest import TEST_XLA_FLAGS

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def _known_xla_flag(flag: str) -> str:
  """``flag`` where this jaxlib's XLA knows it, else "" (XLA aborts on an unknown flag; jaxlib 0.8.1, the floor, has
  no ``--xla_cpu_collective_timeout_seconds``)."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flag}
  probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env, capture_output=True, timeout=120)
  return flag if probe.returncode == 0 else ""


def forced_device_env(n: int) -> dict:
  """The environment of a child process with n forced CPU devices. Forced devices are threads sharing the machine's
  cores, so on a loaded 2-core machine one can reach a collective long after the others: XLA's default (abort after
  40 s) would turn that wait into a crash, so the probes allow 10 minutes (the subprocess timeouts still bound every
  test). The client's thread pool gets the 2n + 1 threads its collectives need (bcjax.parallel), without which
  about one run in ten of the 4-device amplification experiment deadlocked on a loaded 2-core machine."""
  env = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "PYTHONPATH": str(ROOT),
    "XLA_FLAGS": f"--xla_force_host_platform_device_count={n} "
    f"--xla_cpu_collective_call_terminate_timeout_seconds=600 "
    f"--xla_cpu_collective_call_warn_stuck_timeout_seconds=120 "
    f"{_known_xla_flag('--xla_cpu_collective_timeout_seconds=600')} {TEST_XLA_FLAGS}",
  }
  env.pop("PJRT_NPROC", None)
  env.pop("NPROC", None)
  parallel.reserve_collective_threads(env)
  return env


PROBE = textwrap.dedent("""
    import json
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from bcjax.gramian import gramian
    from bcjax.parallel import (DATA_AXIS, data_mesh, initialize, is_main_process, replicate, shard_padded_rows,
                                shard_rows, shard_table)

    out = {"devices": jax.device_count(), "main": is_main_process()}
    mesh = data_mesh()
    out["mesh"] = [int(mesh.devices.size), list(mesh.axis_names), int(data_mesh(2).devices.size)]

    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3))
    where = np.arange(12) < 10  # two padded rows, holding huge values that must not leak
    x[~where] = 1e30
    xs, ws = shard_rows(mesh, (x, where))
    out["row_spec"] = str(xs.sharding.spec)
    out["rows_per_device"] = sorted({int(s.data.shape[0]) for s in xs.addressable_shards})
    g = jax.jit(jax.shard_map(lambda a, m: gramian(a, where=m, axis_name=DATA_AXIS), mesh=mesh,
                              in_specs=(jax.P(DATA_AXIS), jax.P(DATA_AXIS)), out_specs=jax.P()))(xs, ws)
    v = x[where]
    out["gramian_err"] = float(np.max(np.abs(np.asarray(g) - v.T @ v / len(v))))

    table = rng.normal(size=(16, 5)).astype(np.float32)
    t = shard_table(mesh, table)
    out["table_bytes"] = [int(table.nbytes), sorted({int(s.data.nbytes) for s in t.addressable_shards})]
    out["table_equal"] = bool(np.array_equal(np.asarray(t), table))
    r = replicate(mesh, {"w": table})["w"]
    out["replicated"] = [bool(np.array_equal(np.asarray(s.data), table)) for s in r.addressable_shards]

    xp, wp = shard_padded_rows(mesh, x[:10], name="q")  # 10 rows on 4 devices: 2 padded rows, masked
    out["padded"] = [list(xp.shape), np.asarray(wp).tolist()]
    gp = jax.jit(jax.shard_map(lambda a, m: gramian(a, where=m, axis_name=DATA_AXIS), mesh=mesh,
                               in_specs=(jax.P(DATA_AXIS), jax.P(DATA_AXIS)), out_specs=jax.P()))(xp, wp)
    out["padded_gramian_err"] = float(np.max(np.abs(np.asarray(gp) - v.T @ v / len(v))))

    # The conceptor time course with its correlation matrices summed over the 4 devices, against no mesh.
    from experiments.conceptors_sts.pipeline import run_time_course
    from experiments.conceptors_sts.synthetic import make_synthetic_sts
    sts = make_synthetic_sts(0)
    out["sts"] = [{m: r["methods"][m]["pcc_by_step"] for m in ("sif", "ca")} | {"specialized":
                  r["corpus_specialized_sif"]} for r in (run_time_course(*sts, progress=False),
                                                         run_time_course(*sts, progress=False, mesh=mesh))]

    # SAGram with its cache split by rows over the 4 devices against the replicated estimator on the whole batch:
    # duplicates (the last occurrence wins) and a padded row holding 1e30.
    from bcjax.gramian import sagram
    n, k = 12, 3
    sa_out = {}
    for beta in ("sag", "saga"):
      whole, split = sagram(n, beta=beta), sagram(n, beta=beta, axis_name=DATA_AXIS, shard_cache=True)
      cache0 = rng.normal(size=(n, k))
      ref = whole.init(cache0)
      st = split.init(cache0)
      st = st._replace(cache=shard_table(mesh, np.asarray(st.cache)))
      spec = type(st)(jax.P(DATA_AXIS, None), jax.P(), jax.P(), jax.P())
      step = jax.jit(jax.shard_map(lambda s_, x_, i_, w_: split.update(s_, x_, indices=i_, where=w_), mesh=mesh,
                                   in_specs=(spec, jax.P(DATA_AXIS), jax.P(DATA_AXIS), jax.P(DATA_AXIS)),
                                   out_specs=(jax.P(), spec)))
      errs = []
      for t in range(6):
        idx = rng.integers(0, n, 8)
        idx[5] = idx[2]
        xb = rng.normal(size=(8, k))
        wb = np.arange(8) != 6
        xb[6] = 1e30
        est_ref, ref = whole.update(ref, xb, indices=idx, where=wb)
        est, st = step(st, *shard_rows(mesh, (xb, idx, wb)))
        errs.append(float(np.max(np.abs(np.asarray(est.gramian) - np.asarray(est_ref.gramian)))))
      sa_out[beta] = {"estimate_err": max(errs), "cache_err": float(np.max(np.abs(np.asarray(st.cache) -
                      np.asarray(ref.cache)))), "cache_bytes": sorted({int(s.data.nbytes) for s in
                      st.cache.addressable_shards}), "scale": float(np.max(np.abs(np.asarray(est_ref.gramian))))}
    out["sagram_sharded"] = sa_out
    try:
      sagram(n, shard_cache=True)
      out["sagram_error"] = None
    except ValueError as e:
      out["sagram_error"] = str(e)

    errors = {}
    for name, call in (("devices", lambda: data_mesh(5)), ("devices0", lambda: data_mesh(0)),
                       ("rows", lambda: shard_rows(mesh, np.zeros((10, 2)))),
                       ("ragged", lambda: shard_rows(mesh, (np.zeros((8, 2)), np.zeros(4)))),
                       ("table", lambda: shard_table(mesh, np.zeros((10, 2)), name="item_table")),
                       ("port", lambda: initialize(2, 0, "localhost:99999")),
                       ("process", lambda: initialize(2, 2, "localhost:1234")),
                       ("count", lambda: initialize(0, 0, "localhost:1234"))):
      try:
        call()
        errors[name] = None
      except ValueError as e:
        errors[name] = str(e)
    out["errors"] = errors

    # The client pool this process got, and data_mesh's warning when the pool is too small for its collectives.
    import os
    import warnings
    out["pool"] = os.environ.get("PJRT_NPROC")
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      data_mesh()
      os.environ["PJRT_NPROC"] = "4"
      data_mesh(2)
    out["pool_warnings"] = [str(w.message) for w in caught]
    print("RESULT " + json.dumps(out))
""")


# The two-tower step (SOGram and candidate sampling) for 10 steps on 1 device (no mesh) and on the 4-device mesh from
# the same seed, in float32; then the gramian_training experiment's command line on 1 and 4 devices, and its errors.
TWO_TOWER_PROBE = textwrap.dedent("""
    import json, os
    from pathlib import Path
    import jax
    import numpy as np
    from flax import nnx
    from bcjax.data import synthetic_link_corpus
    from bcjax.gramian import batch_gramian, sogram
    from bcjax.models import TwoTower
    from bcjax.parallel import DATA_AXIS, data_mesh, replicate
    from experiments import harness
    from experiments.gramian_training.experiment import EXPERIMENT
    from experiments.two_tower.data import train_data
    from experiments.two_tower.softmax import softmax_train_step
    from experiments.two_tower.train import gramian_train_step, init_state, make_optimizer

    corpus = synthetic_link_corpus(400, 3000, seed=0)

    def run(kind, mesh):
      axis = None if mesh is None else DATA_AXIS
      est = {"sogram": sogram(0.1, axis_name=axis), "sampling": batch_gramian(axis_name=axis)}.get(kind)
      data = train_data(corpus, "sqrt")
      model = TwoTower(corpus.vocab_size, 8, len(corpus.left.groups), len(corpus.right.groups), (16, 8),
                       rngs=nnx.Rngs(params=0))
      graphdef, params = nnx.split(model)
      # Adagrad updates only the table rows a step uses (re-indexed bags on the global view, then split)
      opt = make_optimizer("adagrad", 0.1) if kind in ("sogram", "softmax") else make_optimizer("adam", 1e-2)
      state = init_state(graphdef, params, opt, est, 8)
      if kind == "softmax":  # in-batch negatives: every device's right entities are candidates
        step = softmax_train_step(graphdef, opt, batch_size=64, temperature=0.5, mesh=mesh)
      else:  # kind "exact": the oracle's full-corpus Gramians, in the global view
        step = gramian_train_step(graphdef, opt, est, lam=0.5, batch_size=64, penalty_batch_size=32, mesh=mesh,
                                  exact_chunk_size=256)
      if mesh is not None:
        state, data = replicate(mesh, state), replicate(mesh, data)
      losses = []
      for i in range(10):
        state, metrics = step(state, data, jax.random.fold_in(jax.random.key(1), i))
        losses.append(float(metrics["loss"]))
      leaves = {jax.tree_util.keystr(p): np.asarray(x).tolist()
                for p, x in jax.tree_util.tree_flatten_with_path(state)[0]}
      return {"losses": losses, "state": leaves, "replicated": all(x.sharding.is_fully_replicated
                                                                   for x in jax.tree.leaves(state.params))}

    out = {kind: {"one": run(kind, None), "four": run(kind, data_mesh(4))}
           for kind in ("sogram", "sampling", "exact", "softmax")}
    try:
      gramian_train_step(None, None, None, lam=1.0, batch_size=66, penalty_batch_size=32, mesh=data_mesh(4))
    except ValueError as e:
      out["step_error"] = str(e)

    def cli(*argv):
      try:
        return harness.main(EXPERIMENT, ["--preset", "test", "--steps", "10",
                                          "--methods", "sogram-uniform,softmax-logq", "--no-progress", *argv])
      except SystemExit as e:
        return e.code

    tmp = Path(os.environ["PROBE_DIR"])  # the test keeps the 4-device run: MultiProcess runs are compared with it
    out["cli"] = [cli("--devices", "1", "--out", str(tmp / "one")), cli("--devices", "4", "--out", str(tmp / "four"))]
    out["cli_metrics"] = [[json.loads(l) for l in (tmp / name / "metrics.jsonl").read_text().splitlines()]
                          for name in ("one", "four")]
    out["cli_errors"] = [cli("--devices", "8", "--out", str(tmp / "e1")), cli("--batch-size", "66", "--out",
                         str(tmp / "e2")), (tmp / "e1").exists() or (tmp / "e2").exists()]

    # The estimation experiment: SAGram (its batch gathered into the replicated cache), SOGram and sampling, each
    # batch split over the devices, along the same trajectory.
    from experiments.gramian_estimation.experiment import EXPERIMENT as estimation
    for name, flags in (("estimation1", ["--devices", "1"]), ("estimation4", ["--devices", "4"]),
                        ("estimation4-sharded", ["--devices", "4", "--shard-tables"])):
      code = harness.main(estimation, ["--preset", "test", "--batch-sizes", "32", "--alphas", "0.5", "--no-progress",
                                       *flags, "--out", str(tmp / name)])
      out[name] = [code, json.loads((tmp / name / "results.json").read_text())["errors"]]
    print("RESULT " + json.dumps(out))
""")


# The BC-Aligner joint step (BC-Aligner's multi-step alignment) for 10 steps on 1 device and on 4.
BC_ALIGNER_PROBE = textwrap.dedent("""
    import json
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx
    from bcjax.alignment import init_backward
    from bcjax.data import load_graph_dataset
    from bcjax.parallel import data_mesh
    from experiments.bc_aligner.configs import PRESETS
    from experiments.bc_aligner.data import BPRSampler, attribute_sizes, version_data, with_item_ids
    from experiments.bc_aligner.train import AlignTarget, StepInputs, bc_train_step, embed, new_model
    from experiments.common import adam
    from experiments.train_step import fresh_state

    cfg = PRESETS["test"]
    graph = with_item_ids(load_graph_dataset("synthetic", None, seed=0, **dict(cfg.synthetic)))
    vd = version_data(graph)[1]
    sizes = attribute_sizes(graph)
    previous = new_model(sizes, 1, 8, jax.random.key(0))
    history = (jnp.asarray(np.random.default_rng(0).normal(size=(8, 8)), jnp.float32),)
    target = AlignTarget(embed(previous.eval_def, previous.params, previous.batch_stats, vd.inputs), history)
    batches = list(BPRSampler(vd.split, cfg.batch_size).epoch(np.random.default_rng(0)))

    def run(mesh):
      model = new_model(sizes, 2, 12, jax.random.key(1))
      params = {"model": model.params, "w": init_backward(jax.random.key(2), 8, 12)}
      state = fresh_state(adam(cfg.learning_rate), params, model.batch_stats)
      step = bc_train_step(model.train_def, "linear-mloss", cfg.learning_rate, cfg.weight_decay, cfg.lam, mesh)
      losses = []
      for i in range(10):
        state, metrics = step(state, StepInputs(vd.inputs, batches[i % len(batches)], target, 1.0),
                              jax.random.key(i))
        losses.append([float(metrics[k]) for k in ("loss", "bpr", "align")])
      h = nnx.merge(model.train_def, state.params["model"], state.extra, copy=True)(vd.inputs)
      flat = jax.tree_util.tree_flatten_with_path(state)[0]
      return {"losses": losses, "leaves": {jax.tree_util.keystr(p): np.asarray(x).tolist() for p, x in flat},
              "train_mode_embeddings": np.asarray(h).tolist()}

    out = {"one": run(None), "four": run(data_mesh(4))}

    # Post-hoc B_k fits (3 epochs of folded batches) with each step's rows split over the 4 devices.
    import dataclasses
    from experiments.bc_aligner.train import train_posthoc
    short = dataclasses.replace(cfg, posthoc_epochs=3, eval_every=1)
    current = new_model(sizes, 2, 12, jax.random.key(1))
    z_new = np.asarray(embed(current.eval_def, current.params, current.batch_stats, vd.inputs))
    out["posthoc"] = {}
    for kind in ("linear-mloss", "linear-sloss"):
      aim = target if kind == "linear-mloss" else target._replace(history=())
      fits = [train_posthoc(vd, z_new, aim, kind, short, jax.random.key(3), mesh=mesh)
              for mesh in (None, data_mesh(4))]
      out["posthoc"][kind] = [[np.asarray(w).tolist(), float(err)] for w, err in fits]
    print("RESULT " + json.dumps(out))
""")


def run_probe(probe: str = PROBE, **env_vars: str):
  env = forced_device_env(4) | env_vars
  proc = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, timeout=540)
  if proc.returncode:
    raise AssertionError(f"the 4-device probe failed:\n{proc.stderr[-3000:]}")
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line.removeprefix("RESULT "))


@pytest.mark.heavy
class DataMeshTest(absltest.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.out = run_probe()

  def test_mesh(self):
    self.assertEqual(self.out["devices"], 4)
    self.assertTrue(self.out["main"])
    self.assertEqual(self.out["mesh"], [4, ["data"], 2])

  def test_sharded_rows_reduce_to_the_global_gramian(self):
    self.assertIn("data", self.out["row_spec"])
    self.assertEqual(self.out["rows_per_device"], [3])
    self.assertLess(self.out["gramian_err"], 1e-12)  # float64: the psum of per-device sums, padding masked

  def test_padded_rows_are_masked_out_of_the_reduction(self):
    shape, where = self.out["padded"]
    self.assertEqual(shape, [12, 3])
    self.assertEqual(where, [True] * 10 + [False] * 2)
    self.assertLess(self.out["padded_gramian_err"], 1e-12)

  def test_conceptor_time_course_on_four_devices_equals_one(self):
    one, four = self.out["sts"]
    for method in ("sif", "ca"):
      assert_close(np.asarray(four[method]), np.asarray(one[method]), "linalg")  # float64 eigh / solves
    for genre, value in one["specialized"].items():
      assert_close(four["specialized"][genre], value, "linalg")

  def test_sagram_with_a_row_sharded_cache_equals_the_replicated_one(self):
    for beta, r in self.out["sagram_sharded"].items():
      self.assertLess(r["estimate_err"], 1e-12 * r["scale"], beta)  # float64: exact up to summation order
      self.assertLess(r["cache_err"], 1e-12, beta)
      self.assertEqual(r["cache_bytes"], [12 * 3 * 8 // 4], beta)  # a quarter of the cache on each device
    self.assertIn("`shard_cache` splits the cache over the devices of `axis_name`", self.out["sagram_error"])

  def test_tables_split_by_rows_and_replicas(self):
    total, per_device = self.out["table_bytes"]
    self.assertEqual(per_device, [total // 4])  # 1/N of the table on each device
    self.assertTrue(self.out["table_equal"])
    self.assertEqual(self.out["replicated"], [True] * 4)

  def test_errors_name_the_argument_and_counts(self):
    e = self.out["errors"]
    self.assertIn("`num_devices` (--devices) must be an integer in [1, 4]", e["devices"])
    self.assertIn("got 5", e["devices"])
    self.assertIn("got 0", e["devices0"])
    self.assertIn("`batch` has 10 rows in this process, not divisible by its 4 devices", e["rows"])
    self.assertIn("same leading (row) axis", e["ragged"])
    self.assertIn("`item_table` has 10 rows, not divisible by the mesh's 4 devices", e["table"])
    self.assertIn("`coordinator` must be HOST:PORT", e["port"])
    self.assertIn("`process_id` must be an integer in [0, 1], got 2", e["process"])
    self.assertIn("`num_processes` must be an integer in [1, inf], got 0", e["count"])

  def test_a_pool_too_small_for_the_collectives_is_named(self):
    self.assertEqual(self.out["pool"], "9")  # 2 x 4 + 1, set by forced_device_env
    [warning] = self.out["pool_warnings"]  # none for the 9-thread pool, one for the 4-thread one
    self.assertIn("4 CPU devices share an XLA client pool of about 4 threads", warning)
    self.assertIn("set PJRT_NPROC=9", warning)


class ReserveCollectiveThreadsTest(absltest.TestCase):
  """bcjax.parallel.reserve_collective_threads on environment dicts (no backend starts)."""

  def test_forced_devices_get_2n_plus_1_threads(self):
    for n in (2, 4, 7):
      env = {
        "XLA_FLAGS": f"--xla_backend_optimization_level=0 --xla_force_host_platform_device_count={n}",
        "PJRT_NPROC": "1",
      }
      self.assertEqual(parallel.reserve_collective_threads(env), 2 * n + 1)
      self.assertEqual(env["PJRT_NPROC"], str(2 * n + 1))
      self.assertEqual(parallel.collective_threads_needed(n), 2 * n + 1)

  def test_the_last_forced_count_wins(self):
    env = {
      "XLA_FLAGS": "--xla_force_host_platform_device_count=2 --xla_force_host_platform_device_count=6",
      "PJRT_NPROC": "3",
    }
    self.assertEqual(parallel.forced_cpu_devices(env), 6)
    self.assertEqual(parallel.reserve_collective_threads(env), 13)

  def test_large_enough_pools_and_single_devices_are_left_alone(self):
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "PJRT_NPROC": "32"}
    self.assertIsNone(parallel.reserve_collective_threads(env))
    self.assertEqual(env["PJRT_NPROC"], "32")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "NPROC": "9"}  # XLA's second variable
    self.assertIsNone(parallel.reserve_collective_threads(env))
    self.assertNotIn("PJRT_NPROC", env)
    for env in ({}, {"XLA_FLAGS": "--xla_force_host_platform_device_count=1", "PJRT_NPROC": "1"}):
      self.assertIsNone(parallel.reserve_collective_threads(env))
      self.assertEqual(parallel.forced_cpu_devices(env), 1)


if __name__ == "__main__":
  absltest.main()


# ICL's fused steps on graphs (GCN) and images (small CNN): each step kind for 10 steps (ICL's agents: 3); every step
# starts both runs from the one-device carry (replicated on the mesh) with the same batch, cut into 4 device blocks
# for the mesh (every third batch short, so some devices hold no sample).
ICL_PROBE = textwrap.dedent("""
    import dataclasses, json, tempfile
    from pathlib import Path
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from bcjax.contrastive import AgentConfig
    from bcjax.parallel import DATA_AXIS, data_mesh, shard_blocks
    from experiments import harness
    from experiments.icl.configs import PRESETS
    from experiments.icl.data import common_budget, stack_batches
    from experiments.icl.datasets import load_dataset
    from experiments.icl.experiment import EXPERIMENT
    from experiments.icl.steps import MetaRule, adam_step, init_state, meta_step
    from experiments.icl.train import split_encoder

    cfg = dataclasses.replace(PRESETS["test"], dropout=0.0, image_width=4, image_features=8)
    B, NEW_NUM, OLD_NUM = 32, 10, 21
    # Small agents that start learning at once (the 3 steps exercise act, observe and learn)
    AGENT = AgentConfig(actor_hidden=4, critic_hidden=4, window=8, batch_size=4, warmup=1, buffer_size=64)
    mesh = data_mesh(4)
    NEGATIVES = {"nce-i": (None, 0), "distill": (None, 0), "nce-ii": (B - 1, B - 1), "mixed": (OLD_NUM, OLD_NUM)}

    def leaves(tree):
      return {jax.tree_util.keystr(p): np.asarray(x).tolist() for p, x in
              jax.tree_util.tree_flatten_with_path(tree)[0] if np.issubdtype(np.asarray(x).dtype, np.number)}

    def batches(data, devices):
      rng = np.random.default_rng(7)  # both runs draw the same samples and augmentations
      def views(i, extra, slots):
        idx = rng.choice(data.num, B if i % 3 else 12 + i, replace=False)
        ex = None if extra is None else rng.choice(data.num, extra, replace=False)
        v, o = data.views(idx, B, rng, ex, slots, None, devices)
        return v if ex is None else (v, o)
      return views

    def run(data, kind, steps):
      meshes = (None, mesh)
      enc = {m: split_encoder(data.new_model(cfg, jax.random.key(0), None if m is None else DATA_AXIS))
             for m in meshes}
      teacher = (enc[None].params, enc[None].stats)

      def make(m):
        e = enc[m]
        if kind in ("meta", "icl"):
          # the experiment's choice: inner steps scanned on graphs, unrolled on images
          rule = MetaRule(AGENT if kind == "icl" else None, 1e-2, "sgd", 1e-2, 1e-3, 1e-5,
                          unroll=data.kind == "images")
          return meta_step(e.train_def, 0.1, NEW_NUM, rule, m)
        return adam_step(e.train_def, kind, 0.1, 1e-3, 1e-5, NEW_NUM if kind == "mixed" else None,
                         e.eval_def if kind == "distill" else None, m)
      step = {m: make(m) for m in meshes}
      carry = init_state(enc[None].params, enc[None].stats, 1e-3, 1e-5, AGENT if kind == "icl" else None,
                         jax.random.key(1), 1.0)
      views = {m: batches(data, 1 if m is None else 4) for m in meshes}
      out = {"losses": []}
      for i in range(steps):
        key = jax.random.key(100 + i)
        host = jax.device_get(carry)
        results = {}
        for m in meshes:
          place = (lambda b, axis=0: b) if m is None else (lambda b, axis=0, m=m: shard_blocks(m, b, axis=axis))
          if kind in ("meta", "icl"):
            *sup, q = common_budget([views[m](i, B - 1, B - 1) for _ in range(2)] + [views[m](i, OLD_NUM, OLD_NUM)])
            batch = (place(stack_batches(sup), 1), place(q), np.float32(0.3))
          else:
            batch = (place(views[m](i, *NEGATIVES[kind])), np.float32(1.0 if kind == "distill" else 0.3),
                     teacher if kind == "distill" else None)
          start = jax.tree.map(np.array, host)
          if m is not None:
            start = jax.device_put(start, NamedSharding(m, jax.P()))
          results[m] = step[m](start, batch, key)
        (c1, l1), (c4, l4) = results[None], results[mesh]
        first = lambda metrics: float(np.asarray(metrics["loss"]))
        out["losses"].append([first(l1), first(l4)])
        out["replicated"] = all(x.sharding.is_fully_replicated for x in jax.tree.leaves(c4))
        if i == steps - 1:  # the last step's carries; every earlier step shows in its successor's loss
          out["one"], out["four"] = leaves(c1), leaves(c4)
        carry = c1
      return out

    out = {}
    # Each kind once on graphs, the meta step with learned rates (inner steps scanned, the agents' updates on every
    # device); on images the mixed step (the CNN's BatchNorm over every device's pixels, the in-batch new negatives
    # of device blocks). The image meta step's unrolled inner steps equal the scanned ones on one device
    # (test_icl_optimization), and its compile alone took a quarter of this probe.
    for dataset, kinds in (("synthetic-graphs", ("nce-i", "nce-ii", "mixed", "distill", "icl")),
                           ("digits-2", ("mixed",))):
      data = load_dataset(dataset, seed=0)
      for kind in kinds:
        out[f"{dataset} {kind}"] = run(data, kind, 3 if kind == "icl" else 10)

    def cli(*argv):
      try:
        return harness.main(EXPERIMENT, ["--preset", "test", "--no-progress", *argv])
      except SystemExit as e:
        return e.code
    tmp = Path(tempfile.mkdtemp())
    out["cli_error"] = [cli("--devices", "3", "--out", str(tmp / "e")), (tmp / "e").exists()]
    print("RESULT " + json.dumps(out))
""")


def f32(x) -> np.ndarray:
  """Values that were float32 before the probe's JSON, compared at float32 precision."""
  return np.asarray(x, np.float32)


@pytest.mark.heavy
class TwoTowerDataParallelTest(absltest.TestCase):
  """4 devices against 1 from the same seed: the global batch is the same, each device takes a quarter of its rows,
  and the psum'd means and Gramians make every step the same up to float32 summation order. The probe's 4-device
  command-line run is also the reference of the two-process run (2 processes x 2 devices)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.runs = Path(tempfile.mkdtemp(prefix="bcjax-two-tower-"))
    cls.addClassCleanup(shutil.rmtree, cls.runs, ignore_errors=True)
    cls.out = run_probe(TWO_TOWER_PROBE, PROBE_DIR=str(cls.runs))

  def test_ten_steps_on_four_devices_equal_one(self):
    for kind in ("sogram", "sampling", "exact", "softmax"):
      one, four = self.out[kind]["one"], self.out[kind]["four"]
      assert_close(f32(four["losses"]), f32(one["losses"]), "reduction")
      self.assertEqual(set(four["state"]), set(one["state"]))
      for path, b in one["state"].items():  # parameters, Adam moments or Adagrad sums, estimator state, step
        # The softmax is invariant to a shift of every candidate v_j (it adds <u_i, c> to a whole row of logits),
        # so the right tower's output bias has a zero gradient in exact arithmetic: its computed gradient is
        # rounding noise, which Adam normalises into full-size steps on any device count.
        if kind == "softmax" and "['right']['layers'][1]['bias']" in path:
          continue
        # float32 reduction tolerance (1e-5) relative to the leaf's largest entry
        assert_close(
          f32(four["state"][path]),
          f32(b),
          "reduction",
          scale=float(np.max(np.abs(b), initial=0.0)) or 1.0,
          err_msg=f"{kind} {path}",
        )
      self.assertTrue(four["replicated"])

  def test_the_experiment_on_four_devices_logs_what_one_logs(self):
    self.assertEqual(self.out["cli"], [0, 0])
    one, four = self.out["cli_metrics"]
    self.assertEqual(len(one), len(four))
    for a, b in zip(one, four):
      for key in ("loss", "observed_loss", "val_map@10"):
        if key in a:
          assert_close(f32(b[key]), f32(a[key]), "reduction", scale=abs(a[key]) or 1.0)

  def test_gramian_estimators_on_four_devices_track_what_one_tracks(self):
    code_one, one = self.out["estimation1"]
    self.assertEqual(code_one, 0)
    names = [(side, name) for side in one for name in one[side]]
    self.assertTrue(any(name.startswith("sagram") for _, name in names))
    for run in ("estimation4", "estimation4-sharded"):  # replicated SAGram caches, then split by rows
      code, four = self.out[run]
      self.assertEqual(code, 0, run)
      for side, name in names:  # normalised Frobenius errors of the estimates, float32
        assert_close(f32(four[side][name]), f32(one[side][name]), "reduction", err_msg=f"{run} {name}")

  def test_devices_and_batch_errors(self):
    self.assertIn("`batch_size`=66 is not divisible by the 4 devices", self.out["step_error"])
    self.assertEqual(self.out["cli_errors"], [2, 2, False])  # exit 2, nothing written

  def test_two_processes_equal_one_process_on_four_devices_and_only_process_0_writes(self):
    """The probe's command-line run on 4 devices of one process (the same flags) is the reference."""
    tmp = Path(self.create_tempdir().full_path)
    # SOGram (psum'd Gramians) and the sampled softmax (in-batch negatives all-gathered across both processes)
    argv = ["--steps", "10", "--methods", "sogram-uniform,softmax-logq"]  # the probe's cli() flags
    single = self.runs / "four"
    self.assertEqual(self.out["cli"][1], 0)
    procs = _two_processes([*argv, "--out", str(tmp / "multi")], timeout_s=120)
    outputs = [p.communicate(timeout=300) for p in procs]
    self.assertEqual([p.returncode for p in procs], [0, 0], [e[-2000:] for _, e in outputs])
    self.assertIn("outputs in", outputs[0][0])
    self.assertNotIn("outputs in", outputs[1][0])  # process 1 reports nothing and writes nothing
    self.assertEqual(_files(tmp / "multi"), _files(single))
    read = lambda d: [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines() if "loss" in l]
    one, two = read(single), read(tmp / "multi")
    self.assertEqual(len(one), len(two))
    self.assertNotEqual(len(one), 0)
    self.assertEqual({r["method"] for r in one}, {"sogram-uniform", "softmax-logq"})
    for a, b in zip(one, two):
      self.assertEqual((a["method"], a["step"]), (b["method"], b["step"]))
      for key in ("loss", "observed_loss", "penalty_estimate", "val_map@10"):
        if key in a:  # the softmax has no penalty
          assert_close(f32(b[key]), f32(a[key]), "reduction", scale=abs(a[key]) or 1.0)
    self.assertNotIn("--process-id", json.loads((tmp / "multi" / "config.json").read_text())["argv"])


@pytest.mark.heavy
class BCAlignerDataParallelTest(absltest.TestCase):
  """The joint step with BC-Aligner's loss: the batch rows split over 4 devices, the full-graph forward (BatchNorm
  over all nodes) whole on each, against 1 device."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.out = run_probe(BC_ALIGNER_PROBE)

  def test_ten_steps_on_four_devices_equal_one(self):
    one, four = self.out["one"], self.out["four"]
    for column in range(3):  # the loss, BPR and the alignment term, each at its own scale
      assert_close(f32(four["losses"])[:, column], f32(one["losses"])[:, column], "reduction")
    # Every leaf: parameters, Adam moments and BatchNorm statistics. The SAGE biases right before BatchNorm are held
    # at their exact (zero) gradient, so they and the running means do not follow rounding noise either.
    compared = 0
    for path, b in one["leaves"].items():
      if not np.size(b):
        continue
      assert_close(f32(four["leaves"][path]), f32(b), "reduction", scale=float(np.max(np.abs(b))) or 1.0, err_msg=path)
      compared += 1
    self.assertGreater(compared, 20)
    for stat in ("['var']", "['mean']", "lin_l']['bias"):  # BatchNorm statistics and the held biases are compared
      self.assertTrue(any(stat in p for p in one["leaves"]), stat)
    # An embedding coordinate near zero carries the rounding of its whole row, which the network summed it from.
    embeddings = f32(one["train_mode_embeddings"])
    assert_close(f32(four["train_mode_embeddings"]), embeddings, "network", scale=row_scale(embeddings))

  def test_posthoc_fits_on_four_devices_equal_one(self):
    for kind, ((w_one, err_one), (w_four, err_four)) in self.out["posthoc"].items():
      assert_close(f32(w_four), f32(w_one), "reduction", err_msg=kind)
      assert_close(np.float32(err_four), np.float32(err_one), "reduction", err_msg=kind)

  def test_fit_posthoc_splits_only_given_batches(self):
    from bcjax.alignment import fit_posthoc

    with self.assertRaisesRegex(ValueError, "`axis_name` splits given `batches`"):
      fit_posthoc(np.ones((4, 2)), np.ones((4, 2)), key=jax.random.key(0), axis_name="data")


class ShardBlocksTest(absltest.TestCase):
  def test_blocks_are_placed_and_a_missing_axis_is_named(self):
    mesh = parallel.data_mesh(1)
    x = np.arange(12.0).reshape(3, 1, 4)
    placed = parallel.shard_blocks(mesh, {"x": x}, axis=1)
    np.testing.assert_array_equal(np.asarray(placed["x"]), x)
    self.assertEqual(placed["x"].sharding.spec, jax.P(None, parallel.DATA_AXIS))
    with self.assertRaisesRegex(ValueError, r"`views` needs an axis 2 .* got shape \(3, 4\)"):
      parallel.shard_blocks(mesh, np.zeros((3, 4)), axis=2, name="views")


class ReplicateTest(absltest.TestCase):
  def test_a_step_fed_its_own_replicated_outputs_compiles_once(self):
    """State placed by ``replicate`` carries the sharding a jitted step gives its outputs, so the second call reuses
    the first call's program (fresh host state would compile the step twice)."""
    mesh = parallel.data_mesh(1)
    state = {"w": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32), "step": np.zeros((), np.int32)}
    step = jax.jit(lambda s: jax.tree.map(lambda x: x + 1, s))
    placed = parallel.replicate(mesh, state)
    for _ in range(3):
      placed = step(placed)
    self.assertEqual(step._cache_size(), 1)
    np.testing.assert_array_equal(np.asarray(placed["w"]), np.full((3, 2), 4.0, np.float32))
    self.assertTrue(placed["w"].sharding.is_fully_replicated)


@pytest.mark.heavy
class ICLDataParallelTest(absltest.TestCase):
  """ICL's NCE-I, NCE-II, mixed NCE-I, distillation, meta and ICL (learned rates) steps: the batch in 4 device blocks
  against the whole batch on 1 device, each step from the same carry. Global InfoNCE denominators and negative sets,
  BatchNorm over every device's real rows (graphs: nodes; images: pixels) and one update on all devices."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.out = run_probe(ICL_PROBE)

  def test_steps_on_four_devices_equal_one(self):
    runs = {k: v for k, v in self.out.items() if k != "cli_error"}
    self.assertLen(runs, 6)
    for name, run in runs.items():
      losses = np.asarray(run["losses"], np.float32)
      self.assertTrue(np.all(np.isfinite(losses)), name)
      assert_close(losses[:, 1], losses[:, 0], "reduction", scale=1.0, err_msg=name)  # losses are O(1) or near 0
      self.assertTrue(run["replicated"], name)
      self.assertEqual(set(run["four"]), set(run["one"]), name)
      compared = 0
      for path, b in run["one"].items():
        a = run["four"][path]
        if not np.size(b):
          continue
        if np.issubdtype(np.asarray(b).dtype, np.integer):  # Adam's count, the agents' buffer positions
          np.testing.assert_array_equal(a, b, err_msg=f"{name} {path}")
          continue
        scale = float(np.max(np.abs(b))) or 1.0
        if ".mu" in path or ".nu" in path or ".extra[1]" in path:  # Adam's moments, the agents' states
          # Adam's moments are the raw gradients, whose float32 rounding follows the summation order; NCE-II's are
          # differences of nearly equal softmax sums (r ~ 1), so they keep less precision than the steps they give.
          assert_close(
            f32(a),
            f32(b),
            "statistical",
            rtol=0.0,
            atol=(1e-2 if "nce-ii" in name else 2e-4) * scale,
            err_msg=f"{name} {path}",
          )
        else:  # parameters and BatchNorm statistics
          assert_close(f32(a), f32(b), "reduction", scale=scale, err_msg=f"{name} {path}")
        compared += 1
      self.assertGreater(compared, 5, name)

  def test_a_batch_the_devices_do_not_divide_is_refused(self):
    self.assertEqual(self.out["cli_error"], [2, False])  # exit 2 before the run directory exists


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _launch(argv: list[str], devices: int, module: str = "experiments.gramian_training") -> subprocess.Popen:
  env = forced_device_env(devices)
  return subprocess.Popen(
    [sys.executable, "-m", module, "--preset", "test", "--no-progress", *argv],
    env=env,
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def _two_processes(
  argv: list[str], timeout_s: int, module: str = "experiments.gramian_training"
) -> list[subprocess.Popen]:
  port = _free_port()
  return [
    _launch(
      [
        *argv,
        "--num-processes",
        "2",
        "--process-id",
        str(i),
        "--coordinator",
        f"127.0.0.1:{port}",
        "--peer-timeout",
        str(timeout_s),
      ],
      devices=2,
      module=module,
    )
    for i in range(2)
  ]


def _files(folder: Path) -> list[str]:
  """The run folder's files; an orbax checkpoint (``<stage>.orbax``) counts as one, its inner layout being orbax's
  (content-hashed names)."""
  names = set()
  for path in folder.rglob("*"):
    relative = path.relative_to(folder)
    checkpoint = next((i for i, part in enumerate(relative.parts) if part.endswith(".orbax")), None)
    names.add(str(relative if checkpoint is None else Path(*relative.parts[: checkpoint + 1])))
  return sorted(names)


@pytest.mark.heavy
class MultiProcessTest(absltest.TestCase):
  """Real jax.distributed runs on 127.0.0.1: 2 processes x 2 forced CPU devices (gloo collectives)."""

  def test_alignment_chains_on_two_processes_of_two_devices_equal_one_device(self):
    """The error-amplification experiment (version chains of MLP encoders trained jointly with the single- and
    multi-step losses, post-hoc B_k fits, orbax checkpoints of every model, keep-latest registries) with every batch
    split over 2 processes x 2 devices: the training log and every number of the results of one process on one
    device, and only process 0 writes (a second writer of an orbax checkpoint killed a run). The BC-Aligner joint
    step with its full-graph BatchNorm on 4 devices equals 1 in BCAlignerDataParallelTest."""
    tmp = Path(self.create_tempdir().full_path)
    module = "experiments.error_amplification"
    single = _launch(["--out", str(tmp / "single")], devices=1, module=module)
    self.assertEqual(single.wait(timeout=400), 0, single.stderr.read()[-2000:])
    procs = _two_processes(["--out", str(tmp / "multi")], timeout_s=120, module=module)
    outputs = [p.communicate(timeout=400) for p in procs]
    self.assertEqual([p.returncode for p in procs], [0, 0], [e[-2000:] for _, e in outputs])
    self.assertNotIn("outputs in", outputs[1][0])
    files = _files(tmp / "multi")
    self.assertEqual(files, _files(tmp / "single"))
    self.assertIn("stages/bc-aligner/v2.orbax", files)
    self.assertIn("registries/bc-aligner/version-000002.bcv", files)
    read = lambda d: [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()]
    one, two = read(tmp / "single"), read(tmp / "multi")
    self.assertEqual(len(one), len(two))
    logged = 0
    for a, b in zip(one, two):
      self.assertEqual(set(a), set(b))
      self.assertEqual(
        [a.get(k) for k in ("method", "version", "step")], [b.get(k) for k in ("method", "version", "step")]
      )
      for key in ("loss", "task", "align"):
        if key in a:  # float32 sums over 4 device blocks against one: rounding level
          assert_close(f32(b[key]), f32(a[key]), "reduction", scale=abs(a[key]) or 1.0, err_msg=f"{a} {key}")
          logged += 1
    self.assertGreater(logged, 30)

    def numbers(tree):
      if isinstance(tree, dict):
        return [x for key in sorted(tree) for x in numbers(tree[key])]
      if isinstance(tree, list):
        return [x for item in tree for x in numbers(item)]
      return [tree] if isinstance(tree, float) else []

    results = [json.loads((tmp / d / "results.json").read_text()) for d in ("single", "multi")]
    self.assertEqual(set(results[0]["methods"]), set(results[1]["methods"]))
    self.assertIn("bc-aligner", results[0]["methods"])
    x, y = numbers(results[0]), numbers(results[1])
    self.assertEqual(len(x), len(y))
    self.assertGreater(len(x), 20)
    for a, b in zip(x, y):  # the experiment computes in float32 (its models are float32 even with x64 on)
      assert_close(np.float32(b), np.float32(a), "reduction", scale=abs(a) or 1.0)

  def test_bc_aligner_on_two_processes_equals_one_process_on_four_devices(self):
    """BC-Aligner's joint steps with their rows split over 2 processes x 2 devices (GraphSAGE's BatchNorm over all
    nodes on each), its registry, consumers and report: every number of the training log and of the results of one
    process with 4 devices, the same files, and only process 0 writes."""
    tmp = Path(self.create_tempdir().full_path)
    module = "experiments.bc_aligner"
    argv = ["--methods", "bc-aligner", "--epochs", "2", "--consumer-seeds", "1", "--consumer-epochs", "1"]
    single = _launch([*argv, "--out", str(tmp / "single")], devices=4, module=module)
    self.assertEqual(single.wait(timeout=400), 0, single.stderr.read()[-2000:])
    procs = _two_processes([*argv, "--out", str(tmp / "multi")], timeout_s=120, module=module)
    outputs = [p.communicate(timeout=400) for p in procs]
    self.assertEqual([p.returncode for p in procs], [0, 0], [e[-2000:] for _, e in outputs])
    self.assertNotIn("outputs in", outputs[1][0])
    files = _files(tmp / "multi")
    self.assertEqual(files, _files(tmp / "single"))
    self.assertIn("registries/bc-aligner/version-000004.bcv", files)
    read = lambda d: [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()]
    one, two = read(tmp / "single"), read(tmp / "multi")
    self.assertEqual(len(one), len(two))
    logged = sum(assert_runs_agree(self, a, b, "metrics.jsonl") for a, b in zip(one, two))
    self.assertGreater(logged, 30)
    results = [json.loads((tmp / d / "results.json").read_text()) for d in ("single", "multi")]
    self.assertGreater(assert_runs_agree(self, *results, "results.json"), 50)

  def test_a_dead_peer_stops_the_other_process_within_the_timeout(self):
    tmp = Path(self.create_tempdir().full_path)
    out = tmp / "run"
    procs = _two_processes(["--steps", "1000000", "--eval-every", "100000", "--out", str(out)], timeout_s=10)
    deadline = time.monotonic() + 240
    while not (out / "metrics.jsonl").exists() and time.monotonic() < deadline and procs[0].poll() is None:
      time.sleep(0.5)
    time.sleep(3.0)  # both are in the training loop's collectives
    procs[1].kill()
    started = time.monotonic()
    _, err = procs[0].communicate(timeout=120)
    self.assertNotEqual(procs[0].returncode, 0)
    self.assertLess(time.monotonic() - started, 90)  # the heartbeat timeout (10 s) plus slack for a loaded machine
    self.assertRegex(err, r"another task died|unhealthy|stopped sending heartbeats")
    self.assertFalse((out / "results.json").exists())  # nothing half-written is published

  def test_an_unreachable_coordinator_is_a_clear_error(self):
    tmp = Path(self.create_tempdir().full_path)
    port = _free_port()
    proc = _launch(
      [
        "--out",
        str(tmp / "run"),
        "--num-processes",
        "2",
        "--process-id",
        "1",
        "--coordinator",
        f"127.0.0.1:{port}",
        "--peer-timeout",
        "2",
      ],
      devices=2,
    )
    _, err = proc.communicate(timeout=120)
    self.assertEqual(proc.returncode, 2)
    self.assertIn(f"the coordinator 127.0.0.1:{port} (`coordinator`, --coordinator) is not reachable after 2 s", err)
    self.assertFalse((tmp / "run").exists())


class LaunchFlagsTest(absltest.TestCase):
  """The launch flags are checked before anything is written, and are not part of the stored run."""

  def _main(self, experiment, argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as exit_:
      harness.main(experiment, argv)
    return exit_.exception.code, err.getvalue()

  def test_bad_launch_flags_exit_2_naming_the_flag(self):
    from experiments.gramian_scaling.experiment import EXPERIMENT as scaling
    from experiments.gramian_training.experiment import EXPERIMENT as gramian
    from experiments.icl.experiment import EXPERIMENT as icl

    out = Path(self.create_tempdir().full_path) / "run"
    code, err = self._main(gramian, ["--preset", "test", "--num-processes", "2", "--out", str(out)])
    self.assertEqual(code, 2)
    self.assertIn("--coordinator is needed with --num-processes 2", err)
    code, err = self._main(scaling, ["--preset", "test", "--devices", "2", "--out", str(out)])
    self.assertEqual(code, 2)
    self.assertIn("--devices 2: the gramian_scaling experiment does not run data-parallel yet", err)
    code, err = self._main(icl, ["--preset", "test", "--devices", "2", "--out", str(out)])  # this process has 1
    self.assertEqual(code, 2)
    self.assertIn("--devices must be an integer in [1, 1]", err)
    code, err = self._main(
      gramian,
      [
        "--preset",
        "test",
        "--num-processes",
        "2",
        "--process-id",
        "2",
        "--coordinator",
        "127.0.0.1:1234",
        "--out",
        str(out),
      ],
    )
    self.assertEqual(code, 2)
    self.assertIn("--process-id must be in [0, 1] (--num-processes 2), got 2", err)
    for flags, message in (
      (["--num-processes", "0"], "--num-processes must be >= 1, got 0"),
      (["--peer-timeout", "0"], "--peer-timeout must be >= 1 second, got 0"),
      (["--num-processes", "2", "--coordinator", "nohost"], "--coordinator `coordinator` must be HOST:PORT"),
    ):
      code, err = self._main(gramian, ["--preset", "test", *flags, "--out", str(out)])
      self.assertEqual(code, 2, flags)
      self.assertIn(message, err)
    self.assertFalse(out.exists())

  def test_launch_flags_are_split_from_the_run_s_flags(self):
    run, launch = harness._launch._split_launch(
      ["--preset", "test", "--devices", "4", "--process-id=1", "--steps", "3", "--coordinator", "h:1"]
    )
    self.assertEqual(run, ["--preset", "test", "--steps", "3"])
    self.assertEqual(launch, ["--devices", "4", "--process-id=1", "--coordinator", "h:1"])
