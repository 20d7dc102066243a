"""Presets of the BC-Aligner experiment. ``paper`` is the reference code's protocol (snap-stanford/bc-emb);
``quick`` keeps its structure at a scale that runs in minutes on two CPU cores; ``test`` is for the test suite."""

import dataclasses

# Result keys, in the layout of the paper's Table 3.
METHODS = ("keep-all", "fix-m0", "finetune-m0", "non-bc", "post-lin-sloss", "post-lin-mloss", "joint-notrans",
           "joint-lin-sloss", "bc-aligner")
KEEP_LATEST = ("non-bc", "post-lin-sloss", "post-lin-mloss", "joint-notrans", "joint-lin-sloss", "bc-aligner")
JOINT = {"joint-notrans": "notrans", "joint-lin-sloss": "linear-sloss", "bc-aligner": "linear-mloss"}
POSTHOC = {"post-lin-sloss": "linear-sloss", "post-lin-mloss": "linear-mloss"}
KS = (10, 20, 50, 100)


@dataclasses.dataclass(frozen=True)
class Config:
  """One run's protocol; every field is in config.json."""
  versions: tuple[tuple[int, int], ...]  # (layers, width d_k) of M_0..M_4
  epochs: int  # per version (joint, non-bc, M_0)
  finetune_epochs: int  # per update of Finetune-M0
  posthoc_epochs: int  # B_k-only training of the post-hoc methods
  eval_every: int  # epochs between val Recall@50 evaluations (checkpoint selection)
  select_after: int  # joint and post-hoc selection only considers epochs > this (the reference: 50)
  consumer_hidden: tuple[int, ...]
  consumer_dropout: tuple[float, ...]
  consumer_seeds: int
  consumer_epochs: int
  batch_size: int = 2048
  learning_rate: float = 1e-3
  weight_decay: float = 0.01  # L2 on the batch's output embeddings
  lam: float = 16.0
  consumer_batch_size: int = 2048
  synthetic: tuple[tuple[str, int], ...] = ()  # synthetic_evolving_graph arguments
  item_std: str = "unbiased"  # binary-item-rating-std's std; "torch_scatter" = the reference code's
  seed: int = 42


PRESETS = {
    "paper": Config(versions=((2, 256), (2, 320), (3, 384), (3, 448), (3, 512)), epochs=500, finetune_epochs=250,
                    posthoc_epochs=200, eval_every=10, select_after=50, consumer_hidden=(128, 256, 512, 1024),
                    consumer_dropout=(0.0, 0.25, 0.5), consumer_seeds=10, consumer_epochs=300,
                    synthetic=(("num_users", 8000), ("num_items", 3000), ("num_edges", 200_000))),
    "quick": Config(versions=((2, 32), (2, 40), (3, 48), (3, 56), (3, 64)), epochs=40, finetune_epochs=20,
                    posthoc_epochs=40, eval_every=5, select_after=10, consumer_hidden=(64, 128),
                    consumer_dropout=(0.0,), consumer_seeds=3, consumer_epochs=25,
                    synthetic=(("num_users", 2000), ("num_items", 800), ("num_edges", 40_000))),
    "test": Config(versions=((1, 8), (1, 8), (2, 12), (2, 12), (2, 16)), epochs=4, finetune_epochs=2,
                   posthoc_epochs=4, eval_every=2, select_after=0, consumer_hidden=(8,), consumer_dropout=(0.0,),
                   consumer_seeds=2, consumer_epochs=3, batch_size=512,
                   synthetic=(("num_users", 300), ("num_items", 150), ("num_edges", 4000))),
}
# Grocery's smaller models (the reference's recsys/shared.py).
GROCERY_VERSIONS = ((1, 256), (1, 320), (2, 384), (2, 384), (2, 384))


def preset(name: str, dataset: str) -> Config:
  cfg = PRESETS[name]
  if name == "paper" and dataset == "amazon-Grocery_and_Gourmet_Food":
    cfg = dataclasses.replace(cfg, versions=GROCERY_VERSIONS)
  return cfg
