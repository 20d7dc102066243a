"""What the two Gramian experiments share on the harness: the corpus flags and the corpus loading."""

from bcjax.data import MOVIELENS_VARIANTS
from experiments import harness
from experiments.two_tower.data import check_corpus, corpus_notes, load_corpus


class TwoTowerExperiment(harness.Experiment):
  """An experiment on a two-tower link corpus: synthetic (embedded), MovieLens or Wikipedia."""

  datasets = (
    f"synthetic (embedded default), movielens-{{{','.join(MOVIELENS_VARIANTS)}}} or wikipedia "
    f"(--data-dir: the extracted MovieLens folder, or pages.tsv + links.tsv)"
  )

  def check(self, args, cfg):
    variant = args.dataset.removeprefix("movielens-")
    if not (
      args.dataset in ("synthetic", "wikipedia")
      or (args.dataset.startswith("movielens-") and variant in MOVIELENS_VARIANTS)
    ):
      raise harness.UsageError(
        "--dataset", f"must be synthetic, movielens-<{'|'.join(MOVIELENS_VARIANTS)}> or wikipedia; got {args.dataset!r}"
      )

  def load(self, args, cfg):
    corpus = check_corpus(
      load_corpus(args.dataset, args.data_dir, num_pages=cfg.num_pages, num_links=cfg.num_links, seed=cfg.seed)
    )
    for note in corpus_notes(corpus):
      print(f"data: {note}")
    return corpus

  def corpus_summary(self, corpus) -> dict:
    return {
      "left": corpus.left.num_entities,
      "right": corpus.right.num_entities,
      "train_pairs": len(corpus.train.left),
      "val_pairs": len(corpus.val.left),
    }

  def data_notes(self, corpus) -> list[str]:
    """The notes printed when the corpus was loaded, for results.json."""
    return list(corpus_notes(corpus))
