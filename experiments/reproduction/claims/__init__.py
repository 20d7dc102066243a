"""The claims catalogue: every headline claim of the four papers, quoted and located, typed, with the paper's number,
the measure that tests it, its primary measurement (named before its runs) and its sensitivity rows; one module per
paper.

Papers: BC = Hu et al., "Learning Backward Compatible Embeddings", KDD 2022 (seed 000); Gramian = Krichene et al.,
"Efficient Training on Very Large Corpora via Gramian Estimation", ICLR 2019 (seeds 001, 003); ICL = Ji et al.,
"Unbiased and Efficient Self-Supervised Incremental Contrastive Learning", WSDM 2023 (seed 002); Conceptors = Liu,
Ungar & Sedoc, "Continual Learning for Sentence Representations Using Conceptors", NAACL 2019 (the poster, seed 004).
"""

from experiments.reproduction.claims import bc, beyond, conceptors, gramian, icl
from experiments.reproduction.claims._types import QUALITATIVE, Claim, Measurement, Value

PAPERS = {
  "bc": "Backward-compatible embeddings (Hu et al., KDD 2022)",
  "gramian": "Gramian estimation (Krichene et al., ICLR 2019)",
  "icl": "Incremental contrastive learning (Ji et al., WSDM 2023)",
  "conceptors": "Conceptors and continual sentence encoders (Liu, Ungar & Sedoc, NAACL 2019)",
  "beyond": "Beyond the papers: claims bcjax's own features rest on",
}
MODULES = {"bc": bc, "gramian": gramian, "icl": icl, "conceptors": conceptors, "beyond": beyond}
PAPER_DATA = {paper: module.DATA for paper, module in MODULES.items()}
CLAIMS: tuple[Claim, ...] = tuple(c for module in MODULES.values() for c in module.CLAIMS)

# Identities the library implements exactly: tested in the suite, not claims about results.
LIBRARY_CHECKS = (
  (
    "ICL Theorem 3: NCE-II equals full-data InfoNCE minus old-data InfoNCE when the set means are exact, and vanishes "
    "at α = 0 or r = 1",
    "tests/test_contrastive.py::TheoremTest",
  ),
  (
    "Gramian §2: the all-pairs penalty equals ⟨G_u, G_v⟩; the surrogate gradient with exact Gramians equals the "
    "penalty's; SAGA and importance-weighted batch Gramians are unbiased (Monte Carlo)",
    "tests/test_gramian.py::PenaltyTest, EstimatorTest",
  ),
  (
    "Conceptor algebra: de Morgan both ways, ¬¬C = C, C ∨ C = φ(C, √2), for singular conceptors too",
    "tests/test_conceptors.py::LawsTest, SingularTest",
  ),
  (
    "BC-Aligner eq. (10): the multi-step loss composes the backward maps B_{j+1} ∘ … ∘ B_k",
    "tests/test_compose.py, tests/test_losses.py",
  ),
)

__all__ = ["CLAIMS", "LIBRARY_CHECKS", "PAPERS", "PAPER_DATA", "QUALITATIVE", "Claim", "Measurement", "Value"]
