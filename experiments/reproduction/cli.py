"""The command line of the reproduction report.

  python -m experiments.reproduction --runs DIR    # summarise every run group in DIR, then regenerate the page
  python -m experiments.reproduction               # regenerate the page from the committed summaries
  python -m experiments.reproduction --check       # exit 1 if the page differs from what the summaries give

The summaries live in ``docs/reproduction/summaries/`` (figures in ``docs/reproduction/figures/``) and the page is
``docs/reproduction.md``, both beside this package in a source checkout.
"""

import argparse
import difflib
import sys
from pathlib import Path

from bcjax.files import write_atomic
from experiments.reproduction.page import render
from experiments.reproduction.summary import find_groups, load_summaries, summarise_group, write_summary

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m experiments.reproduction", description=__doc__.split("\n\n")[0])
  p.add_argument("--runs", type=Path, help="a folder of finished run folders (NAME or NAME-s<seed>) to summarise")
  p.add_argument("--summaries", type=Path, default=DOCS / "reproduction" / "summaries", help="summaries folder")
  p.add_argument("--page", type=Path, default=DOCS / "reproduction.md", help="the page to write or check")
  p.add_argument("--check", action="store_true", help="regenerate the page in memory and fail on any difference")
  return p


def main(argv=None) -> int:
  args = parser().parse_args(argv)
  if args.check and args.runs is not None:
    parser().error("--check reads the committed summaries: it takes no --runs")
  try:
    if args.runs is not None:
      for group, runs in find_groups(args.runs).items():
        path = write_summary(summarise_group(group, runs), runs, args.summaries)
        print(f"{group}: {len(runs)} run(s) -> {path}")
    if not args.summaries.is_dir():
      raise FileNotFoundError(f"--summaries {args.summaries}: not a folder")
    summaries = load_summaries(args.summaries)
  except (FileNotFoundError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  figures = args.summaries.parent / "figures"
  missing = [f"{g}-{f}" for g, s in summaries.items() for f in s["figures"] if not (figures / f"{g}-{f}").is_file()]
  if missing:
    print(f"error: figures named by the summaries are missing from {figures}: {missing}", file=sys.stderr)
    return 1
  text = render(summaries)
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
