"""The English stop-word list of NLTK's ``stopwords`` corpus (179 words).

With apostrophes deleted as in the CA reference protocol ("don't" -> "dont"). It seeds the zero-shot conceptor C_0 (Liu,
Ungar & Sedoc 2019, section 2.3).
"""

_NLTK_ENGLISH = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his himself
she she's her hers herself it it's its itself they them their theirs themselves what which who whom this that that'll
these those am is are was were be been being have has had having do does did doing a an the and but if or because as
until while of at by for with about against between into through during before after above below to from up down in
out on off over under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've now d ll m o re ve y
ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn
mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
"""

# Deleting apostrophes turns "it's" into a second "its". The CA notebook builds its stop-word conceptor from a set,
# so every word counts once in R_Z: the 179 NLTK entries give 178 distinct words, kept in NLTK's order.
NLTK_ENGLISH_STOPWORDS: tuple[str, ...] = tuple(dict.fromkeys(w.replace("'", "") for w in _NLTK_ENGLISH.split()))
"""NLTK's English stopword list, apostrophes removed as the tokenizer removes them, in NLTK's order."""
