"""Continual sentence encoding with conceptors on the STS genres (Liu, Ungar & Sedoc, NAACL 2019, Table 1, Fig. 2).

``python -m experiments.conceptors_sts --vectors PATH --freq PATH --sts-dir PATH --out DIR``, or without the three
paths on an embedded synthetic corpus.
"""
