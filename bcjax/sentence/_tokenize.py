"""Tokenisation of the CA reference protocol, without NLTK or its downloaded models.

The reference replaces curly quotes by ASCII ``'``, runs NLTK's ``word_tokenize`` (Punkt sentence splitting, then
the Treebank word conventions on every sentence) and lower-cases; a token is then kept only when it is in the
word-vector vocabulary and ``str.islower()`` holds (so numbers and punctuation are dropped).

This module follows the Treebank conventions that decide which tokens reach that filter:

* a period stays attached to its word ("mr.", "u.s.", "e.g.", "3.5") except the final period of a sentence, which
  is a token of its own; two or more periods ("..", "...") are one token;
* other punctuation is split off
(``, ; : ? ! % $ & @ # * ( ) [ ] { } < > -- – — « » „ `````), but a comma or colon followed by a
  digit stays inside the number ("3,000", "10:30");
* double quotes (and ``''``) become ````` when they open a quotation and ``''`` otherwise, and an apostrophe that
  opens one is split off; clitics are split ("don't" -> "do", "n't"; "it's" -> "it", "'s");
  "cannot", "gonna", "gotta", "wanna" and similar are split in two ("can", "not"; "gon", "na");
* hyphenated words stay whole.

Sentences are split where a '.', '?' or '!' (with any closing quotes or brackets) is followed by a space and an
upper-case letter, a digit or an opening quote, unless the word before the period is an abbreviation: a single
letter (an initial), a word with an inner period ("u.s."), one of :data:`ABBREVIATIONS`, or one of
:data:`NUMBER_ABBREVIATIONS` before a number ("No. 5"). NLTK's Punkt learned
its abbreviations from the Wall Street Journal; this list holds the common ones, so splits can still differ on rare
abbreviations.

Measured on the 22,878 sentences of the CA paper's five STS genres (news 8,598, captions 6,500, WordNet 4,122,
forums 2,158, tweets 1,500): the tokens of every sentence equal NLTK 3.10's ``NLTKWordTokenizer`` (the Treebank
tokenizer ``word_tokenize`` applies after Punkt) exactly. Sentence splitting is the one remaining difference: with
no split at all, the kept tokens (MiniLM vocabulary) would change on 5 news, 2 forum and 71 tweet sentences (0.06 %,
0.09 % and 4.7 %), which bounds the effect of any disagreement with Punkt. The previous rule, which split every
period off its word, changed the kept tokens of 4.4 % of the news, 2.7 % of the forum and 6.0 % of the tweet
sentences.
"""

import re

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})

ABBREVIATIONS = frozenset(
  "mr mrs ms dr prof sr jr st mt ft vs etc inc ltd co corp dept gen gov sen rep rev lt col sgt capt cmdr adm "
  "jan feb mar apr jun jul aug sep sept oct nov dec approx est assn bros".split()
)
# Abbreviations only before a number ("No. 5", "vol. 2"); "he said no. Then ..." ends a sentence.
NUMBER_ABBREVIATIONS = frozenset("no nos vol fig pp".split())

# One sentence's end: the period (or ? !), closing quotes or brackets, white space, then what starts a sentence.
_BOUNDARY = re.compile(r"""([.?!])(['"\)\]\}]*)(\s+)(?=["'(\[]*[A-Z0-9])""")
_WORD_BEFORE = re.compile(r"(\S+)$")

# Contractions written as one word that the Treebank conventions split in two (MacIntyre's list).
_SPLIT_WORDS = [
  re.compile(rf"(?i)\b({a})({b})\b")
  for a, b in (
    ("can", "not"),
    ("d", "'ye"),
    ("gim", "me"),
    ("gon", "na"),
    ("got", "ta"),
    ("lem", "me"),
    ("more", "'n"),
    ("wan", "na"),
    ("wha", "ddya"),
    ("wha", "tcha"),
    ("'t", "is"),
    ("'t", "was"),
  )
]
_CLITIC = re.compile(r"(?i)([^' ])('s|'m|'d|'ll|'re|'ve|n't)(?=\s)")
_CLOSING_APOSTROPHE = re.compile(r"([^' ])'(?=\s)")
_OPENING_DOUBLE = re.compile(r"""^"|(?<=[\s(\[{<])(?:"|'')""")
# An apostrophe opening a quotation ('tough love') is split off, unless the word is a clitic on its own ('re, 'n).
_OPENING_SINGLE = re.compile(r"(?i)(^|[\s(\[{<-])'(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)")
_FINAL_PERIOD = re.compile(r"""([^.])\.([\]\)}>"']*)\s*$""")
_SPLIT_OFF = re.compile(r"""\.\.+|--|`+|''|[«»„–—;@#$%&*?!()\[\]{}<>]|[:,](?!\d)""")


def _is_abbreviation(word: str, following: str) -> bool:
  word = word.lstrip("\"'([{").lower().rstrip(".")
  return (
    len(word) == 1
    and word.isalpha()
    or "." in word
    or word in ABBREVIATIONS
    or (word in NUMBER_ABBREVIATIONS and following[:1].isdigit())
  )


def sentences(text: str) -> list[str]:
  """``text`` split into sentences.

  ``text`` split into sentences at '.', '?' or '!' followed by a capital, a digit or an opening quote (not after an
  abbreviation or an initial).
  """
  out, start = [], 0
  for m in _BOUNDARY.finditer(text):
    if m.group(1) == ".":
      before = _WORD_BEFORE.search(text[start : m.start(1)])
      if before is None or _is_abbreviation(before.group(1), text[m.end() :]):
        continue
    out.append(text[start : m.end(2)])
    start = m.end()
  out.append(text[start:])
  return [s for s in out if s.strip()]


def _words(sentence: str) -> list[str]:
  """The Treebank tokens of one sentence."""
  s = _OPENING_DOUBLE.sub(" `` ", sentence)
  s = _OPENING_SINGLE.sub(r"\1 ' ", s)
  s = _FINAL_PERIOD.sub(r"\1 . \2 ", s)
  s = _SPLIT_OFF.sub(lambda m: f" {m.group(0)} ", s)
  s = " " + s.replace('"', " '' ") + " "
  s = _CLITIC.sub(r"\1 \2", s)
  s = _CLOSING_APOSTROPHE.sub(r"\1 ' ", s)
  for pattern in _SPLIT_WORDS:
    s = pattern.sub(r"\1 \2", s)
  return s.split()


def tokenize(text: str) -> list[str]:
  """Lower-cased Treebank-style tokens of ``text``, sentence by sentence.

  Args:
    text: the text.

  Returns:
    The tokens.

  Examples:
    >>> from bcjax.sentence import tokenize
    >>> tokenize("It’s a dog-friendly café, isn't it?")
    ['it', "'s", 'a', 'dog-friendly', 'café', ',', 'is', "n't", 'it', '?']
    >>> tokenize("Mr. Smith met U.S. officials. They cannot agree.")
    ['mr.', 'smith', 'met', 'u.s.', 'officials', '.', 'they', 'can', 'not', 'agree', '.']
  """
  text = text.translate(_QUOTES)
  return [t.lower() for sentence in sentences(text) for t in _words(sentence)]


def keep_token(token: str, vocabulary) -> bool:
  """The reference's filter: in the vocabulary and ``str.islower()`` (has a cased letter, no upper case).

  Args:
    token: a token.
    vocabulary: the words that have a vector (a container).

  Returns:
    Whether the token is kept.
  """
  return token.islower() and token in vocabulary
