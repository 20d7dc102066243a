r"""Gramian form vs double-sum form of the sampled all-pairs penalty, and SOGram vs sampling at equal cost.

Table 1 (cost): one penalty-gradient evaluation w.r.t. the batch embeddings u, v [|B|, k] in double-sum form (eq. 13,
:math:`O(k|B|^2)`) and in Gramian form (eq. 14, :math:`O(k^2|B|)`), and one SOGram update; compile time is measured
separately; medians of repeated runs with ``block_until_ready``. ``ratio`` = double_sum_s / gramian_s, next to the
FLOP ratio |B|/k. Counting multiply-adds exactly, the double-sum gradient is 3 matrix products of
:math:`2|B|^2k` flops (forward :math:`UV^T`, two backward products) and the Gramian-form gradient 4 of
:math:`2|B|k^2` (:math:`U^TU`, :math:`V^TV`, :math:`UG_v`, :math:`VG_u`), so ``exact_flop_ratio`` = 0.75 |B|/k;
measured ratios above it come from the double sum's |B| x |B| intermediate being memory-bound.

Table 2 (equal cost): on a common, slowly drifting trajectory of n item embeddings, the normalised Frobenius error
:math:`\lVert \hat G - G(\theta_t)\rVert_F / \lVert G(\theta_t) \rVert_F` of SOGram with |B| = 128 and of the
uniform-sampling batch Gramian with |B| = 1024 (the paper reports comparable quality: an 8x saving).

  python -m benchmarks.gramian_vs_sampling --out runs/gramian_bench.json [--quick]
"""

import dataclasses
import sys

import jax
import jax.numpy as jnp

from bcjax.gramian import batch_gramian, double_sum_penalty, gramian, gramian_form_penalty, sogram
from benchmarks.timing import benchmark_main, time_jitted
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
      rows.append({"batch": b, "k": k, "double_sum_s": double["median_s"], "gramian_s": gram["median_s"],
                   "sogram_update_s": update["median_s"], "ratio": double["median_s"] / gram["median_s"],
                   "flop_ratio": b / k, "exact_flop_ratio": 0.75 * b / k, "compile_s": {"double_sum": double["compile_s"], "gramian":
                                                      gram["compile_s"], "sogram_update": update["compile_s"]}})
      print(f"|B|={b:5d} k={k:4d}: double-sum {double['median_s'] * 1e3:8.3f} ms, gramian "
            f"{gram['median_s'] * 1e3:7.3f} ms, ratio {rows[-1]['ratio']:6.1f} (|B|/k = {b / k:5.1f})",
            file=sys.stderr)
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
  out = {"n": n, "k": k, "steps": steps, "burn_in": burn_in, "trajectory": "u_i(t) = a_i cos(2 pi t / steps) + "
         "b_i sin(2 pi t / steps), |a_i|, |b_i| ~ i^-0.3"}
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
  print(f"equal cost: SOGram |B|=128 (alpha={best}) {out['sogram_b128_error']:.4f} vs sampling |B|=1024 "
        f"{out['sampling_b1024_error']:.4f} (sampling |B|=128: {out['sampling_b128_error']:.4f})", file=sys.stderr)
  return out


@dataclasses.dataclass(frozen=True)
class Config:
  batch_sizes: tuple[int, ...] = option((256, 1024, 4096, 8192), help="batch sizes of the cost table", low=1)
  dims: tuple[int, ...] = option((32, 64, 128), help="embedding widths k of the cost table", low=1)
  repeats: int = option(20, help="timed runs (median reported)", low=1)
  n: int = option(50_000, help="entities of the equal-cost comparison", low=2)
  k: int = option(32, help="width of the equal-cost comparison", low=1)
  steps: int = option(2000, help="steps of the equal-cost comparison", low=2)
  alphas: tuple[float, ...] = option((0.01, 0.03, 0.1, 0.3), help="SOGram α values tried", low=0.0, high=1.0,
                                     low_open=True)


PRESETS = {"full": Config(),
           "quick": Config(batch_sizes=(256, 1024), dims=(32,), repeats=5, n=4000, k=16, steps=400,
                           alphas=(0.05, 0.2))}


def measure(cfg: Config) -> dict:
  cost = cost_table(list(cfg.batch_sizes), list(cfg.dims), repeats=cfg.repeats)
  eq = equal_cost(n=cfg.n, k=cfg.k, steps=cfg.steps, alphas=cfg.alphas)
  return {"cost": cost, "equal_cost": eq,
          "target_met": all(r["ratio"] >= 0.8 * r["flop_ratio"] for r in cost if r["batch"] >= 4096) or None}


def main(argv=None) -> int:
  return benchmark_main("gramian_vs_sampling", __doc__, Config, PRESETS, measure, argv)


if __name__ == "__main__":
  sys.exit(main())
