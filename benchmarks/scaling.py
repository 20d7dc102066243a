r"""Data-parallel scaling: train steps per second against the device count, and the per-device memory of a
row-sharded embedding table.

For each N in ``--devices`` a fresh process starts with N devices (on CPU, N forced host devices:
``--xla_force_host_platform_device_count``; on an accelerator, the first N) and measures, on the 1-D data mesh of
:mod:`bcjax.parallel`:

* the BC-Aligner joint step of ``experiments.bc_aligner`` on the synthetic graph of ``--bc-aligner-preset``;
* the two-tower step of ``experiments.two_tower`` (SOGram, the observed batch and the Gramian batch split over the
  devices; compile time apart, then the median of repeated steps with ``block_until_ready``);
* a [rows, dim] float32 table placed with :func:`bcjax.parallel.shard_table`: the bytes each device holds, which
  should be ``rows * dim * 4 / N``.

Forced CPU devices share the same cores, so on CPU only the memory figures and the equality of the results mean
anything; the step rates are for an accelerator machine. The BC-Aligner joint step (multi-step alignment, the
preset's last version) splits its batch rows; its whole-graph forward runs on every device.

  python -m benchmarks.scaling --out runs/scaling.json [--quick]
"""

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bcjax import parallel
from experiments import harness
from experiments.harness import option

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Config:
  devices: tuple[int, ...] = option((1, 2, 4, 8), help="device counts N to measure", low=1)
  batch_size: int = option(8192, help="observed pairs per step (global; divisible by every N)", low=1)
  penalty_batch_size: int = option(8192, help="Gramian batch per side (global; divisible by every N)", low=1)
  num_pages: int = option(20_000, help="entities of the synthetic link corpus", low=10)
  num_links: int = option(200_000, help="links of the synthetic link corpus", low=100)
  table_rows: int = option(1 << 20, help="rows of the sharded table (divisible by every N)", low=1)
  table_dim: int = option(64, help="width of the sharded table", low=1)
  repeats: int = option(20, help="timed steps (median reported)", low=1)
  bc_aligner_preset: str = option(
    "quick",
    choices=("quick", "paper", "test"),
    help="bc_aligner preset whose synthetic graph, batch and last model are timed",
  )


PRESETS = {
  "full": Config(),
  "quick": Config(
    devices=(1, 2, 4),
    batch_size=256,
    penalty_batch_size=256,
    num_pages=500,
    num_links=5000,
    table_rows=4096,
    table_dim=16,
    repeats=3,
    bc_aligner_preset="test",
  ),
}


def measure_on_devices(num_devices: int, cfg: Config) -> dict:
  """One device count, in this process (which must have at least ``num_devices`` devices)."""
  import jax
  import numpy as np
  from flax import nnx

  from bcjax.data import synthetic_link_corpus
  from bcjax.gramian import sogram
  from bcjax.models import TwoTower
  from bcjax.parallel import DATA_AXIS, data_mesh, replicate, shard_table
  from experiments.two_tower.data import train_data
  from experiments.two_tower.train import gramian_train_step, init_state, make_optimizer

  mesh = data_mesh(num_devices)
  corpus = synthetic_link_corpus(cfg.num_pages, cfg.num_links, seed=0)
  estimator = sogram(0.1, axis_name=DATA_AXIS)
  model = TwoTower(
    corpus.vocab_size, 32, len(corpus.left.groups), len(corpus.right.groups), (64, 32), rngs=nnx.Rngs(params=0)
  )
  graphdef, params = nnx.split(model)
  optimizer = make_optimizer("adagrad", 0.05)
  state = replicate(mesh, init_state(graphdef, params, optimizer, estimator, 32))
  data = replicate(mesh, train_data(corpus, "uniform"))
  step = gramian_train_step(
    graphdef,
    optimizer,
    estimator,
    lam=1.0,
    batch_size=cfg.batch_size,
    penalty_batch_size=cfg.penalty_batch_size,
    mesh=mesh,
  )
  key = jax.random.key(1)
  start = time.perf_counter()
  compiled = step.lower(state, data, key).compile()
  compile_s = time.perf_counter() - start
  for i in range(2):  # warm-up
    state, metrics = compiled(state, data, jax.random.fold_in(key, i))
  jax.block_until_ready(state)
  runs = []
  for i in range(cfg.repeats):
    start = time.perf_counter()
    state, metrics = compiled(state, data, jax.random.fold_in(key, 100 + i))
    jax.block_until_ready(state)
    runs.append(time.perf_counter() - start)
  bc_aligner = _time_bc_aligner_step(mesh, cfg)
  table = shard_table(mesh, np.zeros((cfg.table_rows, cfg.table_dim), np.float32))
  per_device = sorted({int(s.data.nbytes) for s in table.addressable_shards})
  return {
    "devices": num_devices,
    "device_kind": mesh.devices.flat[0].device_kind,
    "two_tower_step": {
      "compile_s": compile_s,
      "median_s": statistics.median(runs),
      "min_s": min(runs),
      "steps_per_s": 1.0 / statistics.median(runs),
      "repeats": cfg.repeats,
      "final_loss": float(metrics["loss"]),
    },
    "bc_aligner_step": bc_aligner,
    "table": {
      "rows": cfg.table_rows,
      "dim": cfg.table_dim,
      "total_bytes": cfg.table_rows * cfg.table_dim * 4,
      "bytes_per_device": per_device[-1],
      "distinct_shard_sizes": per_device,
    },
  }


