"""The BC-Aligner experiment's report: the headline's rule, the val-user noise intervals against their closed form,
the notebook's degradation arithmetic, the transform tables and the seeds report against NumPy means, stds and
paired differences."""

import io
import json
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import jax
import numpy as np
import pytest
from absl.testing import absltest
from scipy import stats

from experiments.bc_aligner import chance, noise, seeds
from experiments.bc_aligner.experiment import BCAligner
from experiments.bc_aligner.report import (
  figure_5,
  headline,
  summarise,
  table_3,
  transform_figure,
  transform_headline,
  transform_table,
)
from experiments.bc_aligner.train import (
  recall,
  user_recall50,
)
from tests._tolerance import assert_close
from tests.test_bc_aligner import small_versions


class ReportTest(absltest.TestCase):
  def test_headline_names_the_best_backward_compatible_method(self):
    def row(i, u):
      return {
        "intended_degradation_pct": i,
        "unintended_degradation_pct": u,
        "combined_degradation_pct": None if u is None else i + u,
      }

    methods = {
      "keep-all": row(0.0, 0.0),
      "non-bc": row(0.0, -30.0),
      "fix-m0": row(-6.0, 0.0),
      "joint-notrans": row(-3.0, -3.5),
      "bc-aligner": row(-3.0, -1.0),
      "post-lin-sloss": row(0.0, -14.0),
    }
    line = headline({"methods": methods})
    self.assertTrue(line.startswith("Best backward-compatible trade-off: bc-aligner, combined -4.00 %"), line)
    self.assertIn("intended -3.00 % vs Keep-All", line)
    self.assertIn("next: fix-m0 -6.00 %", line)  # Keep-All and Non-BC are not backward compatible
    methods["fix-m0"] = row(-1.0, 0.0)
    self.assertIn("trade-off: fix-m0", headline({"methods": methods}))
    self.assertIn("left out", headline({"methods": {m: row(0.0, None) for m in methods}}))
    reason = "1 consumer task(s) left with version-0 consumers clearly above chance (at least 2 needed)"
    line = headline({"methods": {m: row(0.0, None) for m in methods}, "unintended_not_measurable": reason})
    self.assertEqual(line.split(". ")[0], f"Unintended side not measurable on this data: {reason}")
    self.assertIn("No best backward-compatible method is named", line)
    self.assertNotIn("trade-off:", line)

  def test_headline_says_whether_the_lead_survives_redrawn_val_users(self):
    def row(i, u):
      return {"intended_degradation_pct": i, "unintended_degradation_pct": u, "combined_degradation_pct": i + u}

    results = {
      "methods": {"joint-lin-sloss": row(-3.0, -1.5), "bc-aligner": row(-2.0, -1.0)},
      "gap": {
        "best": "bc-aligner",
        "next": "joint-lin-sloss",
        "gap_pct": 1.5,
        "ci95": [0.25, 2.75],
        "intended_ci95": [-0.25, 2.25],
      },
    }
    self.assertIn(
      "The lead of 1.50 points has a 95 % interval of [+0.25, +2.75] over redrawn val users (consumer "
      "AUCs held fixed): it holds when the val users are redrawn.",
      headline(results),
    )
    results["gap"]["ci95"] = [-0.5, 3.5]
    self.assertIn(
      "[-0.50, +3.50] over redrawn val users (consumer AUCs held fixed): within the noise of the val "
      "users' draw: one run does not order the two",
      headline(results),
    )
    same_models = {**results, "gap": {**results["gap"], "ci95": [0.5, 0.5], "intended_ci95": [0.0, 0.0]}}
    self.assertTrue(
      headline(same_models).endswith(
        "Both serve the same models, so the lead of 1.50 points is all on the consumer tasks, whose noise one run "
        "does not measure."
      ),
      headline(same_models),
    )
    results["gap"]["best"] = "joint-lin-sloss"  # intervals of another ranking are never quoted
    self.assertTrue(headline(results).endswith("next: joint-lin-sloss -4.50 %."), headline(results))


