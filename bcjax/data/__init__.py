"""Datasets in their public formats, a download cache, and the seeded synthetic defaults."""

from bcjax.data._amazon import amazon_files
from bcjax.data._amazon import load_amazon
from bcjax.data._consumer_tasks import TASKS
from bcjax.data._consumer_tasks import TaskExamples
from bcjax.data._consumer_tasks import item_rating_stats
from bcjax.data._consumer_tasks import item_rating_threshold
from bcjax.data._consumer_tasks import task_examples
from bcjax.data._evolving import SNAPSHOT_TIMES
from bcjax.data._evolving import Bags
from bcjax.data._evolving import EvolvingGraph
from bcjax.data._evolving import VersionSplit
from bcjax.data._evolving import bags_upto
from bcjax.data._evolving import evolving_graph
from bcjax.data._evolving import num_edges_at
from bcjax.data._evolving import split_version
from bcjax.data._evolving import split_versions
from bcjax.data._graph_datasets import GRAPH_DATASETS
from bcjax.data._graph_datasets import load_graph_dataset
from bcjax.data._graph_datasets import movielens_graph
from bcjax.data._synthetic_graph import synthetic_evolving_graph
from bcjax.data._corpora import load_wikipedia_links
from bcjax.data._corpora import movielens_corpus
from bcjax.data._corpora import page_corpus
from bcjax.data._corpora import title_ngrams
from bcjax.data._download import default_cache_dir
from bcjax.data._download import fetch
from bcjax.data._movielens import Ratings
from bcjax.data._movielens import load_movielens
from bcjax.data._movielens import movielens_dir
from bcjax.data._pairs import PAD
from bcjax.data._pairs import FeatureBags
from bcjax.data._pairs import PairCorpus
from bcjax.data._pairs import Pairs
from bcjax.data._pairs import counts
from bcjax.data._pairs import split_pairs
from bcjax.data._synthetic_corpus import synthetic_link_corpus

__all__ = (
    "GRAPH_DATASETS",
    "PAD",
    "SNAPSHOT_TIMES",
    "TASKS",
    "Bags",
    "EvolvingGraph",
    "FeatureBags",
    "PairCorpus",
    "Pairs",
    "Ratings",
    "TaskExamples",
    "VersionSplit",
    "amazon_files",
    "bags_upto",
    "counts",
    "default_cache_dir",
    "evolving_graph",
    "fetch",
    "item_rating_stats",
    "item_rating_threshold",
    "load_amazon",
    "load_graph_dataset",
    "load_movielens",
    "load_wikipedia_links",
    "movielens_corpus",
    "movielens_dir",
    "movielens_graph",
    "num_edges_at",
    "page_corpus",
    "split_pairs",
    "split_version",
    "split_versions",
    "synthetic_evolving_graph",
    "synthetic_link_corpus",
    "task_examples",
    "title_ngrams",
)
