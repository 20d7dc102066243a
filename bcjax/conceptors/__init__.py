"""Conceptor matrices and their Boolean algebra (Jaeger 2014; JMLR 2017): pure, jittable, batched functions."""

from bcjax.conceptors._algebra import aperture_adaptation
from bcjax.conceptors._aperture import aperture_norm_gradient
from bcjax.conceptors._algebra import conceptor
from bcjax.conceptors._algebra import conceptor_from_correlation
from bcjax.conceptors._algebra import conjunction
from bcjax.conceptors._algebra import correlation
from bcjax.conceptors._algebra import default_tol
from bcjax.conceptors._algebra import disjunction
from bcjax.conceptors._algebra import negation
from bcjax.conceptors._aperture import optimal_aperture
from bcjax.conceptors._algebra import quota
from bcjax.conceptors._aperture import relative_aperture

__all__ = (
  "aperture_adaptation",
  "aperture_norm_gradient",
  "conceptor",
  "conceptor_from_correlation",
  "conjunction",
  "correlation",
  "default_tol",
  "disjunction",
  "negation",
  "optimal_aperture",
  "quota",
  "relative_aperture",
)
