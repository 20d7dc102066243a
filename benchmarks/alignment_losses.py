"""Cost of the multi-step alignment loss (eq. 10) relative to the single-step loss (eq. 7), with gradients.

The paper (section 3.2.2) states that eq. (10) "adds negligible computational cost" next to computing z_k. This
measures loss + gradient w.r.t. (z_k, W_k) for batch sizes and chain lengths k, and the cost of the composition
versus applying the chain, writing JSON:

  python -m benchmarks.alignment_losses --out runs/bench_alignment.json [--quick]
"""

import dataclasses
import sys

import jax
import jax.numpy as jnp

from bcjax.alignment import multi_step_loss, single_step_loss
from benchmarks.timing import benchmark_main, time_jitted
from experiments.harness import option


@dataclasses.dataclass(frozen=True)
class Config:
  batch_sizes: tuple[int, ...] = option((2048, 16384), help="rows n", low=1)
  chain_lengths: tuple[int, ...] = option((1, 2, 4, 8), help="chain lengths k", low=1)
  dim: int = option(256, help="embedding width of every version", low=1)
  repeats: int = option(30, help="timed runs (median reported)", low=1)


PRESETS = {"full": Config(), "quick": Config(batch_sizes=(256, 2048), chain_lengths=(1, 4), dim=64, repeats=5)}


def run(batch_sizes, chain_lengths, dim: int, repeats: int) -> list[dict]:
  rows = []
  for n in batch_sizes:
    for k in chain_lengths:
      keys = jax.random.split(jax.random.key(n * 100 + k), k + 3)
      z_new = jax.random.normal(keys[0], (n, dim))
      z_prev = jax.random.normal(keys[1], (n, dim))
      w = jax.random.normal(keys[2], (dim, dim)) / jnp.sqrt(dim)
      history = [jax.random.normal(kk, (dim, dim)) / jnp.sqrt(dim) for kk in keys[3 : 3 + k - 1]]
      single = jax.value_and_grad(lambda z, w, z_prev=z_prev: single_step_loss(z, z_prev, w), argnums=(0, 1))
      multi = jax.value_and_grad(
        lambda z, w, z_prev=z_prev, history=history: multi_step_loss(z, z_prev, w, history), argnums=(0, 1)
      )
      t_single = time_jitted(single, z_new, w, repeats=repeats)
      t_multi = time_jitted(multi, z_new, w, repeats=repeats)
      rows.append(
        {
          "batch": n,
          "k": k,
          "dim": dim,
          "single": t_single,
          "multi": t_multi,
          "multi_over_single": t_multi["median_s"] / t_single["median_s"],
          "flop_ratio": float(k),
        }
      )  # eq. (10) maps the residual through k-1 extra [dim, dim] weights
      print(
        f"n={n:6d} k={k:2d}: single {t_single['median_s'] * 1e6:9.1f} us, multi {t_multi['median_s'] * 1e6:9.1f}"
        f" us, ratio {rows[-1]['multi_over_single']:.2f}",
        file=sys.stderr,
      )
  return rows


def main(argv=None) -> int:
  return benchmark_main(
    "alignment_losses",
    __doc__,
    Config,
    PRESETS,
    lambda cfg: {"results": run(cfg.batch_sizes, cfg.chain_lengths, dim=cfg.dim, repeats=cfg.repeats)},
    argv,
  )


if __name__ == "__main__":
  sys.exit(main())
