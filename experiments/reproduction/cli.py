"""The command line of the reproduction report.

  python -m experiments.reproduction --runs DIR    # archive and summarise every run group in DIR, regenerate the page
  python -m experiments.reproduction               # regenerate the page from the committed summaries
  python -m experiments.reproduction --resummarise # regenerate every archived group's summary, then the page
  python -m experiments.reproduction --check       # exit 1 if a summary differs from what its archived runs give,
                                                   # or the page from what the summaries give

The run files live in ``docs/reproduction/runs/<group>/<run>/`` (gzipped config, results and metrics of every run a
summary reads), the summaries in ``docs/reproduction/summaries/`` (figures in ``docs/reproduction/figures/``) and the
page is ``docs/reproduction.md``, all beside this package in a source checkout. A run from a tree with local changes
is refused: the page shows only runs of committed code.
"""

import argparse
import difflib
import json
import sys
from pathlib import Path

from bcjax.files import write_atomic
from experiments.reproduction.archive import archive_run, archived_groups, clean_commit, read_run
from experiments.reproduction.development import choice_from
from experiments.reproduction.page import render
from experiments.reproduction.summary import find_groups, load_summaries, summarise_group, write_summary

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m experiments.reproduction", description=__doc__.split("\n\n")[0])
  p.add_argument("--runs", type=Path, help="a folder of finished run folders (NAME or NAME-s<seed>) to summarise")
  p.add_argument("--summaries", type=Path, default=DOCS / "reproduction" / "summaries", help="summaries folder")
  p.add_argument(
    "--archive", type=Path, default=DOCS / "reproduction" / "runs", help="folder of the archived run files"
  )
  p.add_argument(
    "--development",
    type=Path,
    default=DOCS / "reproduction" / "development" / "icl-learning-rate",
    help="folder of ICL's archived development runs and the learning rate chosen on them (choice.json)",
  )
  p.add_argument("--page", type=Path, default=DOCS / "reproduction.md", help="the page to write or check")
  p.add_argument("--check", action="store_true", help="regenerate the page in memory and fail on any difference")
  p.add_argument(
    "--resummarise",
    action="store_true",
    help="rewrite every archived group's summary from its archived runs (after a change to the summariser)",
  )
  return p


def _stale_summaries(archive: Path, summaries: dict, figures: Path) -> list[str]:
  """The groups whose committed summary is not what the current summariser makes of their archived runs."""
  stale = []
  for group, runs in archived_groups(archive).items():
    if group not in summaries:
      stale.append(f"{group}: archived runs but no summary")
    elif json.loads(json.dumps(summarise_group(group, runs, figures), sort_keys=True)) != summaries[group]:
      stale.append(group)
  return stale


def development_choice(folder: Path) -> tuple[dict | None, str | None]:
  """ICL's committed development choice (``folder/choice.json``; None when not made yet) and why it is stale: it
  differs from what :func:`experiments.reproduction.development.choice_from` makes of the archived runs beside it."""
  path = folder / "choice.json"
  if not path.is_file():
    return None, None
  committed = json.loads(path.read_text())
  again = json.loads(json.dumps(choice_from(sorted(p for p in folder.iterdir() if p.is_dir())), sort_keys=True))
  return committed, (None if again == committed else f"{path} differs from what its archived runs give")


def main(argv=None) -> int:
  args = parser().parse_args(argv)
  if args.check and (args.runs is not None or args.resummarise):
    parser().error("--check reads the committed summaries: it takes no --runs or --resummarise")
  if not args.development.is_dir():
    parser().error(f"--development {args.development}: not a folder")
  try:
    figures = args.summaries.parent / "figures"
    if args.runs is not None:
      groups = find_groups(args.runs)
      for runs in groups.values():  # refuse any run of uncommitted code before writing anything
        for run in runs:
          why = clean_commit(read_run(run).config)
          if why is not None:
            raise ValueError(f"{run}: {why}; rerun it from a clean checkout of a commit to put it on the page")
      for group, runs in groups.items():
        summary = summarise_group(group, runs, figures)
        archived = [archive_run(r, args.archive / group) for r in runs]
        path = write_summary(summary, runs, args.summaries)
        print(f"{group}: {len(runs)} run(s) -> {path}, run files in {archived[0].parent}")
    if args.resummarise:
      for group, runs in archived_groups(args.archive).items():
        write_summary(summarise_group(group, runs, figures), runs, args.summaries)
        print(f"{group}: {len(runs)} archived run(s) summarised again")
    if not args.summaries.is_dir():
      raise FileNotFoundError(f"--summaries {args.summaries}: not a folder")
    summaries = load_summaries(args.summaries)
    stale = _stale_summaries(args.archive, summaries, figures)
    development, stale_choice = development_choice(args.development)
    if stale_choice:
      stale.append(stale_choice)
  except (FileNotFoundError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if stale:
    print(
      "error: summaries differ from what their archived runs give (regenerate with --runs, or fix the summariser): "
      + "; ".join(stale),
      file=sys.stderr,
    )
    return 1
  missing = [f"{g}-{f}" for g, s in summaries.items() for f in s["figures"] if not (figures / f"{g}-{f}").is_file()]
  if missing:
    print(f"error: figures named by the summaries are missing from {figures}: {missing}", file=sys.stderr)
    return 1
  text = render(summaries, set(archived_groups(args.archive)), development)
  if args.check:
    current = args.page.read_text() if args.page.is_file() else ""
    if current != text:
      diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(args.page), "generated", lineterm="")
      print("\n".join(list(diff)[:60]), file=sys.stderr)
      print(
        f"error: {args.page} differs from what the summaries give: run `python -m experiments.reproduction`",
        file=sys.stderr,
      )
      return 1
    print(f"{args.page} matches its {len(summaries)} summaries")
    return 0
  write_atomic(args.page, text.encode(), overwrite=True)
  print(f"wrote {args.page} from {len(summaries)} summaries")
  return 0
