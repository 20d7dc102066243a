r"""Gramian form vs double-sum form of the sampled all-pairs penalty, and SOGram vs sampling at equal cost.

Table 1 (cost): one penalty-gradient evaluation w.r.t. the batch embeddings u, v [|B|, k] in double-sum form (eq. 13,
:math:`O(k|B|^2)`) and in Gramian form (eq. 14, :math:`O(k^2|B|)`), and one SOGram update; compile time is measured
separately; medians of repeated runs with ``block_until_ready``. ``ratio`` = double_sum_s / gramian_s, next to the
FLOP ratio |B|/k. Counting multiply-adds exactly, the double-sum gradient is 3 matrix products of
:math:`2|B|^2k` flops (forward :math:`UV^T`, two backward products) and the Gramian-form gradient 4 of
:math:`2|B|k^2` (:math:`U^TU`, :math:`V^TV`, :math:`UG_v`, :math:`VG_u`), so ``exact_flop_ratio`` = 0.75 |B|/k;
measured ratios above it come from the double sum's |B| x |B| intermediate being memory-bound.

Table 3 (train steps at scale): one two-tower train step of each method of ``experiments.gramian_training`` on the
synthetic link corpus of n pages (default 1M, about 10M links) with the scaling curve's model: compile time, the median
step time, the bytes of the training state (the input embedding table grows with n: one row per page) and XLA's
memory analysis of the compiled step (arguments, outputs, temporaries; peak = arguments + outputs + temporaries -
aliased). The cost side of the corpus-size curve (``experiments.gramian_scaling``).

Table 2 (equal cost): on a common, slowly drifting trajectory of n item embeddings, the normalised Frobenius error
:math:`\lVert \hat G - G(\theta_t)\rVert_F / \lVert G(\theta_t) \rVert_F` of SOGram with |B| = 128 and of the
uniform-sampling batch Gramian with |B| = 1024 (the paper reports comparable quality: an 8x saving).

  python -m benchmarks.gramian_vs_sampling --out runs/gramian_bench.json [--preset quick]
"""

import dataclasses
import statistics
import sys

import jax
import jax.numpy as jnp

from bcjax.gramian import batch_gramian, double_sum_penalty, gramian, gramian_form_penalty, sogram
from benchmarks.timing import benchmark_main, time_jitted
from experiments.gramian_training.configs import METHODS
from experiments.harness import option


def cost_table(batches, dims, repeats: int) -> list[dict]:
  rows = []
  for b in batches:
    for k in dims:
      ku, kv = jax.random.split(jax.random.key(b * 1000 + k))
      u = jax.random.normal(ku, (b, k)) / jnp.sqrt(k)
      v = jax.random.normal(kv, (b, k)) / jnp.sqrt(k)
      double = time_jitted(jax.grad(double_sum_penalty, argnums=(0, 1)), u, v, repeats=repeats)
      gram = time_jitted(jax.grad(gramian_form_penalty, argnums=(0, 1)), u, v, repeats=repeats)
      est = sogram(0.1)
      state = est.init(u)
      update = time_jitted(est.update, state, u, repeats=repeats)
      rows.append(
        {
          "batch": b,
          "k": k,
          "double_sum_s": double["median_s"],
          "gramian_s": gram["median_s"],
          "sogram_update_s": update["median_s"],
          "ratio": double["median_s"] / gram["median_s"],
          "flop_ratio": b / k,
          "exact_flop_ratio": 0.75 * b / k,
          "compile_s": {
            "double_sum": double["compile_s"],
            "gramian": gram["compile_s"],
            "sogram_update": update["compile_s"],
          },
        }
      )
      print(
        f"|B|={b:5d} k={k:4d}: double-sum {double['median_s'] * 1e3:8.3f} ms, gramian "
        f"{gram['median_s'] * 1e3:7.3f} ms, ratio {rows[-1]['ratio']:6.1f} (|B|/k = {b / k:5.1f})",
        file=sys.stderr,
      )
  return rows


