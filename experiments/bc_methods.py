r"""The backward-compatibility method matrix shared by ``experiments.bc_aligner`` (the paper's Table 3) and
``experiments.error_amplification``, and the alignment term each method trains with.

A method is (how M_k is trained) × (how version-0 embeddings are published):

=================  ================================  ==============================================
method             training of M_k / B_k             published version-0 embeddings
=================  ================================  ==============================================
keep-all           independent (non-bc's)            the true z_0 (every model kept)
fix-m0             none: M_0 applied to G_k          M_0's embeddings
finetune-m0        M_0 fine-tuned per version        its embeddings
non-bc             independent                       NoTrans: the first d_0 coordinates of z_k
post-lin-sloss     independent, then B_k post hoc    B_1∘…∘B_k(z_k), single-step fit (eq. 7)
post-lin-mloss     independent, then B_k post hoc    B_1∘…∘B_k(z_k), multi-step fit (eq. 10)
joint-notrans      jointly, NoTrans alignment        the first d_0 coordinates of z_k
joint-lin-sloss    jointly with B_k, eq. 7           B_1∘…∘B_k(z_k)
bc-aligner         jointly with B_k, eq. 10          B_1∘…∘B_k(z_k)
=================  ================================  ==============================================
"""

import jax
import jax.numpy as jnp

from bcjax.alignment import (
  TRANSFORM_KINDS,
  BackwardTransform,
  backward_transform,
  multi_step_loss,
  notrans,
  single_step_loss,
)
from experiments.harness import UsageError, option

METHODS = (
  "keep-all",
  "fix-m0",
  "finetune-m0",
  "non-bc",
  "post-lin-sloss",
  "post-lin-mloss",
  "joint-notrans",
  "joint-lin-sloss",
  "bc-aligner",
)
# method -> alignment kind of the joint objective, and of the post-hoc fit
JOINT = {"joint-notrans": "notrans", "joint-lin-sloss": "linear-sloss", "bc-aligner": "linear-mloss"}
POSTHOC = {"post-lin-sloss": "linear-sloss", "post-lin-mloss": "linear-mloss"}
# methods that publish through a keep-latest registry of W_1..W_k
LINEAR = tuple(m for m in METHODS if POSTHOC.get(m, JOINT.get(m, "")).startswith("linear"))
ALIGN_KINDS = ("notrans", "linear-sloss", "linear-mloss")
# --transform KIND replaces the linear W_k of exactly these methods (LINEAR) by a B_k of that kind

# the linear kinds as :func:`bcjax.fit_posthoc` names its losses
POSTHOC_LOSS = {"linear-sloss": "single", "linear-mloss": "multi"}


def alignment_loss(
  kind: str,
  z: jax.Array,
  z_prev: jax.Array,
  w: jax.Array | None,
  history=(),
  *,
  per_dim: bool = False,
  where: jax.Array | None = None,
  axis_name: str | None = None,
  transform=None,
) -> jax.Array:
  r"""The alignment term of a joint objective (eq. 3) or of a post-hoc fit.

  ``notrans``: :math:`\lVert \mathrm{NoTrans}(z_k) - z_{k-1}\rVert^2` (:func:`bcjax.notrans`, the identity on
  the first :math:`d_{k-1}` coordinates); ``linear-sloss``: eq. 7 with :math:`W_k`; ``linear-mloss``: eq. 10 with
  :math:`W_k` and the frozen ``history``. With ``transform`` (a :class:`bcjax.BackwardTransform`), ``w`` and the
  history are that kind's parameters and the two losses use its maps. ``per_dim``, ``where`` and ``axis_name`` as in
  the library's losses.
  """
  if kind == "notrans":
    d_prev = z_prev.shape[-1]
    return single_step_loss(
      notrans(z, d_prev), z_prev, jnp.eye(d_prev, dtype=z.dtype), per_dim=per_dim, where=where, axis_name=axis_name
    )
  if kind == "linear-sloss":
    return single_step_loss(z, z_prev, w, transform=transform, per_dim=per_dim, where=where, axis_name=axis_name)
  if kind == "linear-mloss":
    return multi_step_loss(
      z,
      z_prev,
      w,
      history,
      transform=transform,
      history_transforms=transform,
      per_dim=per_dim,
      where=where,
      axis_name=axis_name,
    )
  raise ValueError(f"alignment kind must be one of {ALIGN_KINDS}, got {kind!r}")


# The B_k kind flags both experiments share (each Config declares its own fields: dataclass fields are per class).
def transform_option():
  return option(
    "linear",
    choices=TRANSFORM_KINDS,
    help="kind of B_k of the methods with a transformation (post-lin-*, joint-lin-sloss, bc-aligner): "
    "linear (the paper), orthogonal, affine or mlp",
  )


def transform_rank_option():
  return option(0, help="affine B_k: the rank of its W (0: full rank)", low=0)


def transform_hidden_option():
  return option(64, help="mlp B_k: its hidden units", low=1)


def transform_sweep_option():
  return option(
    (),
    choices=TRANSFORM_KINDS,
    nonempty=False,
    help="B_k kinds to compare, e.g. linear,orthogonal,affine,mlp: the methods with a transformation "
    "run once per kind (the other methods once), and table.md gains the kind x method table",
  )


def transform_of(kind: str, *, rank: int = 0, hidden: int = 64) -> BackwardTransform | None:
  """The B_k of the methods with a transformation; None for the paper's linear map (W_k as an array: the numbers and
  registries of runs made before other kinds existed). ``rank`` 0 is full rank."""
  if kind == "linear":
    return None
  hparams = {"affine": {"rank": rank or None}, "mlp": {"hidden": hidden}}
  return backward_transform(kind, **hparams.get(kind, {}))


def transform_name(kind: str, hparams: dict | None = None) -> str:
  """``linear``, ``orthogonal``, ``affine(rank=8)``, ``mlp(hidden=64)``: a kind as tables print it."""
  hparams = {k: v for k, v in (hparams or {}).items() if v is not None}
  return kind + (f"({', '.join(f'{k}={v}' for k, v in hparams.items())})" if hparams else "")


def check_transform_rank(kinds, rank: int, dims) -> None:
  """Raises :class:`~experiments.harness.UsageError` when an affine B_k's rank exceeds a version pair's
  min(D_(k-1), D_k): the run would fail at that version, after hours of the earlier ones."""
  smallest = min(min(a, b) for a, b in zip(dims, dims[1:]))
  if "affine" in kinds and rank > smallest:
    raise UsageError(
      "--transform-rank", f"{rank} exceeds the smallest min(D_(k-1), D_k) = {smallest} of the versions {list(dims)}"
    )
