"""The development rule that picks ICL's learning rate (experiments.reproduction.development): each clause of the rule,
and the command's refusals (PROTEINS, a rate outside the candidates, mismatched settings, an existing --out)."""

import contextlib
import io
import json
import tempfile
import unittest
from pathlib import Path

from experiments.reproduction import development as lr_rule

TRAINS = {"loss_status": "improved", "stopped": "patience", "heldout_start": 3.0, "heldout_loss": 2.5}


def _results(bad: int = 0) -> dict:
  """A results.json with 3 runs of retraining and ICL, ``bad`` of ICL's runs not training."""
  runs = {m: [dict(TRAINS) for _ in range(3)] for m in lr_rule.JUDGED}
  for r in runs["icl"][:bad]:
    r["loss_status"] = "did not improve"
  return {"methods": {m: {"runs": rs} for m, rs in runs.items()}}


def _write_run(root: Path, name: str, dataset: str, rate: float, bad: int = 0, **settings) -> Path:
  d = root / name
  d.mkdir()
  config = {"learning_rate": rate, "alpha": 0.3, "seed": 0, "patience": 50, **settings}
  (d / "config.json").write_text(json.dumps({"experiment": "icl", "dataset": dataset, "config": config}))
  (d / "results.json").write_text(json.dumps(_results(bad)))
  return d


def _six_runs(root: Path, bad_at_1e5: int = 1) -> list[Path]:
  """A run of ENZYMES and of COX2 at each candidate rate; ``bad_at_1e5`` of ICL's runs at 1e-5 do not train."""
  return [
    _write_run(root, f"{ds}-{lr:g}", f"tu:{ds}", lr, bad=bad_at_1e5 if lr == 1e-5 else 0)
    for ds in ("ENZYMES", "COX2")
    for lr in lr_rule.CANDIDATES
  ]


class PairTest(unittest.TestCase):
  def test_a_pair_trains_only_when_all_three_conditions_hold(self):
    self.assertTrue(lr_rule.pair_trains(TRAINS))
    for key, value in (("loss_status", "did not improve"), ("stopped", "cap"), ("heldout_loss", 3.0)):
      with self.subTest(key=key):
        self.assertFalse(lr_rule.pair_trains({**TRAINS, key: value}))

  def test_count_reads_both_methods_every_run(self):
    self.assertEqual(lr_rule.count_training(_results(bad=2)), (4, 6))
    results = _results()
    results["methods"]["retrain"]["runs"][0]["heldout_loss"] = 9.0  # the held-out clause alone fails
    self.assertEqual((lr_rule.count_training(results), lr_rule.count_loss_improved(results)), ((5, 6), 6))

  def test_rates_as_the_papers_grid_writes_them(self):
    self.assertEqual([lr_rule.rate_text(r) for r in (1e-5, 1e-4, 1e-3, 3e-4)], ["1e-5", "1e-4", "1e-3", "3e-4"])


class ChooseTest(unittest.TestCase):
  def test_the_smallest_rate_at_which_every_pair_trains(self):
    counts = {"a": {1e-5: (5, 6), 1e-4: (6, 6), 1e-3: (6, 6)}, "b": {1e-5: (6, 6), 1e-4: (6, 6), 1e-3: (6, 6)}}
    self.assertEqual(lr_rule.choose(counts), 1e-4)

  def test_every_dataset_must_train_at_the_rate(self):
    counts = {"a": {1e-5: (6, 6), 1e-4: (6, 6), 1e-3: (6, 6)}, "b": {1e-5: (5, 6), 1e-4: (5, 6), 1e-3: (6, 6)}}
    self.assertEqual(lr_rule.choose(counts), 1e-3)

  def test_otherwise_the_most_pairs_and_the_smaller_rate_on_a_tie(self):
    most = {"a": {1e-5: (1, 6), 1e-4: (4, 6), 1e-3: (5, 6)}, "b": {1e-5: (6, 6), 1e-4: (5, 6), 1e-3: (3, 6)}}
    self.assertEqual(lr_rule.choose(most), 1e-4)  # 7, 9, 8
    tie = {"a": {1e-5: (1, 6), 1e-4: (5, 6), 1e-3: (5, 6)}, "b": {1e-5: (1, 6), 1e-4: (3, 6), 1e-3: (3, 6)}}
    self.assertEqual(lr_rule.choose(tie), 1e-4)

  def test_a_missing_candidate_is_refused(self):
    with self.assertRaisesRegex(ValueError, r"'a' has no run at learning rate\(s\) \[0.001\]"):
      lr_rule.choose({"a": {1e-5: (6, 6), 1e-4: (6, 6)}})