def equal_cost(n: int, k: int, steps: int, alphas, seed: int = 0) -> dict:
  """Estimation error along a common trajectory u_i(t) = a_i cos(w t) + b_i sin(w t) with power-law norms."""
  ka, kb, kd = jax.random.split(jax.random.key(seed), 3)
  scale = (1.0 + jnp.arange(n)) ** -0.3  # uneven item norms, as popular items have in trained models
  a = jax.random.normal(ka, (n, k)) * scale[:, None]
  b = jax.random.normal(kb, (n, k)) * scale[:, None]
  omega = 2 * jnp.pi / steps

  def at(t, idx):
    return a[idx] * jnp.cos(omega * t) + b[idx] * jnp.sin(omega * t)

  def run(estimator, batch):
    def step(state, t):
      idx = jax.random.randint(jax.random.fold_in(kd, t), (batch,), 0, n)
      estimate, state = estimator.update(state, at(t, idx))
      truth = gramian(at(t, jnp.arange(n)))
      return state, jnp.linalg.norm(estimate.gramian - truth) / jnp.linalg.norm(truth)

    _, errors = jax.lax.scan(step, estimator.init(a), jnp.arange(steps))
    return errors

  burn_in = steps // 4  # SOGram starts from 0; report the steady state
  out = {
    "n": n,
    "k": k,
    "steps": steps,
    "burn_in": burn_in,
    "trajectory": "u_i(t) = a_i cos(2 pi t / steps) + b_i sin(2 pi t / steps), |a_i|, |b_i| ~ i^-0.3",
  }
  sampling = jax.jit(lambda: run(batch_gramian(sampling="uniform"), 1024))()
  out["sampling_b1024_error"] = float(jnp.mean(sampling[burn_in:]))
  out["sogram_b128_error_by_alpha"] = {}
  for alpha in alphas:
    errors = jax.jit(lambda alpha=alpha: run(sogram(alpha), 128))()
    out["sogram_b128_error_by_alpha"][str(alpha)] = float(jnp.mean(errors[burn_in:]))
  best = min(out["sogram_b128_error_by_alpha"], key=out["sogram_b128_error_by_alpha"].get)
  out["sogram_alpha"] = float(best)
  out["sogram_b128_error"] = out["sogram_b128_error_by_alpha"][best]
  uniform128 = jax.jit(lambda: run(batch_gramian(sampling="uniform"), 128))()
  out["sampling_b128_error"] = float(jnp.mean(uniform128[burn_in:]))
  print(
    f"equal cost: SOGram |B|=128 (alpha={best}) {out['sogram_b128_error']:.4f} vs sampling |B|=1024 "
    f"{out['sampling_b1024_error']:.4f} (sampling |B|=128: {out['sampling_b128_error']:.4f})",
    file=sys.stderr,
  )
  return out


def _tree_bytes(tree) -> int:
  return int(sum(x.nbytes for x in jax.tree.leaves(tree) if hasattr(x, "nbytes")))


def train_step_costs(num_pages: int, methods, repeats: int, optimizer_name: str) -> dict:
  """Step time and memory of each method's train step on the synthetic corpus of ``num_pages`` pages."""
  import time

  from flax import nnx

  from bcjax.data import synthetic_link_corpus
  from bcjax.models import TwoTower
  from experiments.gramian_scaling.configs import PRESETS as SCALING
  from experiments.gramian_scaling.experiment import training_config
  from experiments.gramian_training.run import method_step
  from experiments.two_tower.data import train_data
  from experiments.two_tower.train import init_state, make_optimizer

  scaling = SCALING["quick"]
  cfg = training_config(dataclasses.replace(scaling, optimizer=optimizer_name), num_pages, 0, scaling.temperatures[0])
  start = time.perf_counter()
  corpus = synthetic_link_corpus(num_pages, num_pages * scaling.links_per_page, seed=0)
  out = {
    "pages": num_pages,
    "train_pairs": int(len(corpus.train.left)),
    "corpus_seconds": time.perf_counter() - start,
    "batch_size": cfg.batch_size,
    "penalty_batch_size": cfg.penalty_batch_size,
    "k": cfg.sizes[-1],
    "optimizer": cfg.optimizer,
    "learning_rate": cfg.learning_rate,
    "methods": {},
  }
  model = TwoTower(
    corpus.vocab_size,
    cfg.input_dim,
    len(corpus.left.groups),
    len(corpus.right.groups),
    cfg.sizes,
    rngs=nnx.Rngs(params=jax.random.key(0)),
  )
  graphdef, params = nnx.split(model)
  out["param_bytes"] = _tree_bytes(params)
  for method in methods:
    optimizer = make_optimizer(cfg.optimizer, cfg.learning_rate)
    step, estimator, sampling = method_step(
      method, graphdef, optimizer, cfg, None, (corpus.left.num_entities, corpus.right.num_entities)
    )
    data = train_data(corpus, sampling, cfg.smoothing)
    caches = None
    if method.startswith("sagram-"):  # placeholder embeddings: the cost does not depend on the cache's values
      caches = tuple(jnp.zeros((num_pages, cfg.sizes[-1]), jnp.float32) for _ in range(2))
    state = init_state(graphdef, jax.tree.map(jnp.copy, params), optimizer, estimator, cfg.sizes[-1], caches)
    key = jax.random.key(1)
    tic = time.perf_counter()
    compiled = step.lower(state, data, key).compile()
    compile_s = time.perf_counter() - tic
    memory = compiled.memory_analysis()
    sizes = {name: int(getattr(memory, f"{name}_size_in_bytes", 0)) for name in ("argument", "output", "temp", "alias")}
    state, _ = compiled(state, data, key)  # warm-up
    jax.block_until_ready(state)
    runs = []
    for t in range(repeats):
      tic = time.perf_counter()
      state, metrics = compiled(state, data, jax.random.fold_in(key, t))
      jax.block_until_ready(state)
      runs.append(time.perf_counter() - tic)
    out["methods"][method] = {
      "compile_s": compile_s,
      "median_s": statistics.median(runs),
      "min_s": min(runs),
      "repeats": repeats,
      "state_bytes": _tree_bytes(state),
      "data_bytes": _tree_bytes(data),
      "xla_bytes": sizes,
      "xla_peak_bytes": sizes["argument"] + sizes["output"] + sizes["temp"] - sizes["alias"],
      "finite": bool(all(jnp.isfinite(v) for v in metrics.values())),
    }
    print(
      f"n={num_pages} {method:18s}: {out['methods'][method]['median_s'] * 1e3:9.1f} ms/step, state "
      f"{out['methods'][method]['state_bytes'] / 2**20:8.1f} MiB, XLA peak "
      f"{out['methods'][method]['xla_peak_bytes'] / 2**20:8.1f} MiB (compile {compile_s:.1f} s)",
      file=sys.stderr,
    )
    del state, data, compiled
  return out


