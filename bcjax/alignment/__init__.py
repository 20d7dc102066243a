"""Backward-compatible embeddings: backward transformations, their compositions and alignment losses (BC-Aligner).

Row-vector convention: embeddings are [n, d]; W_k has the paper's shape [d_(k-1), d_k] and is applied as z @ W_k.T.

:class:`BackwardLinear` and :class:`BackwardMap` are flax NNX modules: they load on first use and need
``bcjax[models]``; everything else needs the core install only.
"""

from typing import TYPE_CHECKING

from bcjax import _extras

from bcjax.alignment._compose import apply_backward
from bcjax.alignment._compose import apply_chain
from bcjax.alignment._compose import compose
from bcjax.alignment._compose import compositions
from bcjax.alignment._compose import notrans
from bcjax.alignment._fit import PosthocFit
from bcjax.alignment._fit import fit_posthoc
from bcjax.alignment._linear import init_backward
from bcjax.alignment._linear import least_squares_backward
from bcjax.alignment._losses import alignment_error
from bcjax.alignment._losses import multi_step_loss
from bcjax.alignment._losses import multi_step_pull
from bcjax.alignment._losses import single_step_loss
from bcjax.alignment._transforms import TransformDimsFn
from bcjax.alignment._transforms import TransformFitFn
from bcjax.alignment._transforms import TransformApplyFn
from bcjax.alignment._transforms import TransformInitFn
from bcjax.alignment._transforms import TRANSFORM_KINDS
from bcjax.alignment._transforms import BackwardTransform
from bcjax.alignment._transforms import affine_transform
from bcjax.alignment._transforms import backward_transform
from bcjax.alignment._transforms import linear_transform
from bcjax.alignment._transforms import mlp_transform
from bcjax.alignment._transforms import orthogonal_transform
from bcjax.alignment._transforms import semi_orthogonal

__all__ = (
  "TransformDimsFn",
  "TransformFitFn",
  "TransformApplyFn",
  "TransformInitFn",
  "TRANSFORM_KINDS",
  "BackwardLinear",
  "BackwardMap",
  "BackwardTransform",
  "PosthocFit",
  "affine_transform",
  "alignment_error",
  "apply_backward",
  "apply_chain",
  "backward_transform",
  "compose",
  "compositions",
  "fit_posthoc",
  "init_backward",
  "least_squares_backward",
  "linear_transform",
  "mlp_transform",
  "multi_step_loss",
  "multi_step_pull",
  "notrans",
  "orthogonal_transform",
  "semi_orthogonal",
  "single_step_loss",
)

__getattr__ = _extras.lazy_names(__name__, {"BackwardLinear": "_module", "BackwardMap": "_module"}, "models", ("flax",))

if TYPE_CHECKING:
  from bcjax.alignment._module import BackwardLinear as BackwardLinear
  from bcjax.alignment._module import BackwardMap as BackwardMap
