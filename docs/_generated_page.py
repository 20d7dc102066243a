"""The command line the docs' generated pages share: write the page, or with ``--check`` fail when the committed
page differs from what the code gives (the suite runs the check)."""

import argparse
import sys
from pathlib import Path


def write_or_check(argv: list[str], path: Path, text: str, source: str) -> int:
  """Writes ``text`` to ``path`` atomically, or with ``--check`` compares them.

  Args:
    argv: the script's ``sys.argv``.
    path: the generated page.
    text: what the code gives.
    source: what the page is generated from, for the message.

  Returns:
    The exit status: 0, or 1 when ``--check`` finds the page stale (a bad flag exits 2 before anything is written).
  """
  parser = argparse.ArgumentParser(prog=Path(argv[0]).name, description=f"Writes {path.name} from {source}.")
  parser.add_argument("--check", action="store_true", help="fail when the committed page is stale; write nothing")
  args = parser.parse_args(argv[1:])
  if args.check:
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
      print(f"{path} is not what {source} gives: run python docs/{Path(argv[0]).name}", file=sys.stderr)
      return 1
    return 0
  from bcjax.files import write_atomic

  write_atomic(path, text.encode("utf-8"), overwrite=True)
  print(f"wrote {path}")
  return 0
