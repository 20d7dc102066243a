"""Datasets in their public formats, a download cache, and the seeded synthetic defaults."""

from bcjax import _extras

_extras.require_extra(
  "models", "bcjax.data", ("jraph", "dm_pix")
)  # before the imports below, so a missing library names the extra


from bcjax._textfile import DataFormatError
from bcjax.data._amazon import AMAZON_RELEASES
from bcjax.data._amazon import amazon_files
from bcjax.data._amazon import load_amazon
from bcjax.data._amazon import read_metadata as read_amazon_metadata
from bcjax.data._amazon import read_reviews as read_amazon_reviews
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
from bcjax.data._evolving import sample_users
from bcjax.data._evolving import split_version
from bcjax.data._evolving import split_versions
from bcjax.data._graph_augment import AUGMENTATIONS
from bcjax.data._graph_augment import augment_graphs
from bcjax.data._graph_augment import drop_nodes
from bcjax.data._graph_augment import mask_attributes
from bcjax.data._graph_augment import subgraph
from bcjax.data._graph_batch import batch_graphs
from bcjax.data._graph_batch import bucket
from bcjax.data._graph_batch import graph_mask
from bcjax.data._graph_batch import node_graph_ids
from bcjax.data._graph_batch import node_mask
from bcjax.data._graph_batch import pad_graphs
from bcjax.data._graph_batch import repad_graphs
from bcjax.data._graph_collection import GraphCollection
from bcjax.data._graph_collection import from_graphs
from bcjax.data._graph_collection import growth_split
from bcjax.data._graph_collection import local_degree_profile
from bcjax.data._graph_collection import normalize_rows
from bcjax.data._graph_collection import select_graphs
from bcjax.data._graph_collection import with_features
from bcjax.data._tu import read_gin
from bcjax.data._tu import read_tu
from bcjax.data._tu import tu_dataset_path
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
from bcjax.data._movielens import VARIANTS as MOVIELENS_VARIANTS
from bcjax.data._movielens import Ratings
from bcjax.data._movielens import identify as identify_movielens
from bcjax.data._movielens import load_movielens
from bcjax.data._movielens import movielens_dir
from bcjax.data._pairs import PAD
from bcjax.data._pairs import FeatureBags
from bcjax.data._pairs import PairCorpus
from bcjax.data._pairs import Pairs
from bcjax.data._pairs import counts
from bcjax.data._pairs import split_pairs
from bcjax.data._synthetic_corpus import synthetic_link_corpus
from bcjax.data._image_augment import IMAGENET_MEAN
from bcjax.data._image_augment import IMAGENET_STD
from bcjax.data._image_augment import AugmentConfig
from bcjax.data._image_augment import augment_image
from bcjax.data._image_augment import augment_images
from bcjax.data._image_augment import color_jitter
from bcjax.data._image_augment import gaussian_blur
from bcjax.data._image_augment import grayscale
from bcjax.data._image_augment import hsv_to_rgb
from bcjax.data._image_augment import random_resized_crop
from bcjax.data._image_augment import resample
from bcjax.data._image_augment import resize_images
from bcjax.data._image_augment import rgb_to_hsv
from bcjax.data._mnist import read_idx
from bcjax.data._mnist import load_mnist
from bcjax.data._mnist import mnist_path


__all__ = (
  "AMAZON_RELEASES",
  "amazon_files",
  "DataFormatError",
  "identify_movielens",
  "MOVIELENS_VARIANTS",
  "read_amazon_metadata",
  "read_amazon_reviews",
  "augment_graphs",
  "augment_image",
  "augment_images",
  "AUGMENTATIONS",
  "AugmentConfig",
  "Bags",
  "bags_upto",
  "batch_graphs",
  "bucket",
  "color_jitter",
  "counts",
  "default_cache_dir",
  "drop_nodes",
  "evolving_graph",
  "EvolvingGraph",
  "FeatureBags",
  "fetch",
  "from_graphs",
  "gaussian_blur",
  "GRAPH_DATASETS",
  "graph_mask",
  "GraphCollection",
  "grayscale",
  "growth_split",
  "hsv_to_rgb",
  "IMAGENET_MEAN",
  "IMAGENET_STD",
  "item_rating_stats",
  "item_rating_threshold",
  "load_amazon",
  "load_graph_dataset",
  "load_mnist",
  "load_movielens",
  "load_wikipedia_links",
  "local_degree_profile",
  "mask_attributes",
  "mnist_path",
  "movielens_corpus",
  "movielens_dir",
  "movielens_graph",
  "node_graph_ids",
  "node_mask",
  "normalize_rows",
  "num_edges_at",
  "sample_users",
  "PAD",
  "pad_graphs",
  "repad_graphs",
  "page_corpus",
  "PairCorpus",
  "Pairs",
  "random_resized_crop",
  "Ratings",
  "read_gin",
  "read_idx",
  "read_tu",
  "resample",
  "resize_images",
  "rgb_to_hsv",
  "select_graphs",
  "SNAPSHOT_TIMES",
  "split_pairs",
  "split_version",
  "split_versions",
  "subgraph",
  "synthetic_evolving_graph",
  "synthetic_link_corpus",
  "task_examples",
  "TaskExamples",
  "TASKS",
  "title_ngrams",
  "tu_dataset_path",
  "VersionSplit",
  "with_features",
)
