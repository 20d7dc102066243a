"""Presets of the ICL experiment. ``paper`` follows the paper where it is specific (patience 50, B = 32, τ = 0.1,
2 × 32 GCN, ResNet-18 on 224 × 224 crops) and the reference code elsewhere (Adam 1e-5 with weight decay 1e-5, a
1000-d ResNet output); ``quick`` runs in minutes on two CPU cores (Adam 1e-3, patience 10, a small CNN on the images'
own size); ``test`` is for the test suite."""

import dataclasses

ALPHAS = (0.3, 0.5, 0.7)


@dataclasses.dataclass(frozen=True)
class Config:
  learning_rate: float  # Adam (pre-training, retraining, baselines, nce2-only, meta's outer step)
  patience: int  # epochs without a new minimum of the epoch loss (paper 50, code 20)
  max_epochs: int
  runs: int = 1  # independent runs averaged (the paper: 5)
  batch_size: int = 32
  temperature: float = 0.1
  weight_decay: float = 1e-5
  hidden: int = 32
  layers: int = 2
  dropout: float = 0.5
  inner_rule: str = "paper"  # max(ceil((1 - α) / α), 1); "batch-ratio" = the reference code
  inner_learning_rate: float = 1e-2  # meta's support SGD step lr_s
  meta_outer: str = "sgd"  # eq. 12: SGD with lr_q = outer_learning_rate; "adam" = the reference code
  outer_learning_rate: float = 1e-2  # meta's query SGD step lr_q
  agent_hidden: int = 20  # the paper; the reference code passes 10
  agent_layer_norm: bool = False  # the reference's size-1 LayerNorm that makes the actor constant
  distill_weight: float = 1.0
  svm_folds: int = 5
  image_encoder: str = "cnn"  # "resnet18" (the paper) or "cnn" (SmallCNN for CPU presets)
  image_features: int = 64  # embedding width (the reference's ResNet-18 fc: 1000)
  image_width: int = 32  # SmallCNN's first stage
  image_size: int | None = None  # crop side (the reference: 224); None = the images' own size
  ldp_std: str = "population"  # degree-profile std; "torch_scatter" = the reference's pinned PyG 1.6.3
  gcn_self_loops: str = "always"  # "remaining" = PyG's gcn_norm (the same on loop-free graphs)
  seed: int = 0


PRESETS = {
    "paper": Config(learning_rate=1e-5, patience=50, max_epochs=1000, runs=5, image_encoder="resnet18",
                    image_features=1000, image_size=224),
    "quick": Config(learning_rate=1e-3, patience=10, max_epochs=200),
    "test": Config(learning_rate=1e-3, patience=2, max_epochs=3, svm_folds=3),
}
