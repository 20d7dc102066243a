"""Comparing two runs of one experiment that should agree to rounding (1 device against 4, one process against two):
their JSON trees, float by float, each held to the tolerance its kind of number can carry."""

import json

import numpy as np
from absl.testing import absltest

from tests._tolerance import assert_close

# results.json keys computed from AUCs (counts of ordered example pairs) or from thresholded consumer predictions
_PAIR_COUNTS = ("auc", "unintended", "combined", "flip", "predicted_positive_share", "gap")


def _numbers(tree, path: str = "") -> list[tuple[str, float]]:
  """Every float of a JSON tree with its path, in a fixed order."""
  if isinstance(tree, dict):
    return [x for key in sorted(tree) for x in _numbers(tree[key], f"{path}/{key}")]
  if isinstance(tree, list):
    return [x for i, item in enumerate(tree) for x in _numbers(item, f"{path}[{i}]")]
  return [(path, float(tree))] if isinstance(tree, float) else []


def assert_runs_agree(test: absltest.TestCase, a, b, where: str) -> int:
  """Asserts that two runs' JSON trees agree: the same keys, the same non-float values (the times of day and the
  machine's load apart), floats counted from AUCs or thresholded predictions (:data:`_PAIR_COUNTS`) within a few
  example pairs (1e-3 of an AUC or a share, 0.2 points of a %), every other float to the float32 tolerance of a deep
  composition (the policy's "network"). Returns how many floats were held to it."""
  # the times of day, and what else the machine was doing meanwhile (a run's load and overlapping runs)
  keep = lambda tree: (
    {k: v for k, v in tree.items() if k not in ("time", "seconds", "load", "concurrent_runs")}
    if isinstance(tree, dict)
    else tree
  )
  a, b = keep(a), keep(b)
  strip = lambda tree: json.loads(json.dumps(tree), parse_float=lambda _: "float")
  test.assertEqual(strip(a), strip(b), where)
  continuous = 0
  for (path, x), (_, y) in zip(_numbers(a), _numbers(b)):
    if any(word in path for word in _PAIR_COUNTS):
      atol = 0.2 if "pct" in path or "/gap" in path else 1e-3
      assert_close(np.float64(y), np.float64(x), "statistical", rtol=0.0, atol=atol, err_msg=f"{where} {path}")
    else:
      # every number comes out of Adam steps through GraphSAGE and BatchNorm, version after version: the policy's
      # deep-composition tolerance, not a single sum's
      assert_close(np.float32(y), np.float32(x), "network", scale=abs(x) or 1.0, err_msg=f"{where} {a} {path}")
      continuous += 1
  return continuous