@dataclasses.dataclass(frozen=True)
class Config:
  batch_sizes: tuple[int, ...] = option((256, 1024, 4096, 8192), help="batch sizes of the cost table", low=1)
  dims: tuple[int, ...] = option((32, 64, 128), help="embedding widths k of the cost table", low=1)
  repeats: int = option(20, help="timed runs (median reported)", low=1)
  n: int = option(50_000, help="entities of the equal-cost comparison", low=2)
  k: int = option(32, help="width of the equal-cost comparison", low=1)
  steps: int = option(2000, help="steps of the equal-cost comparison", low=2)
  alphas: tuple[float, ...] = option(
    (0.01, 0.03, 0.1, 0.3), help="SOGram α values tried", low=0.0, high=1.0, low_open=True
  )
  step_pages: int = option(1_000_000, help="corpus size n of the train-step table (0 skips it)", low=0)
  step_methods: tuple[str, ...] = option(
    ("sampling-uniform", "sogram-uniform", "sagram-uniform", "exact-uniform", "softmax-logq"),
    help="methods of the train-step table",
    choices=METHODS,
  )
  step_repeats: int = option(5, help="timed train steps per method (median reported)", low=1)
  step_optimizer: str = option(
    "lazy-adam",
    choices=("lazy-adam", "adam", "adagrad", "sgd"),
    help="optimiser of the train-step table (the scaling curve's lazy-adam updates only the "
    "input-table rows a step uses; adam updates every row)",
  )


PRESETS = {
  "full": Config(),
  "quick": Config(
    batch_sizes=(256, 1024),
    dims=(32,),
    repeats=5,
    n=4000,
    k=16,
    steps=400,
    alphas=(0.05, 0.2),
    step_pages=20_000,
    step_repeats=3,
  ),
}


def measure(cfg: Config) -> dict:
  cost = cost_table(list(cfg.batch_sizes), list(cfg.dims), repeats=cfg.repeats)
  eq = equal_cost(n=cfg.n, k=cfg.k, steps=cfg.steps, alphas=cfg.alphas)
  steps = (
    train_step_costs(cfg.step_pages, cfg.step_methods, cfg.step_repeats, cfg.step_optimizer) if cfg.step_pages else None
  )
  return {
    "cost": cost,
    "equal_cost": eq,
    "train_steps": steps,
    "target_met": all(r["ratio"] >= 0.8 * r["flop_ratio"] for r in cost if r["batch"] >= 4096) or None,
  }


def main(argv=None) -> int:
  return benchmark_main("gramian_vs_sampling", __doc__, Config, PRESETS, measure, argv)


if __name__ == "__main__":
  sys.exit(main())
