"""Tokenisation of the CA reference protocol, without NLTK.

The reference replaces curly quotes by ASCII ``'``, runs NLTK's Treebank ``word_tokenize`` and lower-cases; a token
is then kept only when it is in the word-vector vocabulary and ``str.islower()`` holds (so numbers and punctuation are
dropped). This module reproduces the Treebank splitting rules that matter after that filter: punctuation is split off
words, and clitics are split as Treebank does ("don't" -> "do", "n't"; "it's" -> "it", "'s"). Documented deviation:
NLTK's sentence splitting and its rarer rules (e.g. "gonna" -> "gon", "na") are not reproduced; they only affect
tokens that the vocabulary filter rarely keeps.
"""

import re

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_CLITICS = re.compile(r"(?i)(\w)(n't|'s|'re|'ve|'ll|'d|'m)\b")
_TOKEN = re.compile(r"n't|'(?:s|re|ve|ll|d|m)\b|\w+(?:[-.]\w+)*|[^\w\s]", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
  """Lower-cased Treebank-style tokens of ``text``.

  Examples:
    >>> from bcjax.sentence import tokenize
    >>> tokenize("It’s a dog-friendly café, isn't it?")
    ['it', "'s", 'a', 'dog-friendly', 'café', ',', 'is', "n't", 'it', '?']
  """
  text = _CLITICS.sub(r"\1 \2", text.translate(_QUOTES))
  return [t.lower() for t in _TOKEN.findall(text)]


def keep_token(token: str, vocabulary) -> bool:
  """The reference's filter: in the vocabulary and ``str.islower()`` (has a cased letter, no upper case)."""
  return token.islower() and token in vocabulary
