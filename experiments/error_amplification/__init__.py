"""Error amplification in chains of backward transformations, and its suppression by the multi-step loss.

The paper's mechanism (section 3.2.2, Fig. 3(3)) on a seeded synthetic chain of embedding versions:
``python -m experiments.error_amplification --preset quick --out runs/demo``.
"""