def _time_bc_aligner_step(mesh, cfg: Config) -> dict:
  """The joint BC-Aligner step (multi-step alignment) of the preset's last version on its synthetic graph."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  from bcjax.alignment import init_backward
  from bcjax.data import load_graph_dataset
  from experiments.bc_aligner.configs import PRESETS as BC_PRESETS
  from experiments.bc_aligner.data import BPRSampler, attribute_sizes, version_data, with_item_ids
  from experiments.bc_aligner.train import AlignTarget, StepInputs, bc_train_step, new_model
  from experiments.common import adam
  from experiments.train_step import fresh_state

  bc = BC_PRESETS[cfg.bc_aligner_preset]
  graph = with_item_ids(load_graph_dataset("synthetic", None, seed=0, **dict(bc.synthetic)))
  vd = version_data(graph)[-1]
  (_, d_prev), (layers, dim) = bc.versions[-2], bc.versions[-1]
  model = new_model(attribute_sizes(graph), layers, dim, jax.random.key(0))
  params = {"model": model.params, "w": init_backward(jax.random.key(1), d_prev, dim)}
  target = AlignTarget(jnp.zeros((vd.inputs.is_user.shape[0], d_prev), jnp.float32), ())
  state = fresh_state(adam(bc.learning_rate), params, model.batch_stats)
  step = bc_train_step(model.train_def, "linear-mloss", bc.learning_rate, bc.weight_decay, bc.lam, mesh)
  batch = next(iter(BPRSampler(vd.split, bc.batch_size).epoch(np.random.default_rng(0))))
  inputs = StepInputs(vd.inputs, batch, target, 1.0)
  key = jax.random.key(2)
  start = time.perf_counter()
  compiled = step.lower(state, inputs, key).compile()
  compile_s = time.perf_counter() - start
  for _ in range(2):
    state, _ = compiled(state, inputs, key)
  jax.block_until_ready(state)
  runs = []
  for _ in range(cfg.repeats):
    start = time.perf_counter()
    state, _ = compiled(state, inputs, key)
    jax.block_until_ready(state)
    runs.append(time.perf_counter() - start)
  return {
    "preset": cfg.bc_aligner_preset,
    "nodes": int(target.z_prev.shape[0]),
    "batch": bc.batch_size,
    "layers": layers,
    "dim": dim,
    "compile_s": compile_s,
    "median_s": statistics.median(runs),
    "min_s": min(runs),
    "steps_per_s": 1.0 / statistics.median(runs),
    "repeats": cfg.repeats,
  }


def _child(num_devices: int, cfg: Config) -> dict:
  # The forced count only shapes the CPU platform; an accelerator's devices stay what they are. This process has not
  # started a JAX backend, so a GPU's memory is the child's alone.
  env = dict(
    os.environ,
    PYTHONPATH=str(ROOT),
    XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
    f"--xla_force_host_platform_device_count={num_devices} "
    # forced devices share the cores: on a loaded machine a collective may wait long for one of them
    f"--xla_cpu_collective_call_terminate_timeout_seconds=600".strip(),
  )
  parallel.reserve_collective_threads(env)  # a pool the forced devices' collectives cannot exhaust
  code = (
    "import json, sys; from benchmarks.scaling import Config, measure_on_devices; "
    f"print('RESULT ' + json.dumps(measure_on_devices({num_devices}, Config(**json.loads(sys.argv[1])))))"
  )
  proc = subprocess.run(
    [sys.executable, "-c", code, json.dumps(dataclasses.asdict(cfg))],
    env=env,
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=False,
  )
  if proc.returncode:
    raise RuntimeError(
      f"scaling: the {num_devices}-device process failed (exit status {proc.returncode}):\n{proc.stderr[-3000:]}"
    )
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line.removeprefix("RESULT "))


def check(cfg: Config) -> None:
  for n in cfg.devices:
    for flag, size in (
      ("--batch-size", cfg.batch_size),
      ("--penalty-batch-size", cfg.penalty_batch_size),
      ("--table-rows", cfg.table_rows),
    ):
      if size % n:
        raise harness.UsageError(flag, f"{size} is not divisible by {n} devices (--devices {n})")


def measure(cfg: Config) -> dict:
  rows = []
  for n in cfg.devices:
    rows.append(_child(n, cfg))
    step, table = rows[-1]["two_tower_step"], rows[-1]["table"]
    bc = rows[-1]["bc_aligner_step"]
    print(
      f"N={n}: two-tower step {step['median_s'] * 1e3:8.2f} ms ({step['steps_per_s']:7.1f} steps/s, compile "
      f"{step['compile_s']:.1f} s); BC-Aligner step {bc['median_s'] * 1e3:8.2f} ms; table "
      f"{table['bytes_per_device']} of {table['total_bytes']} bytes per device",
      file=sys.stderr,
    )
  base = rows[0]
  for r in rows:
    r["speedup_vs_first"] = {
      name: base[name]["median_s"] / r[name]["median_s"] for name in ("two_tower_step", "bc_aligner_step")
    }
    r["table"]["fraction_per_device"] = r["table"]["bytes_per_device"] / r["table"]["total_bytes"]
  return {
    "by_devices": rows,
    "note": "forced CPU devices share the machine's cores: on CPU only memory and results are meaningful; the "
    "BC-Aligner step splits the batch rows while each device runs the whole-graph forward",
  }


def main(argv=None) -> int:
  from benchmarks.timing import benchmark_main

  return benchmark_main("scaling", __doc__, Config, PRESETS, measure, argv, check)


if __name__ == "__main__":
  sys.exit(main())
