"""Presets of the corpus-size curve. Every (n, seed, method) trains one model with the training comparison's
protocol (:mod:`experiments.gramian_training`) on the seeded synthetic link corpus of n pages."""

import dataclasses

from experiments.gramian_training.configs import METHODS
from experiments.harness import option

# The paper's Table 2 (relative improvement of SOGram's final validation MAP@10 over sampling), by corpus size:
# Wikipedia simple (85K pages), fr (1.8M), en (5.3M).
PAPER_POINTS = {
  "uniform": ((85_000, 4.2), (1_800_000, 13.0), (5_300_000, 9.9)),
  "sqrt": ((85_000, 8.3), (1_800_000, 9.2), (5_300_000, 11.7)),
  "linear": ((85_000, 10.7), (1_800_000, 15.0), (5_300_000, 19.5)),
}


@dataclasses.dataclass(frozen=True)
class Config:
  sizes: tuple[int, ...] = option(
    (10_000, 100_000, 1_000_000), help="corpus sizes n (pages), e.g. 10000,100000", low=100
  )
  methods: tuple[str, ...] = option(
    (
      "sampling-uniform",
      "sogram-uniform",
      "sagram-uniform",
      "exact-uniform",
      "sampling-sqrt",
      "sogram-sqrt",
      "sampling-linear",
      "sogram-linear",
      "softmax-logq",
    ),
    help="methods to run at every n",
    choices=METHODS,
  )
  seeds: int = option(3, help="seeds per (n, method): the corpus, the model and the batches", low=1)
  links_per_page: int = option(10, help="links drawn per page (the corpus has about this many pairs per page)", low=1)
  exact_max_pages: int = option(
    10_000,
    help="the exact oracle runs only where n is at most this (its every step "
    "embeds the whole corpus: ~0.45 s a step at 100K pages, so 100000 "
    "adds ~15 min to the quick preset)",
    low=1,
  )
  sagram_max_pages: int = option(
    100_000, help="SAGram runs only where n is at most this (its caches hold n x k floats per side)", low=1
  )
  steps: int = option(600, help="training steps per model", low=1)
  eval_every: int = option(200, help="steps between validation evaluations", low=1)
  optimizer: str = option(
    "lazy-adam",
    choices=("lazy-adam", "adam", "adagrad", "sgd"),
    help="optimiser: lazy-adam (Adam on the towers, lazy Adam on the input-table rows a step "
    "uses), adam (dense: it updates all n table rows every step, ~0.13 s a step at 1M "
    "pages), or adagrad / sgd (row-sparse, exactly their dense update)",
  )
  learning_rate: float = option(1e-3, help="the optimiser's learning rate", low=0.0, low_open=True)
  batch_size: int = option(1024, help="observed pairs per step", low=1)
  penalty_batch_size: int = option(1024, help="entities per side for the Gramian (paper: 1024)", low=1)
  alpha: float = option(0.1, help="SOGram's Gramian learning rate", low=0.0, high=1.0, low_open=True)
  temperatures: tuple[float, ...] = option(
    (1.0, 3.0, 10.0, 30.0),
    help="temperatures τ tried for the softmax-* methods: each trains at the "
    "smallest n (seed 0) and the best final MAP@10 sets τ for every n",
    low=0.0,
    low_open=True,
  )
  temperature_extensions: int = option(
    3,
    help="while the best τ lies on the edge of the τ tried, try up to this "
    "many more, one geometric step of the grid beyond that edge each",
    low=0,
  )
  num_candidates: int = option(50_000, help="MAP@10 is scored against this many random candidates", low=1)
  eval_queries: int = option(
    2000, help="validation queries ranked per evaluation (a fixed random subset per seed; 0: all)", low=0
  )
  track_error: bool = option(
    True,
    help="measure each estimator's Gramian error against the exact Gramians at every "
    "evaluation (a full pass over the corpus, not timed)",
  )
  input_dim: int = 50
  hidden: tuple[int, ...] = (256, 64)


# Budget of the quick preset (2 cores; the cost of a train step from benchmarks/gramian_vs_sampling at n = 1M): with
# lazy-adam a step of sampling or SOGram takes ~26 ms at any n up to 1M (dense Adam's update of every input-table row
# made it ~0.15 s at 1M), the softmax's ~35 ms, SAGram's ~0.3 s at 1M and the oracle's ~0.45 s at 100K and ~1.8 s at
# 1M (every step embeds the whole corpus); so 600 steps per model, SAGram up to 100K and the oracle at 10K. Around the
# training a model costs ~3 s at 10K, ~12 s at 100K and ~45 s at 1M: compilation (~3.5 s), 3 evaluations with the
# Gramian error (a pass over both sides of the corpus, ~5 s at 1M) and the exact Recall@50 of 2,000 queries against
# every page (~20 s at 1M); the corpus takes ~25 s per seed at 1M. These are a 2-core AMD EPYC's (AVX2), where the
# whole preset was projected at ~50 min; on a 2-core Xeon with AVX-512 it ran in 20.8 min (1M: ~7 s of training per
# model). The seeds of one n share their compiled steps (the harness's compilation cache): ~1.5 s each after the first.
PRESETS = {
  "quick": Config(),
  # The paper trains 20-50 hours per model; here the paper preset trains 25x longer than quick (15,000 steps, still
  # under one epoch at 1M pages) with SAGram and the oracle at every size. On 2 cores, per seed: ~7 min per model
  # for sampling, SOGram and the softmax at any n (~2.5 h for the 21), SAGram ~3.5 h over the three sizes, and each
  # oracle ~22 h (1.8 s a step measured at 1M, scaled linearly in n to 85K and 1.8M): ~50 h a seed, ~150 h for 3
  # seeds, 87 % of it the two oracles (--exact-max-pages 85000 brings the grid to ~22 h).
  "paper": Config(
    sizes=(85_000, 1_000_000, 1_800_000),
    steps=15_000,
    eval_every=1000,
    methods=(
      "sampling-uniform",
      "sogram-uniform",
      "sagram-uniform",
      "exact-uniform",
      "sampling-sqrt",
      "sogram-sqrt",
      "exact-sqrt",
      "sampling-linear",
      "sogram-linear",
      "softmax-logq",
    ),
    exact_max_pages=2_000_000,
    sagram_max_pages=2_000_000,
  ),
  "test": Config(
    sizes=(300, 600),
    methods=("sampling-uniform", "sogram-uniform", "exact-uniform"),
    seeds=2,
    links_per_page=8,
    steps=12,
    eval_every=6,
    batch_size=64,
    penalty_batch_size=32,
    num_candidates=200,
    eval_queries=100,
    input_dim=8,
    hidden=(16, 8),
    temperatures=(0.1,),
    temperature_extensions=1,
  ),
}
