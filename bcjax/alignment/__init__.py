"""Backward-compatible embeddings: backward transformations, their compositions and alignment losses (BC-Aligner).

Row-vector convention: embeddings are [n, d]; W_k has the paper's shape [d_(k-1), d_k] and is applied as z @ W_k.T.
"""

from bcjax.alignment._compose import apply_backward
from bcjax.alignment._compose import apply_chain
from bcjax.alignment._compose import compose
from bcjax.alignment._compose import compositions
from bcjax.alignment._compose import notrans
from bcjax.alignment._fit import PosthocFit
from bcjax.alignment._fit import fit_posthoc
from bcjax.alignment._fit import init_backward
from bcjax.alignment._fit import least_squares_backward
from bcjax.alignment._losses import alignment_error
from bcjax.alignment._losses import multi_step_loss
from bcjax.alignment._losses import single_step_loss
from bcjax.alignment._module import BackwardLinear

__all__ = (
    "BackwardLinear",
    "PosthocFit",
    "alignment_error",
    "apply_backward",
    "apply_chain",
    "compose",
    "compositions",
    "fit_posthoc",
    "init_backward",
    "least_squares_backward",
    "multi_step_loss",
    "notrans",
    "single_step_loss",
)
