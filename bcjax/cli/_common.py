"""What every ``bcjax`` subcommand shares: its usage error (exit 2) and its progress bar."""

import sys


class UsageError(ValueError):
  """Bad input, found before anything is written: exits 2."""


def progress_bar(label: str):
  """A progress callback printing to stderr (tqdm when installed)."""
  try:
    from tqdm import tqdm
  except ImportError:  # the core install has no tqdm
    return lambda done, total: print(
      f"\r{label}: {done}/{total} rows", end="\n" if done == total else "", file=sys.stderr
    )
  bar = {}

  def update(done, total):
    if "bar" not in bar:
      bar["bar"] = tqdm(total=total, unit="rows", desc=label, file=sys.stderr, leave=False)
    bar["bar"].update(done - bar["bar"].n)
    if done == total:
      bar["bar"].close()

  return update