class CommandTest(unittest.TestCase):
  def _main(self, argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
      code = lr_rule.main([str(a) for a in argv])
    return code, err.getvalue()

  def test_writes_the_choice_and_never_overwrites_it(self):
    with tempfile.TemporaryDirectory() as tmp:
      root = Path(tmp)
      out = root / "choice.json"
      code, _ = self._main(["--runs", *_six_runs(root), "--out", out])
      self.assertEqual(code, 0)
      choice = json.loads(out.read_text())
      self.assertEqual(choice["chosen"], 1e-4)
      self.assertEqual(choice["trains"]["tu:ENZYMES"]["1e-5"], [5, 6])
      before = out.read_text()
      code, err = self._main(["--runs", *self._runs_again(root), "--out", out])
      self.assertEqual((code, out.read_text()), (2, before))
      self.assertIn("exists", err)

  def _runs_again(self, root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())

  def test_refusals_exit_2_and_write_nothing(self):
    cases = {
      "PROTEINS": ({"dataset": "proteins"}, "judging data"),
      "a rate outside the candidates": ({"rate": 3e-4}, "not one of"),
      "another setting": ({"patience": 20}, "differ in a setting"),
    }
    for name, (change, message) in cases.items():
      with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = _six_runs(root)
        extra = {"dataset": "tu:ENZYMES", "rate": 1e-5, "patience": 50, **change}
        runs.append(_write_run(root, "extra", extra["dataset"], extra["rate"], patience=extra["patience"]))
        out = root / "choice.json"
        code, err = self._main(["--runs", *runs, "--out", out])
        self.assertEqual(code, 2)
        self.assertIn(message, err)
        self.assertFalse(out.exists())

  def test_a_directory_without_results_is_refused(self):
    with tempfile.TemporaryDirectory() as tmp:
      empty = Path(tmp) / "empty"
      empty.mkdir()
      code, err = self._main(["--runs", empty, "--out", Path(tmp) / "c.json"])
      self.assertEqual(code, 2)
      self.assertIn("no config.json", err)


if __name__ == "__main__":
  unittest.main()


class PageTest(unittest.TestCase):
  """The choice reaches the reproduction page, and --check fails when it is not what its archived runs give."""

  def test_the_page_shows_each_sets_pairs_and_the_rate_chosen(self):
    from experiments.reproduction import page

    with tempfile.TemporaryDirectory() as tmp:
      root = Path(tmp)
      choice = lr_rule.choice_from(_six_runs(root))
    text = page.development_section(choice)
    self.assertIn("| tu:COX2 | 5 of 6 (5) | 6 of 6 (6) | 6 of 6 (6) |", text)
    self.assertIn("Chosen: Adam 1e-4.", text)
    self.assertIn("not been made yet", page.development_section(None))

  def test_a_choice_that_differs_from_its_runs_is_stale(self):
    from experiments.reproduction import cli

    with tempfile.TemporaryDirectory() as tmp:
      root = Path(tmp)
      _six_runs(root)
      self.assertEqual(cli.development_choice(root), (None, None))
      choice = lr_rule.choice_from(sorted(p for p in root.iterdir()))
      (root / "choice.json").write_text(json.dumps(choice))
      self.assertEqual(cli.development_choice(root)[1], None)
      (root / "choice.json").write_text(json.dumps({**choice, "chosen": 1e-3}))
      self.assertIn("differs from what its archived runs give", cli.development_choice(root)[1])


class CommittedChoiceTest(unittest.TestCase):
  """The committed choice: what its archived development runs give, and unchanged when the one cell that started
  before the rule was committed is replaced by its rerun from a commit after it."""

  ROOT = Path(__file__).resolve().parents[1] / "docs" / "reproduction" / "development"

  def test_the_rerun_after_the_rule_leaves_the_choice_unchanged(self):
    folder, rerun = self.ROOT / "icl-learning-rate", self.ROOT / "icl-learning-rate-rerun"
    committed = json.loads((folder / "choice.json").read_text())
    runs = sorted(p for p in folder.iterdir() if p.is_dir())
    self.assertEqual(json.loads(json.dumps(lr_rule.choice_from(runs), sort_keys=True)), committed)
    (again,) = [p for p in rerun.iterdir() if p.is_dir()]
    swapped = [again if p.name == "icl-dev-enzymes-lr1e-5" else p for p in runs]
    self.assertNotEqual(swapped, runs)
    self.assertEqual(lr_rule.choice_from(swapped)["chosen"], committed["chosen"])

  def test_a_development_folder_that_is_not_there_is_refused_before_any_work(self):
    from experiments.reproduction import cli

    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(io.StringIO()) as err:
      page = Path(tmp) / "page.md"
      with self.assertRaises(SystemExit) as exit_:
        cli.main(["--development", str(Path(tmp) / "absent"), "--page", str(page)])
      self.assertEqual(exit_.exception.code, 2)
      self.assertFalse(page.exists())
    self.assertIn("--development", err.getvalue())