class ValUserNoiseTest(absltest.TestCase):
  """The intended degradation's and the gap's intervals over redrawn val users against their closed forms: the
  degradation is 100 (x̄_m / x̄_0 - 1), a ratio whose bootstrap standard error is the delta method's
  100 / (K x̄_0) sqrt(sum_k var_k(a - r b) / n_k); the gap is 100/(K x0) times the sum over versions of the mean
  per-user difference, with standard error sqrt(sum_k w^2 var_k / n_k)."""

  def per_user(self, rng, sizes, level):
    return [(np.arange(n) * 3, np.clip(rng.normal(level, 0.3, n), 0, 1)) for n in sizes]

  @pytest.mark.heavy
  def test_intervals_are_centred_on_the_degradation_with_the_closed_form_width(self):
    rng = np.random.default_rng(0)
    sizes = (300, 250, 400)
    per_user = {"non-bc": self.per_user(rng, sizes, 0.4), "bc-aligner": self.per_user(rng, sizes, 0.35)}
    x0 = float(np.mean([r.mean() for _, r in per_user["non-bc"]]))
    xm = float(np.mean([r.mean() for _, r in per_user["bc-aligner"]]))
    d = [rb - r0 for (_, rb), (_, r0) in zip(per_user["bc-aligner"], per_user["non-bc"])]
    degradation = 100.0 * np.mean([x.mean() for x in d]) / x0
    assert_close(degradation, 100.0 * (xm / x0 - 1.0))
    # the delta method for the ratio of the two means over versions: the linearised residual a - r b per version
    ratio = xm / x0
    lin = [rb - ratio * r0 for (_, rb), (_, r0) in zip(per_user["bc-aligner"], per_user["non-bc"])]
    se = np.sqrt(sum((100.0 / (3 * x0)) ** 2 * x.var() / x.size for x in lin))
    got = noise.intended_intervals(per_user, jax.random.key(0))
    self.assertEqual(got["non-bc"], [0.0, 0.0])
    low, high = got["bc-aligner"]
    assert_close((low + high) / 2, degradation, op="statistical", rtol=0.0, atol=0.15 * se)
    assert_close(high - low, 2 * 1.959964 * se, op="statistical", rtol=0.1, atol=0.0)
    self.assertLess(high, 0.0)  # a 5-point drop on 950 users is beyond their draw

    results = {
      "methods": {
        "non-bc": {"intended_recall50_mean": x0},
        "bc-aligner": {
          "intended_degradation_pct": degradation,
          "unintended_degradation_pct": -1.0,
          "combined_degradation_pct": degradation - 1.0,
        },
        "fix-m0": {
          "intended_degradation_pct": -40.0,
          "unintended_degradation_pct": 0.0,
          "combined_degradation_pct": -40.0,
        },
      }
    }
    per_user["fix-m0"] = self.per_user(rng, sizes, 0.1)
    gap = noise.gap_interval(results, per_user, jax.random.key(1))
    self.assertEqual((gap["best"], gap["next"]), ("bc-aligner", "fix-m0"))
    assert_close(gap["gap_pct"], degradation - 1.0 + 40.0)
    # the consumers' gap (-1 - 0) shifts the intended gap's interval
    assert_close(np.array(gap["ci95"]), np.array(gap["intended_ci95"]) - 1.0)
    self.assertGreater(gap["ci95"][0], 0.0)
    del results["methods"]["fix-m0"]
    self.assertIsNone(noise.gap_interval(results, per_user, jax.random.key(1)))

  def test_every_backward_compatible_method_gets_an_interval_when_the_unintended_side_is_not_measurable(self):
    # the Amazon 2014 report: no consumer task measured, so no combined degradation ranks anything; the intended
    # side is still shown and every backward-compatible method's intended degradation carries its interval
    rng = np.random.default_rng(4)
    sizes = (2000, 1800)
    levels = {"non-bc": 0.30, "fix-m0": 0.36, "bc-aligner": 0.29, "joint-lin-sloss": 0.30}
    per_user = {m: self.per_user(rng, sizes, level) for m, level in levels.items()}
    per_user["keep-all"] = per_user["non-bc"]  # Keep-All serves Non-BC's models
    x0 = float(np.mean([r.mean() for _, r in per_user["non-bc"]]))
    methods = {
      m: {
        "intended_recall50_mean": float(np.mean([r.mean() for _, r in pu])),
        "intended_degradation_pct": 100.0 * (np.mean([r.mean() for _, r in pu]) - x0) / x0,
        "unintended_degradation_pct": None,
        "combined_degradation_pct": None,
      }
      for m, pu in per_user.items()
    }
    results = {"methods": methods, "unintended_not_measurable": "no consumer task measured"}
    runs = {m: SimpleNamespace(serving=m) for m in per_user}
    cfg = SimpleNamespace(seed=0)
    with mock.patch.object(noise, "user_recalls", lambda serving, versions: {m: per_user[m] for m in serving}):
      BCAligner._val_user_noise(results, runs, None, cfg)
    for m in ("fix-m0", "bc-aligner", "joint-lin-sloss"):
      low, high = methods[m]["intended_degradation_ci95"]
      self.assertLess(low, methods[m]["intended_degradation_pct"], m)
      self.assertGreater(high, methods[m]["intended_degradation_pct"], m)
    self.assertNotIn("gap", results)  # nothing is ranked
    self.assertNotIn("intended_degradation_ci95", methods["keep-all"])  # not backward compatible
    # the table shows the intervals, the sign convention, and Fix-M0 beating Keep-All
    results.update(dataset="d", preset="p", seed=0, config={"lam": 1.0}, consumers={}, data_notes=["a note"])
    results["consumers_left_out"] = {}
    results["consumers_at_chance"] = {t: "at chance" for t in ("user-activity", "binary-edge-rating")}
    for m in methods.values():
      m.update(
        intended_recall50_by_version=[0.3, 0.3],
        unintended_auc_mean=None,
        alignment_error=0.0,
        alignment_error_by_version=[0.0],
      )
    table = table_3(results)
    low, high = methods["bc-aligner"]["intended_degradation_ci95"]
    self.assertIn(f"[{low:+.2f}, {high:+.2f}]", table)
    self.assertIn("negative is worse than Keep-All, positive better", table)
    self.assertIn("binary-edge-rating, user-activity: version-0 consumers not above chance", table)
    self.assertNotIn("one class", table.split("\n")[0])  # no task had one class: the caption does not say so
    self.assertIn("Data: a note", table)
    self.assertIn("Never updating beats updating here: Fix-M0", table)

  def test_few_val_users_never_give_a_bound_below_minus_100_percent(self):
    # 28 sampled users (the MovieLens test preset): sparse recalls, where the interval around a fixed Keep-All mean
    # reached -124 %; the ratio's interval cannot go below -100 % (a recall of 0 everywhere)
    rng = np.random.default_rng(6)
    users = lambda n, p: (np.arange(n), np.where(rng.random(n) < p, rng.random(n), 0.0))
    per_user = {"non-bc": [users(6, 0.3), users(5, 0.3)], "fix-m0": [users(6, 0.2), users(5, 0.2)]}
    per_user["non-bc"][0][1][0] = 0.5  # Keep-All scores somewhere
    per_user["zero"] = [(u, np.zeros_like(r)) for u, r in per_user["non-bc"]]
    got = noise.intended_intervals(per_user, jax.random.key(0))
    self.assertGreaterEqual(got["fix-m0"][0], -100.0)
    self.assertEqual(got["zero"], [-100.0, -100.0])
    # one or two val users in a version: no interval (None, shown as a dash), never a zero-width one, and no gap
    for n in (1, 2):
      few = {m: [(u[:n], r[:n]) for u, r in v] for m, v in per_user.items()}
      self.assertIsNone(noise.intended_intervals(few, jax.random.key(0))["fix-m0"], n)
      row = lambda c: {"combined_degradation_pct": c, "unintended_degradation_pct": 0.0}
      ranked = {"methods": {"non-bc": {"intended_recall50_mean": 0.3}, "fix-m0": row(-1.0), "bc-aligner": row(-2.0)}}
      few["bc-aligner"] = few["non-bc"]
      self.assertIsNone(noise.gap_interval(ranked, few, jax.random.key(0)), n)

  def test_methods_scored_on_other_val_users_are_refused(self):
    rng = np.random.default_rng(1)
    per_user = {"non-bc": self.per_user(rng, (5, 6), 0.4), "bc-aligner": self.per_user(rng, (5, 7), 0.4)}
    with self.assertRaisesRegex(ValueError, "version 1: the two methods were scored on different val users"):
      noise.intended_intervals(per_user, jax.random.key(0))

  @pytest.mark.heavy
  def test_per_user_recalls_average_to_the_val_recall_and_shared_models_are_scored_once(self):
    _, versions = small_versions()
    rng = np.random.default_rng(2)
    zs = [rng.normal(size=(v.num_nodes, 8)).astype(np.float32) for v in versions[:2]]
    for z, vd in zip(zs, versions):
      users, values = user_recall50(z, vd)
      np.testing.assert_array_equal(users, np.unique(vd.split.val_user))
      self.assertEqual(float(np.mean(values)), recall(z, vd)["recall@50"])
    with mock.patch.object(noise, "user_recall50", wraps=user_recall50) as scorer:
      out = noise.user_recalls({"non-bc": zs, "post-lin-sloss": zs}, versions[:2])
    self.assertEqual(scorer.call_count, 2)
    self.assertIs(out["non-bc"][1], out["post-lin-sloss"][1])

  def test_notebook_arithmetic(self):
    recalls = {
      "non-bc": [{"recall@50": 0.4}] * 2,
      "fix-m0": [{"recall@50": 0.2}] * 2,
      "bc-aligner": [{"recall@50": 0.3}, {"recall@50": 0.5}],
    }
    z = [np.zeros((3, 2)), np.zeros((3, 2))]
    published = {"non-bc": [z[0], np.full((3, 2), 1.0)], "fix-m0": z, "bc-aligner": [z[0], np.full((3, 2), 0.5)]}
    consumers = {
      "t1": {
        "steps": [1],
        "auc": {"non-bc": [[0.5]], "fix-m0": [[0.8], [0.6]], "bc-aligner": [[0.7]]},
        "negative_flips": {"non-bc": [[0.3]], "fix-m0": [[0.0], [0.0]], "bc-aligner": [[0.1], [0.2]]},
      },
      "t2": {
        "steps": [1],
        "auc": {"non-bc": [[0.6]], "fix-m0": [[0.9]], "bc-aligner": [[0.8]]},
        "negative_flips": {"non-bc": [[0.1]], "fix-m0": [[0.0]], "bc-aligner": [[0.05]]},
      },
    }
    published_recalls = {"non-bc": [0.1, 0.3], "fix-m0": [0.2, 0.2], "bc-aligner": [0.3, 0.3]}
    out = summarise(recalls, published, consumers, published_recalls)
    assert_close(out["bc-aligner"]["negative_flip_pct"], 100 * (0.15 + 0.05) / 2, scale=100.0)  # seeds, then tasks
    assert_close(out["non-bc"]["negative_flip_pct_by_task"]["t1"], 30.0, scale=100.0)
    assert_close(out["bc-aligner"]["recall_recovery_pct"], 100 * 0.3 / 0.4, scale=100.0)  # over Keep-All's 0.4
    assert_close(out["non-bc"]["recall_recovery_pct"], 50.0, scale=100.0)
    del consumers["t2"]["negative_flips"]  # a consumers stage saved before flips were measured
    self.assertEqual(set(summarise(recalls, published, consumers)["fix-m0"]["negative_flip_pct_by_task"]), {"t1"})
    assert_close(out["fix-m0"]["intended_degradation_pct"], -50.0)
    assert_close(out["bc-aligner"]["intended_degradation_pct"], 0.0, scale=100.0)  # percentages
    y0 = (0.7 + 0.9) / 2  # fix-m0: mean over seeds per task, then over tasks
    assert_close(out["non-bc"]["unintended_degradation_pct"], 100 * (0.55 - y0) / y0)
    assert_close(out["bc-aligner"]["combined_degradation_pct"], 100 * (0.75 - y0) / y0)
    assert_close(out["non-bc"]["alignment_error_by_version"], [0.0, np.sqrt(2)])
    assert_close(out["bc-aligner"]["alignment_error"], np.sqrt(0.5) / 2)

  @pytest.mark.heavy
  def test_transform_table_and_headline(self):
    def row(i, u, flips):
      return {
        "intended_degradation_pct": i,
        "unintended_degradation_pct": u,
        "combined_degradation_pct": i + u,
        "alignment_error": 1.0,
        "negative_flip_pct": flips,
        "recall_recovery_pct": 90.0,
      }

    results = {
      "dataset": "synthetic",
      "preset": "quick",
      "seed": 0,
      "transform_sweep": {
        "linear": {
          "transform": "linear",
          "methods": {"post-lin-mloss": row(0.0, -8.0, 20.0), "bc-aligner": row(-3.0, -2.0, 6.0)},
        },
        "mlp": {
          "transform": "mlp(hidden=64)",
          "methods": {"post-lin-mloss": row(0.0, -5.0, 15.0), "bc-aligner": row(-4.5, -1.0, 5.0)},
        },
      },
    }
    table = transform_table(results)
    self.assertIn("| mlp(hidden=64) | post-lin-mloss | post-hoc | -5.00 | +0.00 | -5.00 |", table)
    self.assertEqual(table.count("\n| "), 5)  # header and four rows
    lines = transform_headline(results).splitlines()
    self.assertEqual(
      lines[0], "Best B_k, joint: linear (bc-aligner), combined -5.00 % (intended -3.00 %, negative flips 6.00 %)."
    )  # -5.0 beats mlp's -5.5
    self.assertTrue(lines[1].startswith("Best B_k, post-hoc: mlp(hidden=64) (post-lin-mloss), combined -5.00 %"))
    path = Path(self.create_tempdir()) / "transforms.png"
    transform_figure(path, results)
    self.assertEqual(path.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

  @pytest.mark.heavy
  def test_figure_5(self):
    path = Path(self.create_tempdir()) / "figure5.png"
    sweep = {
      str(lam): {
        "intended_degradation_pct": -lam / 4,
        "unintended_degradation_pct": -8 / lam,
        "combined_degradation_pct": -lam / 4 - 8 / lam,
      }
      for lam in (1, 4, 16)
    }
    figure_5(path, sweep)
    self.assertEqual(path.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


def best_of(combined: dict, candidates: tuple, i: int) -> str:
  return max(candidates, key=lambda m: combined[m][i])


class ChanceTest(absltest.TestCase):
  """The intended task's chance level (:mod:`experiments.bc_aligner.chance`) against a float64 reference built from
  sets and scipy's hypergeometric distribution, against random rankings through the experiment's own retrieval, and
  what the report does with a reference at chance."""

  def reference(self, split, k):
    """Per val user: the random ranking's expected recall and its variance, from Python sets."""
    train, val = {}, {}
    for u, i in zip(split.train_user.tolist(), split.train_item.tolist()):
      train.setdefault(u, set()).add(i)
    for u, i in zip(split.val_user.tolist(), split.val_item.tolist()):
      val.setdefault(u, set()).add(i)
    means, variances = [], []
    for u in sorted(val):
      candidates = split.num_items - len(train.get(u, set()))
      ranked = len(val[u] - train.get(u, set()))
      with np.errstate(divide="ignore", invalid="ignore"):  # scipy's kurtosis of a small population: unused here
        mean, var = stats.hypergeom.stats(candidates, ranked, min(k, candidates), moments="mv")
      means.append(float(mean) / len(val[u]))
      variances.append(float(var) / len(val[u]) ** 2)
    return np.array(means, np.float64), np.array(variances, np.float64)

  def test_the_level_against_sets_and_scipy(self):
    _, versions = small_versions()
    splits = [v.split for v in versions]
    got = chance.intended_chance(splits, (10, 50))
    by_version = {k: [self.reference(s, k) for s in splits] for k in (10, 50)}
    for k, refs in by_version.items():
      means = [m.mean() for m, _ in refs]
      sds = [np.sqrt(v.sum()) / v.size for _, v in refs]
      assert_close(got[f"recall@{k}"]["mean_by_version"], means)
      assert_close(got[f"recall@{k}"]["sd_by_version"], sds)
      assert_close(got[f"recall@{k}"]["mean"], np.mean(means))
      assert_close(got[f"recall@{k}"]["sd"], np.sqrt(np.sum(np.square(sds))) / len(sds))
    # re-interactions (a val item the user trained on) are never ranked but count: the level is below n P / (C R)'s
    # value with every val item ranked
    split = splits[0]
    repeat = split._replace(
      val_user=np.r_[split.val_user, split.train_user[:1]], val_item=np.r_[split.val_item, split.train_item[:1]]
    )
    mean, _ = self.reference(repeat, 50)
    assert_close(chance.version_chance(repeat, (50,))["recall@50"][0], mean.mean())

  @pytest.mark.heavy
  def test_random_rankings_through_the_experiments_retrieval_score_the_level(self):
    _, versions = small_versions()
    vd = versions[0]
    level, sd = chance.version_chance(vd.split, (50,))["recall@50"]
    rng = np.random.default_rng(0)
    draws = [recall(rng.normal(size=(vd.num_nodes, 32)).astype(np.float32), vd, ())["recall@50"] for _ in range(60)]
    # random embeddings rank every user's candidates uniformly; users share the item draws, so the draws' spread is
    # only near the independent users' sd: the mean is tested against its own standard error
    assert_close(np.mean(draws), level, "statistical", rtol=0.0, atol=4 * np.std(draws) / np.sqrt(len(draws)))
    # the sd, against independent uniform rankings of each user's candidates (float64 NumPy)
    c, p, r = chance._per_user(vd.split)
    sims = np.zeros(4000)
    for cu, pu, ru in zip(c.astype(int), p.astype(int), r):
      ranks = rng.random((sims.size, cu)).argsort(axis=1)[:, : min(50, cu)]  # the first pu candidates are relevant
      sims += (ranks < pu).sum(axis=1) / ru / len(c)
    assert_close(sims.mean(), level, "statistical", rtol=0.0, atol=4 * sd / np.sqrt(sims.size))
    assert_close(sims.std(), sd, "statistical", rtol=0.08, atol=0.0)

  def results(self, non_bc, others):
    """A run whose methods score these Recall@50 by version; a random ranking scores 0.06 ± 0.01 at every one."""
    recalls = {"non-bc": [{"recall@50": v} for v in non_bc]}
    recalls.update({m: [{"recall@50": v} for v in vs] for m, vs in others.items()})
    level = {"recall@50": {"mean": 0.06, "sd": 0.01, "mean_by_version": [0.06] * 5, "sd_by_version": [0.02] * 5}}
    named, why = chance.assess(recalls, level, "recall@50", "non-bc")
    z = [np.zeros((2, 2))] * 5
    consumers = {"t": {"steps": [1], "auc": {m: [[0.7 if m == "fix-m0" else 0.6]] for m in recalls}}}
    methods = summarise(
      recalls, {m: z for m in recalls}, consumers, {m: [0.05] * 5 for m in recalls}, intended_measured=why is None
    )
    for m in methods.values():
      m["intended_degradation_ci95"] = [-1.0, 1.0]
    return {
      "dataset": "amazon-Musical_Instruments",
      "preset": "test",
      "seed": 0,
      "config": {"lam": 1.0},
      "methods": methods,
      "consumers": {},
      "intended_chance": level,
      "intended_at_chance": named,
      "intended_not_measurable": why,
    }

  def test_a_ranking_at_chance_makes_the_intended_side_not_measurable(self):
    # the Musical Instruments run: Keep-All's Recall@50 0.0596 against a random ranking's 0.0605 ± 0.0074
    results = self.results([0.0596] * 5, {"fix-m0": [0.058] * 5, "bc-aligner": [0.061] * 5})
    self.assertEqual(results["intended_at_chance"], ["non-bc", "fix-m0", "bc-aligner"])
    self.assertIn("Keep-All's Recall@50, 0.0596 (mean over versions), is at chance", results["intended_not_measurable"])
    for m in results["methods"].values():
      self.assertIsNone(m["intended_degradation_pct"])
      self.assertIsNone(m["combined_degradation_pct"])
      self.assertIsNone(m["recall_recovery_pct"])
    line = headline(results)
    self.assertTrue(line.startswith("Intended side not measurable on this data: Keep-All's Recall@50"), line)
    self.assertIn("No best backward-compatible method is named", line)
    self.assertNotIn("trade-off:", line)
    table = table_3(results)
    self.assertIn("| bc-aligner | linear | not measurable | not measurable |", table)
    self.assertIn("| 0.0610 | 0.0600 ± 0.0100: at chance |", table)  # beside the intended number
    self.assertIn(
      "At chance on the intended task (Recall@50 at most 2 sd above a random ranking's 0.0600 ± 0.0100): "
      "non-bc, fix-m0, bc-aligner.",
      table,
    )
    self.assertIn("Chance: a random ranking of each version's candidates", table)

  def test_a_version_0_model_at_chance_makes_the_intended_side_not_measurable(self):
    # the issue's All Beauty run: version 0's model below a random ranking, the later versions above it
    results = self.results([0.05, 0.3, 0.3, 0.3, 0.3], {"fix-m0": [0.05] * 5, "bc-aligner": [0.05, 0.2, 0.2, 0.2, 0.2]})
    self.assertEqual(results["intended_at_chance"], ["fix-m0"])  # M_0 serves every version: at chance on the mean
    self.assertIn(
      "version 0's model scores Recall@50 0.0500 at version 0, at chance", results["intended_not_measurable"]
    )
    self.assertIn("No best backward-compatible method is named", headline(results))

  def test_a_reference_above_chance_names_the_models_at_chance(self):
    results = self.results([0.3] * 5, {"fix-m0": [0.07] * 5, "bc-aligner": [0.25] * 5})
    self.assertIsNone(results["intended_not_measurable"])
    self.assertEqual(results["intended_at_chance"], ["fix-m0"])  # 0.07 <= 0.06 + 2 x 0.01
    table = table_3(results)
    self.assertIn("| 0.2500 | 0.0600 ± 0.0100: above |", table)
    self.assertIn("| 0.0700 | 0.0600 ± 0.0100: at chance |", table)
    # the comparisons without an interval say so, and how many seeds give one
    self.assertIn("The unintended and combined degradations and the recall recovery have no interval", table)
    self.assertIn("(3 seeds give one: python -m experiments.bc_aligner.seeds)", table)
    self.assertIn("Best backward-compatible trade-off:", headline(results))


class SeedsTest(absltest.TestCase):
  """``experiments.bc_aligner.seeds`` on runs written here, against NumPy means, stds and paired differences."""

  METHODS = ("keep-all", "fix-m0", "finetune-m0", "non-bc", "joint-lin-sloss", "bc-aligner")

  def make_runs(self, degradations: dict[str, np.ndarray], config_changes: dict | None = None) -> list[Path]:
    """One run per row of ``degradations[m]`` = [[intended, unintended], ...]; seeds 10, 11, ..."""
    root = Path(self.create_tempdir().full_path)
    paths = []
    for i in range(len(next(iter(degradations.values())))):
      path = root / f"s{i}"
      path.mkdir()
      config = {
        "experiment": "bc_aligner",
        "argv": ["--seed", str(10 + i)],
        "preset": "quick",
        "dataset": "synthetic",
        "config": {"lam": 2.0, "epochs": 80, "seed": 10 + i},
      }
      for key, value in (config_changes or {}).get(i, {}).items():
        config["config"][key] = value
      methods = {
        m: {
          "intended_degradation_pct": float(d[i, 0]),
          "unintended_degradation_pct": float(d[i, 1]),
          "combined_degradation_pct": float(d[i].sum()),
        }
        for m, d in degradations.items()
      }
      (path / "config.json").write_text(json.dumps(config))
      (path / "results.json").write_text(json.dumps({"methods": methods}))
      paths.append(path)
    return paths

  def random_degradations(self, runs: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out = {m: rng.normal(-5.0, 3.0, size=(runs, 2)) for m in self.METHODS}
    out["keep-all"][:] = 0.0
    return out

  def run_main(self, argv) -> str:
    with mock.patch("sys.stdout", new_callable=io.StringIO) as stdout:
      self.assertEqual(seeds.main([str(a) for a in argv]), 0)
    return stdout.getvalue()

  def test_means_stds_wins_and_paired_leads_match_numpy(self):
    d = self.random_degradations()
    text = self.run_main(self.make_runs(d))
    combined = {m: v.sum(axis=1) for m, v in d.items()}
    candidates = ("fix-m0", "finetune-m0", "joint-lin-sloss", "bc-aligner")  # the backward-compatible ones here
    best = [max(candidates, key=lambda m, i=i: combined[m][i]) for i in range(3)]
    for m in self.METHODS:
      row = next(line for line in text.splitlines() if line.startswith(f"| {m} |"))
      cells = [c.strip() for c in row.strip("|").split("|")]
      for cell, values in zip(cells[1:4], (combined[m], d[m][:, 0], d[m][:, 1])):
        self.assertEqual(cell, f"{np.mean(values):+.2f} ± {np.std(values, ddof=1):.2f}", (m, cells))
      if m in ("keep-all", "non-bc"):  # not backward compatible: no win count, no lead
        self.assertEqual(cells[4:], ["—", "—"])
        continue
      self.assertEqual(cells[4], f"{best.count(m)} / 3")
      lead = combined["bc-aligner"] - combined[m]
      self.assertEqual(cells[5], "—" if m == "bc-aligner" else f"{np.mean(lead):+.2f} ± {np.std(lead, ddof=1):.2f}")
    holds = int(np.sum(d["finetune-m0"][:, 0] <= 0.0))
    self.assertIn(
      f"Keep-All ≥ Finetune-M0 on {holds} of 3 seeds; BC-Aligner has the best combined degradation on "
      f"{best.count('bc-aligner')} of 3.",
      text,
    )
    for i in range(3):
      self.assertIn(
        f"| {10 + i} | {'yes' if d['finetune-m0'][i, 0] <= 0 else 'no'} | {best[i]} | n/a | "
        f"{d['bc-aligner'][i, 0]:+.2f} |",
        text,
      )

  def test_leads_by_component_match_numpy_with_t_intervals(self):
    d = self.random_degradations()
    runs = self.make_runs(d)
    flips = {m: np.random.default_rng(hash(m) % 1000).uniform(0, 10, 3) for m in self.METHODS}
    for i, run in enumerate(runs):
      results = json.loads((run / "results.json").read_text())
      for m in self.METHODS:
        results["methods"][m]["negative_flip_pct"] = float(flips[m][i])
      (run / "results.json").write_text(json.dumps(results))
    text = self.run_main(runs)
    t = 4.302652729911275  # the 97.5 % quantile of Student's t with 2 degrees of freedom

    def cell(lead):
      half = t * np.std(lead, ddof=1) / np.sqrt(3)
      return f"{np.mean(lead):+.2f} [{np.mean(lead) - half:+.2f}, {np.mean(lead) + half:+.2f}] ({np.sum(lead > 0)} / 3)"

    section = text.split("by component")[1]
    for m in ("fix-m0", "finetune-m0", "joint-lin-sloss"):
      row = next(line for line in section.splitlines() if line.startswith(f"| {m} |"))
      bc, other = d["bc-aligner"], d[m]
      expected = [
        cell(bc.sum(1) - other.sum(1)),
        cell(bc[:, 0] - other[:, 0]),
        cell(bc[:, 1] - other[:, 1]),
        cell(flips[m] - flips["bc-aligner"]),
      ]  # fewer flips is better: the method's minus BC-Aligner's
      self.assertEqual([c.strip() for c in row.strip("|").split("|")][1:], expected, m)
    for m in ("keep-all", "non-bc", "bc-aligner"):  # not a rival BC-Aligner is compared with
      self.assertNotIn(f"| {m} |", section.split("| seed |")[0])

  def test_two_seeds_give_no_interval(self):
    d = self.random_degradations(runs=2)
    text = self.run_main(self.make_runs(d))
    row = next(line for line in text.split("by component")[1].splitlines() if line.startswith("| fix-m0 |"))
    lead = d["bc-aligner"].sum(1) - d["fix-m0"].sum(1)
    self.assertIn(f"| {np.mean(lead):+.2f} (no interval: 2 runs; 3 give one) ({np.sum(lead > 0)} / 2) |", row)
    self.assertNotIn("[", row)

  def test_without_stored_flips_the_flip_lead_is_not_available(self):
    text = self.run_main(self.make_runs(self.random_degradations()))
    row = next(line for line in text.split("by component")[1].splitlines() if line.startswith("| joint-lin-sloss |"))
    self.assertTrue(row.endswith("| n/a |"), row)

  def test_the_best_methods_val_user_interval_is_quoted_per_seed(self):
    d = self.random_degradations()
    runs = self.make_runs(d)
    combined = {m: v.sum(axis=1) for m, v in d.items()}
    candidates = ("fix-m0", "finetune-m0", "joint-lin-sloss", "bc-aligner")
    for i, (run, low) in enumerate(zip(runs, (0.5, -1.25, 0.75))):
      best, runner_up = sorted(candidates, key=lambda m, i=i: -combined[m][i])[:2]
      results = json.loads((run / "results.json").read_text())
      results["gap"] = {
        "best": best,
        "next": runner_up,
        "gap_pct": combined[best][i] - combined[runner_up][i],
        "ci95": [low, 3.0],
        "intended_ci95": [low - 0.5, 2.5],
      }
      if i == 2:
        results["gap"]["best"] = runner_up  # an interval of another ranking is not quoted
      (run / "results.json").write_text(json.dumps(results))
    text = self.run_main(runs)
    for i, low in enumerate((0.5, -1.25)):
      best, runner_up = sorted(candidates, key=lambda m, i=i: -combined[m][i])[:2]
      self.assertIn(
        f"| {best} | {combined[best][i] - combined[runner_up][i]:.2f} over {runner_up} [{low:+.2f}, +3.00] |", text
      )
    self.assertIn(f"| {best_of(combined, candidates, 2)} | n/a |", text)
    self.assertIn(
      "the best method's lead is beyond the val users' sampling noise on 1 of the 2 runs that measured it.", text
    )
    results = json.loads((runs[0] / "results.json").read_text())
    results["gap"]["intended_ci95"] = [0.0, 0.0]  # two methods that serve the same models: not a val-user test
    (runs[0] / "results.json").write_text(json.dumps(results))
    text = self.run_main(runs)
    self.assertIn(f"over {results['gap']['next']} (same models: consumers only) |", text)
    self.assertIn("beyond the val users' sampling noise on 0 of the 1 runs that measured it.", text)

  def test_a_bc_aligner_ahead_on_every_seed_counts_every_seed(self):
    d = self.random_degradations()
    d["bc-aligner"][:] = [0.5, -0.1]  # combined +0.4: above every other backward-compatible method
    d["finetune-m0"][:, 0] = [-1.0, 0.0, 2.0]  # Keep-All >= Finetune-M0 on the first two only (ties count)
    text = self.run_main(self.make_runs(d))
    self.assertIn(
      "Keep-All ≥ Finetune-M0 on 2 of 3 seeds; BC-Aligner has the best combined degradation on 3 of 3.", text
    )

  def test_report_file_is_written_once_and_never_over_another(self):
    paths = self.make_runs(self.random_degradations(2))
    out = Path(self.create_tempdir().full_path) / "seeds.md"
    text = self.run_main([*paths, "--out", out])
    self.assertEqual(out.read_text(), text)
    with self.assertRaises(SystemExit):
      seeds.main([*map(str, paths), "--out", str(out)])
    self.assertEqual(out.read_text(), text)

  def test_runs_of_different_protocols_unfinished_runs_and_repeated_seeds_are_refused(self):
    d = self.random_degradations()
    cases = {
      "config.lam: 2.0 vs 16.0": self.make_runs(d, {2: {"lam": 16.0}}),
      "seed 10 appears in more than one run": self.make_runs(d, {1: {"seed": 10}}),
    }
    unfinished = self.make_runs(d)
    (unfinished[1] / "results.json").unlink()
    cases["no results.json (not finished"] = unfinished
    at_chance = self.make_runs(d)
    results = json.loads((at_chance[1] / "results.json").read_text())
    results["unintended_not_measurable"] = "0 consumer task(s) left"
    (at_chance[1] / "results.json").write_text(json.dumps(results))
    cases["its unintended side is not measurable on this data (0 consumer task(s) left)"] = at_chance
    ranker_at_chance = self.make_runs(d)
    results = json.loads((ranker_at_chance[0] / "results.json").read_text())
    results["intended_not_measurable"] = "Keep-All's Recall@50 is at chance"
    (ranker_at_chance[0] / "results.json").write_text(json.dumps(results))
    cases["its intended side is not measurable on this data (Keep-All's Recall@50 is at chance)"] = ranker_at_chance
    for message, paths in cases.items():
      with mock.patch("sys.stderr", new_callable=io.StringIO) as stderr, self.assertRaises(SystemExit) as exit_:
        seeds.main([str(p) for p in paths])
      self.assertEqual(exit_.exception.code, 2)
      self.assertIn(message, stderr.getvalue())
    with mock.patch("sys.stderr", new_callable=io.StringIO), self.assertRaises(SystemExit):
      seeds.main([str(self.make_runs(d)[0])])  # one run: nothing to compare


if __name__ == "__main__":
  absltest.main()
