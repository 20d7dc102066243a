"""Datasets in their public formats, a download cache, and the seeded synthetic defaults."""

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
    "PAD",
    "FeatureBags",
    "PairCorpus",
    "Pairs",
    "Ratings",
    "counts",
    "default_cache_dir",
    "fetch",
    "load_movielens",
    "load_wikipedia_links",
    "movielens_corpus",
    "movielens_dir",
    "page_corpus",
    "split_pairs",
    "synthetic_link_corpus",
    "title_ngrams",
)
