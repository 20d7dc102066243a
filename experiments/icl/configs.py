"""Presets of the ICL experiment. ``paper`` follows the paper where it is specific (patience 50 on the raw epoch
loss, B = 32, τ = 0.1, 2 × 32 GCN, ResNet-18 on 224 × 224 crops) and the reference code elsewhere (Adam 1e-5 with
weight decay 1e-5, a 1000-d ResNet output); ``quick`` runs in minutes on two CPU cores (Adam 1e-3, the smoothed
convergence rule with patience 10 and at least 10 epochs, a small CNN on the images' own size); ``test`` is for the
test suite."""

import dataclasses

from experiments.harness import option
from experiments.icl.convergence import RULES
from experiments.icl.evaluate import C_GRID

ALPHAS = (0.3, 0.5, 0.7)
METHODS = ("retrain", "finetune", "replay", "distill", "nce2-only", "meta", "lrl", "icl")


@dataclasses.dataclass(frozen=True)
class Config:
  learning_rate: float = option(
    help="Adam learning rate (pre-training, retraining, baselines, nce2-only, meta's "
    "outer step; paper: searched in 1e-3..1e-5)",
    low=0.0,
    low_open=True,
  )
  patience: int = option(
    help="epochs without a new minimum of the epoch loss before stopping (paper 50, code 20)", low=1
  )
  max_epochs: int = option(help="epoch cap", low=1)
  convergence: str = option(
    "smoothed",
    choices=RULES,
    help="when a method has converged: smoothed (the epoch loss's moving average must beat "
    "its best by its estimated noise, and at least --min-epochs run) or paper (a new "
    "raw minimum within --patience epochs)",
  )
  min_epochs: int = option(10, help="epochs every method runs at least (the smoothed rule)", low=1)
  smoothing: float = option(0.7, help="β of the smoothed rule's moving average", low=0.0, high=1.0, high_open=True)
  speedup: str = option(
    "target",
    choices=("target", "convergence"),
    help="speed-ups from the time to target quality (the first epoch from which the smoothed probe accuracy "
    "stays at or above retraining's plateau less --target-noise-sds of its noise; a method that never does "
    "has none) or the paper's time to convergence",
  )
  target_noise_sds: float = option(
    2.0,
    help="how far below retraining's plateau the target lies, in standard deviations of the smoothed probe "
    "(measured on that plateau)",
    low=0.0,
  )
  probe_window: int = option(3, help="probe evaluations averaged in the smoothed probe accuracy", low=1)
  target_hold: int = option(
    2, help="consecutive smoothed evaluations at or above the target that count as reaching it", low=1
  )
  probe_samples: int = option(
    512, help="samples of X' whose linear-probe accuracy is measured after every epoch", low=4
  )
  heldout: float = option(
    0.1,
    help="share of the samples held out of every run's data (no encoder trains on them; X and ΔX keep the ratio α): "
    "the InfoNCE loss on them is the quality measure that sees training; 0 holds none out (the paper's data use, "
    "no held-out measure)",
    low=0.0,
    high=0.5,
  )
  runs: int = option(1, help="independent runs averaged (paper 5)", low=1)
  batch_size: int = 32
  temperature: float = 0.1
  weight_decay: float = 1e-5
  hidden: int = 32
  layers: int = 2
  dropout: float = 0.5
  inner_rule: str = option(
    "paper",
    choices=("paper", "batch-ratio"),
    help="meta inner steps: max(ceil((1-α)/α), 1) (paper) or the code's batch ratio",
  )
  inner_learning_rate: float = option(1e-2, help="ICL w/o LRL's support SGD rate lr_s", low=0.0, low_open=True)
  meta_outer: str = option(
    "sgd", choices=("sgd", "adam"), help="ICL w/o LRL's outer step: SGD with lr_q (eq. 12) or Adam (the reference code)"
  )
  outer_learning_rate: float = option(1e-2, help="ICL w/o LRL's query SGD rate lr_q", low=0.0, low_open=True)
  agent_hidden: int = option(20, help="LSTM width of the DDPG actors (paper 20, code 10)", low=1)
  agent_layer_norm: bool = option(
    False, help="reproduce the reference actor's size-1 LayerNorm (makes the learned rate constant)"
  )
  distill_weight: float = 1.0
  svm_folds: int = 5
  svm_c_grid: tuple[float, ...] = C_GRID  # the SVC's C values searched (the reference's 1e-3..1e3)
  image_encoder: str = option("cnn", choices=("cnn", "resnet18"), help="image encoder (paper: resnet18)")
  image_features: int = 64  # embedding width (the reference's ResNet-18 fc: 1000)
  image_width: int = 32  # SmallCNN's first stage
  image_size: int | None = option(
    None, help="crop side of the image views (paper: 224; default: the images' own)", low=1
  )
  ldp_std: str = option(
    "population",
    choices=("population", "torch_scatter"),
    help="std of the local degree profiles (featureless graphs): population, or the reference's "
    "pinned PyG 1.6.3 (torch_scatter: unbiased, 1e-6 in the divisor)",
  )
  gcn_self_loops: str = option(
    "always",
    choices=("always", "remaining"),
    help="GCN self-loops: one added to every node, or PyG's gcn_norm (replaces the data's "
    "loops; the same on loop-free graphs)",
  )
  alpha: float = option(0.3, help="growth ratio α = |ΔX| / |X ∪ ΔX|", low=0.0, high=1.0, low_open=True, high_open=True)
  alpha_sweep: tuple[float, ...] = option(
    (),
    help="more growth ratios (Fig. 4), e.g. 0.1,0.3,0.5,0.7,0.9",
    low=0.0,
    high=1.0,
    low_open=True,
    high_open=True,
    nonempty=False,
  )
  methods: tuple[str, ...] = option(
    METHODS, choices=METHODS, help="methods (retrain always runs: the speed-ups are relative to it)"
  )
  seed: int = option(0, help="PRNG seed of splits, models, views and SVM folds", low=0)


PRESETS = {
  "paper": Config(
    learning_rate=1e-5,
    patience=50,
    max_epochs=1000,
    runs=5,
    image_encoder="resnet18",
    image_features=1000,
    image_size=224,
    convergence="paper",
  ),
  "quick": Config(learning_rate=1e-3, patience=10, max_epochs=200),
  # test: every piece at its smallest — 2-fold SVM searches over 2 values of C (the search was most of an
  # evaluation's time) and narrow encoders (the CNN's compute was most of an image run's)
  "test": Config(
    learning_rate=1e-3,
    patience=2,
    max_epochs=3,
    svm_folds=2,
    svm_c_grid=(1e-1, 1e1),
    min_epochs=1,
    hidden=16,
    image_width=8,
    image_features=16,
  ),
}
