r"""One BPR training step of BC-Aligner's embedding model at Amazon Musical-Instruments scale, in bcjax and (when
installed) in PyTorch Geometric.

The step is the reference's: a full-graph forward of the GraphSAGE model (attribute-bag item encoder, shared user
vector, SAGE layers with BatchNorm over all nodes), a batch of 2048 (user, positive, negative) rows gathered from it,
BPR + 0.01 L2 on the batch's output embeddings, backward, Adam. The graph is a seeded power-law stand-in with the
dataset's sizes (27,530 users, 10,611 items, 231,312 interactions, both directions), item bags of 0-4 categories and
one brand. Reported per model size (2 layers x 256, 3 layers x 512): bcjax's compile time, then the median of
``--steps`` jitted steps with ``block_until_ready``; PyG's median over the same number of steps after warm-up
steps; and ``pyg_over_bcjax`` = PyG median / bcjax median.

What bounds that ratio is measured too. XLA's cost analysis of the compiled step gives its FLOPs and bytes; the
machine's GEMM rate (the step's dominant product, [N, d] x [d, d], timed alone in JAX and in torch, same threads) turns
the FLOPs into ``floor_s``, the time the step's matrix products alone take here, and ``pyg_over_floor`` = PyG median /
``floor_s`` is the largest ``pyg_over_bcjax`` any XLA step doing the same FLOPs could reach on this CPU. The threads of
both frameworks and torch's CPU kernel level (AVX2 / AVX-512) are recorded with them. On an accelerator only bcjax
is timed: the CPU-only PyG step would compare machines, not frameworks.

  python -m benchmarks.gnn_step --out runs/gnn_step.json [--quick] [--steps 5] [--threads 2]
"""

import dataclasses
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from bcjax.models import bipartite_inputs
from benchmarks.timing import benchmark_main, time_jitted
from experiments.bc_aligner.data import Batch
from experiments.bc_aligner.train import StepInputs, bc_train_step, new_model
from experiments.common import adam
from experiments.harness import option
from experiments.train_step import fresh_state

MUSICAL_INSTRUMENTS = {"users": 27_530, "items": 10_611, "edges": 231_312, "categories": 900, "brands": 1_500}
QUICK = {"users": 2_000, "items": 800, "edges": 16_000, "categories": 60, "brands": 80}


def stand_in(sizes: dict, seed: int = 0):
  """A power-law interaction graph and item bags of the given sizes."""
  rng = np.random.default_rng(seed)

  def power(n):
    w = np.arange(1, n + 1, dtype=np.float64) ** -0.8
    return w / w.sum()

  user = rng.choice(sizes["users"], sizes["edges"], p=power(sizes["users"]))
  item = rng.choice(sizes["items"], sizes["edges"], p=power(sizes["items"]))
  n_cat = rng.integers(0, 5, sizes["items"])
  cat_owner = np.repeat(np.arange(sizes["items"]), n_cat)
  cats = (cat_owner, rng.choice(sizes["categories"], len(cat_owner), p=power(sizes["categories"])))
  brands = (np.arange(sizes["items"]), rng.choice(sizes["brands"], sizes["items"], p=power(sizes["brands"])))
  batch = (
    rng.integers(0, sizes["users"], 2048),
    rng.integers(0, sizes["items"], 2048),
    rng.integers(0, sizes["items"], 2048),
  )
  return user, item, cats, brands, batch


def time_bcjax(sizes: dict, layers: int, dim: int, steps: int, graph) -> dict:
  user, item, cats, brands, (bu, bp, bn) = graph
  inputs = bipartite_inputs(user, item, sizes["users"], sizes["items"], [cats, brands])
  model = new_model((sizes["categories"], sizes["brands"]), layers, dim, jax.random.key(0))
  u = sizes["users"]
  batch = Batch(
    jnp.asarray(bu, jnp.int32), jnp.asarray(u + bp, jnp.int32), jnp.asarray(u + bn, jnp.int32), jnp.ones(2048, bool)
  )
  params = {"model": model.params}
  state = fresh_state(adam(1e-3), params, model.batch_stats)
  step = bc_train_step(model.train_def, None, 1e-3, 0.01, 16.0)
  step_inputs, rng = StepInputs(inputs, batch, None), jax.random.key(0)
  start = time.perf_counter()
  compiled = step.lower(state, step_inputs, rng).compile()
  compile_s = time.perf_counter() - start
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost  # one dict per device on older JAX
  state, metrics = compiled(state, step_inputs, rng)  # warm-up
  jax.block_until_ready(metrics)
  runs = []
  for _ in range(steps):
    start = time.perf_counter()
    state, metrics = compiled(state, step_inputs, rng)
    jax.block_until_ready((state, metrics))
    runs.append(time.perf_counter() - start)
  return {
    "compile_s": compile_s,
    "median_s": statistics.median(runs),
    "min_s": min(runs),
    "steps": steps,
    "loss": float(metrics["loss"]),
    "xla_flops": float(cost.get("flops", 0.0)),
    "xla_bytes_accessed": float(cost.get("bytes accessed", 0.0)),
  }


