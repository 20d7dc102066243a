"""Sentence encoders for continual learning: SIF and conceptor-aided (CA) encoders, and their data loaders."""

from bcjax.sentence._encoders import Aperture
from bcjax.sentence._encoders import ca_embed
from bcjax.sentence._encoders import ca_initial
from bcjax.sentence._encoders import ca_update
from bcjax.sentence._encoders import conceptor_with_aperture
from bcjax.sentence._encoders import cosine_similarity
from bcjax.sentence._encoders import encode_token_ids
from bcjax.sentence._encoders import pearson
from bcjax.sentence._encoders import principal_direction
from bcjax.sentence._encoders import remove_direction
from bcjax.sentence._encoders import sif_weights
from bcjax.sentence._encoders import stopword_conceptor
from bcjax.sentence._encoders import stopword_correlation
from bcjax.sentence._encoders import weighted_average
from bcjax.sentence._stopwords import NLTK_ENGLISH_STOPWORDS
from bcjax.sentence._sts import GENRES
from bcjax.sentence._sts import StsPairs
from bcjax.sentence._sts import load_sts_genres
from bcjax.sentence._sts import load_sts_pairs
from bcjax.sentence._sts import load_stsb
from bcjax.sentence._tokenize import keep_token
from bcjax.sentence._tokenize import tokenize
from bcjax.sentence._vectors import WordVectors
from bcjax.sentence._vectors import load_word_frequencies
from bcjax.sentence._vectors import load_word_vectors

__all__ = (
  "Aperture",
  "GENRES",
  "NLTK_ENGLISH_STOPWORDS",
  "StsPairs",
  "WordVectors",
  "ca_embed",
  "ca_initial",
  "ca_update",
  "conceptor_with_aperture",
  "cosine_similarity",
  "encode_token_ids",
  "keep_token",
  "load_sts_genres",
  "load_sts_pairs",
  "load_stsb",
  "load_word_frequencies",
  "load_word_vectors",
  "pearson",
  "principal_direction",
  "remove_direction",
  "sif_weights",
  "stopword_conceptor",
  "stopword_correlation",
  "tokenize",
  "weighted_average",
)
