"""Labels of BC-Aligner's five unintended (consumer) tasks, computed from a version's train/val split.

Each task is a binary classification on version-0-space embeddings (the reference's ``split_dynrecdataset`` side
statistics and ``recsys/utils.py`` datasets):

===========================  ========================  ===================================================
task                          input                     label
===========================  ========================  ===================================================
``binary-edge-rating``        concat(z_user, z_item)    rating >= 4 (train edges to fit, val edges to score)
``user-activity``             z_user                    the user has >= 1 val edge in the window
``user-positive-activity``    z_user                    the max rating over the user's val edges is >= 4
``binary-item-rating-avg``    z_item                    mean rating >= tau (tau: median of step-0 train means)
``binary-item-rating-std``    z_item                    unbiased std of the ratings >= 1
===========================  ========================  ===================================================

Item tasks use items with >= 10 edges (duplicates counted): train edges when fitting, train plus val edges when
scoring. User tasks cover every user up to :math:`t_{k+1}`.
"""

from typing import NamedTuple

import numpy as np

from bcjax.data._evolving import VersionSplit
from bcjax.data._segment_std import Convention, segment_std

TASKS = (
  "binary-edge-rating",
  "user-activity",
  "user-positive-activity",
  "binary-item-rating-avg",
  "binary-item-rating-std",
)
"""The consumer tasks of BC-Aligner's evaluation (its Table 2), each a binary label of a user, an item or an edge."""
MIN_ITEM_EDGES = 10
STD_THRESHOLD = 1.0


class TaskExamples(NamedTuple):
  """Examples of one task: user ids and/or item ids (None when the task does not use that side) and 0/1 labels."""

  user: np.ndarray | None
  item: np.ndarray | None
  label: np.ndarray  # int32


def item_rating_stats(
  item: np.ndarray, rating: np.ndarray, num_items: int, min_edges: int = MIN_ITEM_EDGES, *, std: Convention = "unbiased"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(items with >= ``min_edges`` edges, their mean rating, their rating std).

  ``std="unbiased"`` (N − 1, the definition) by default; ``"torch_scatter"`` reproduces the reference code's
  ``scatter_std``, whose :math:`10^{-6}` in the divisor puts an item whose std is exactly 1.0 (e.g. fifteen
  1-star ratings and one 5-star: S/(N−1) = 15/15) just below the task's threshold of 1.0, so its
  ``binary-item-rating-std`` label flips from 1 to 0. Only such exact ties change.

  Args:
    item: item id per edge, [E].
    rating: rating per edge, [E].
    num_items: the number of items.
    min_edges: edges an item needs to be kept.
    std: ``unbiased``, ``population`` or ``torch_scatter``.

  Returns:
    ``(items, mean ratings, rating stds)`` of the kept items.
  """
  count = np.bincount(item, minlength=num_items).astype(np.float64)
  total = np.bincount(item, weights=rating, minlength=num_items)
  mean = total / np.maximum(count, 1)
  spread = segment_std(rating, item, num_items, std)
  keep = np.flatnonzero(count >= min_edges)
  return keep.astype(np.int32), mean[keep], spread[keep]


def item_rating_threshold(split0: VersionSplit) -> float:
  """tau: the median of the mean train ratings of the items with >= 10 train edges at step 0.

  Args:
    split0: version 0's :class:`VersionSplit`.

  Returns:
    tau, a float.

  Raises:
    ValueError: no item with 10 train edges at step 0.
  """
  keep, mean, _ = item_rating_stats(split0.train_item, split0.train_rating, split0.num_items)
  if keep.size == 0:
    raise ValueError("item_rating_threshold: no item has 10 train edges at step 0")
  return float(np.median(mean))


def task_examples(
  task: str, split: VersionSplit, *, fit: bool = False, tau: float | None = None, std: Convention = "unbiased"
) -> TaskExamples:
  """The examples of ``task`` at one step.

  ``fit=True`` gives the consumer's training set (train edges / train-only item statistics), ``fit=False`` the
  evaluation set (val edges / train-plus-val statistics). User tasks are the same either way. ``tau`` is required by
  ``binary-item-rating-avg``; ``std`` is the convention of ``binary-item-rating-std``'s standard deviation (see
  :func:`item_rating_stats`).

  Args:
    task: one of :data:`TASKS`.
    split: the step's :class:`VersionSplit`.
    fit: the consumer's training set (else the evaluation set).
    tau: the rating threshold of ``binary-item-rating-avg``.
    std: how item rating stds are computed.

  Returns:
    The :class:`TaskExamples`.

  Raises:
    ValueError: an unknown task, or ``binary-item-rating-avg`` without ``tau``.
  """
  if task == "binary-edge-rating":
    user, item, rating = (
      (split.train_user, split.train_item, split.train_rating)
      if fit
      else (split.val_user, split.val_item, split.val_rating)
    )
    return TaskExamples(user.astype(np.int32), item.astype(np.int32), (rating >= 4).astype(np.int32))
  if task in ("user-activity", "user-positive-activity"):
    users = np.arange(split.num_users, dtype=np.int32)
    if task == "user-activity":
      label = np.bincount(split.val_user, minlength=split.num_users) > 0
    else:
      best = np.zeros(split.num_users, np.float32)  # no val edge gives max 0, as in the reference's scatter-max
      np.maximum.at(best, split.val_user, split.val_rating)
      label = best >= 4
    return TaskExamples(users, None, label.astype(np.int32))
  if task in ("binary-item-rating-avg", "binary-item-rating-std"):
    if fit:
      item, rating = split.train_item, split.train_rating
    else:
      item = np.concatenate([split.train_item, split.val_item])
      rating = np.concatenate([split.train_rating, split.val_rating])
    keep, mean, spread = item_rating_stats(item, rating.astype(np.float64), split.num_items, std=std)
    if task == "binary-item-rating-avg":
      if tau is None:
        raise ValueError(
          "task_examples: `tau` (item_rating_threshold of step 0) is required for binary-item-rating-avg"
        )
      label = mean >= tau
    else:
      label = spread >= STD_THRESHOLD
    return TaskExamples(None, keep, label.astype(np.int32))
  raise ValueError(f"task_examples: unknown `task` {task!r}; choose from {', '.join(TASKS)}")