def gemm_shape(sizes: dict, dim: int) -> tuple[int, int, int]:
  """The step's dominant matrix product: every node's [d] row times a layer's [d, d] weight."""
  return sizes["users"] + sizes["items"], dim, dim


def jax_gemm_rate(shape: tuple[int, int, int], repeats: int) -> float:
  """FLOP/s of one float32 [n, k] x [k, m] product in JAX on this machine (median of ``repeats``)."""
  n, k, m = shape
  a = jax.random.normal(jax.random.key(1), (n, k), jnp.float32)
  b = jax.random.normal(jax.random.key(2), (k, m), jnp.float32)
  return 2.0 * n * k * m / time_jitted(jnp.matmul, a, b, repeats=repeats)["median_s"]


def torch_gemm_rate(torch, shape: tuple[int, int, int], repeats: int) -> float:
  """The same product's FLOP/s in torch (its threads as set by the caller)."""
  n, k, m = shape
  a, b = torch.randn(n, k), torch.randn(k, m)
  for _ in range(2):
    torch.matmul(a, b)
  runs = []
  for _ in range(repeats):
    start = time.perf_counter()
    torch.matmul(a, b)
    runs.append(time.perf_counter() - start)
  return 2.0 * n * k * m / statistics.median(runs)


def time_pyg(sizes: dict, layers: int, dim: int, steps: int, graph, threads: int) -> dict | None:
  """The same model and step in PyTorch Geometric, or None when torch_geometric is not installed."""
  try:
    import torch
    from torch_geometric.nn import SAGEConv
  except ImportError:
    return None
  torch.set_num_threads(threads)
  torch.manual_seed(0)
  user, item, cats, brands, (bu, bp, bn) = graph
  u, i = sizes["users"], sizes["items"]

  class ItemEncoder(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.cat = torch.nn.EmbeddingBag(sizes["categories"], dim, mode="mean")
      self.brand = torch.nn.EmbeddingBag(sizes["brands"], dim, mode="mean")

    def forward(self, cat_idx, cat_off, brand_idx, brand_off):
      return self.cat(cat_idx, cat_off) + self.brand(brand_idx, brand_off)

  class Model(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.items = ItemEncoder()
      self.user = torch.nn.Parameter(0.1 * torch.randn(1, dim))
      self.convs = torch.nn.ModuleList([SAGEConv(dim, dim) for _ in range(layers)])
      self.norms = torch.nn.ModuleList([torch.nn.BatchNorm1d(dim) for _ in range(layers)])

    def forward(self, edge_index, bags):
      h = torch.cat([self.user.expand(u, dim), self.items(*bags)])
      for layer, (conv, norm) in enumerate(zip(self.convs, self.norms)):
        h = norm(conv(h, edge_index))
        if layer < layers - 1:
          h = torch.relu(h)
      return h

  def offsets(owner, n):
    counts = np.bincount(owner, minlength=n)
    return torch.as_tensor(np.concatenate([[0], np.cumsum(counts)[:-1]]), dtype=torch.long)

  bags = (
    torch.as_tensor(cats[1], dtype=torch.long),
    offsets(cats[0], i),
    torch.as_tensor(brands[1], dtype=torch.long),
    offsets(brands[0], i),
  )
  src = np.concatenate([user, u + item])
  dst = np.concatenate([u + item, user])
  edge_index = torch.as_tensor(np.stack([src, dst]), dtype=torch.long)
  bu, bp, bn = (torch.as_tensor(x, dtype=torch.long) for x in (bu, u + bp, u + bn))
  model = Model()
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

  def step():
    optimizer.zero_grad()
    h = model(edge_index, bags)
    zu, zp, zn = h[bu], h[bp], h[bn]
    bpr = torch.nn.functional.softplus((zu * zn).sum(-1) - (zu * zp).sum(-1)).mean()
    reg = 0.5 * (zu.pow(2).sum() + zp.pow(2).sum() + zn.pow(2).sum()) / 2048
    loss = bpr + 0.01 * reg
    loss.backward()
    optimizer.step()
    return float(loss.detach())

  step()  # warm-up
  runs = []
  for _ in range(steps):
    start = time.perf_counter()
    loss = step()
    runs.append(time.perf_counter() - start)
  import torch_geometric

  return {
    "median_s": statistics.median(runs),
    "min_s": min(runs),
    "steps": steps,
    "loss": loss,
    "torch": torch.__version__,
    "torch_geometric": torch_geometric.__version__,
    "threads": threads,
    "interop_threads": torch.get_num_interop_threads(),
    "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    "gemm_flops_per_s": torch_gemm_rate(torch, gemm_shape(sizes, dim), max(steps, 5)),
  }


GRAPHS = {"musical-instruments": MUSICAL_INSTRUMENTS, "quick": QUICK}


@dataclasses.dataclass(frozen=True)
class Config:
  graph: str = option("musical-instruments", choices=tuple(GRAPHS), help="graph sizes")
  shapes: tuple[tuple[int, int], ...] = ((2, 256), (3, 512))  # (layers, width) per timed model
  steps: int = option(5, help="timed steps per framework (median reported)", low=1)
  threads: int = option(2, help="torch threads for the PyG comparison", low=1)


PRESETS = {"full": Config(), "quick": Config(graph="quick", shapes=((2, 32), (3, 64)))}


def measure(cfg: Config) -> dict:
  sizes = GRAPHS[cfg.graph]
  graph = stand_in(sizes)
  rows = []
  for layers, dim in cfg.shapes:
    row = {"layers": layers, "dim": dim, "bcjax": time_bcjax(sizes, layers, dim, cfg.steps, graph)}
    bc = row["bcjax"]
    bc["gemm_flops_per_s"] = jax_gemm_rate(gemm_shape(sizes, dim), max(cfg.steps, 5))
    bc["achieved_flops_per_s"] = bc["xla_flops"] / bc["median_s"]
    bc["floor_s"] = bc["xla_flops"] / bc["gemm_flops_per_s"]
    # PyG runs on the CPU here: its ratio to a bcjax step on an accelerator would compare machines, not frameworks.
    backend = jax.default_backend()
    pyg = time_pyg(sizes, layers, dim, cfg.steps, graph, cfg.threads) if backend == "cpu" else None
    if pyg is not None:
      row["pyg"] = pyg
      row["pyg_over_bcjax"] = pyg["median_s"] / bc["median_s"]
      row["pyg_over_floor"] = pyg["median_s"] / bc["floor_s"]
    rows.append(row)
    if pyg is not None:
      ratio = (
        f", PyG {pyg['median_s']:.3f} s, PyG/bcjax = {row['pyg_over_bcjax']:.2f} (at most "
        f"{row['pyg_over_floor']:.2f} at this GEMM rate)"
      )
    elif backend == "cpu":
      ratio = " (torch_geometric not installed: no comparison)"
    else:
      ratio = f" (bcjax on {backend}; PyG runs on the CPU: no comparison)"
    print(
      f"{layers} x {dim}: bcjax {bc['median_s']:.3f} s/step (compile {bc['compile_s']:.1f} s; "
      f"{bc['xla_flops'] / 1e9:.1f} GFLOP, {bc['achieved_flops_per_s'] / 1e9:.1f} GFLOP/s of a "
      f"{bc['gemm_flops_per_s'] / 1e9:.1f} GFLOP/s GEMM){ratio}",
      file=sys.stderr,
    )
  # XLA:CPU runs each op on an intra-op pool of every core this process may use; XLA_FLAGS may change that.
  threads = {
    "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
    "torch_threads": cfg.threads,
  }
  return {"sizes": sizes, "batch_size": 2048, "threads": threads, "results": rows}


def main(argv=None) -> int:
  return benchmark_main("gnn_step", __doc__.split("\n\n")[0], Config, PRESETS, measure, argv)


if __name__ == "__main__":
  sys.exit(main())
