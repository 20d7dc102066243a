"""Prints pip constraints that pin each core dependency of pyproject.toml, and each of the `models` extra (the
support tier the experiments and most tests run on), to its declared minimum, so that `make test-floors` tests the
oldest versions a user may get. A dependency without a minimum is an error: a floor that is never installed is
never tested."""

import re
import sys
import tomllib
from pathlib import Path

FLOOR_EXTRAS = ("models",)


def floors(pyproject: Path) -> list[str]:
  project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
  requirements = list(project["dependencies"])
  for extra in FLOOR_EXTRAS:
    requirements += project["optional-dependencies"][extra]
  out = []
  for requirement in requirements:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(>=|==)\s*([^,;\s]+)", requirement)
    if match is None:
      raise SystemExit(f"floors: {requirement!r} has no single minimum version (name>=X or name==X)")
    out.append(f"{match.group(1)}=={match.group(3)}")
  return out


if __name__ == "__main__":
  root = Path(__file__).resolve().parents[1]
  sys.stdout.write("".join(f"{line}\n" for line in floors(root / "pyproject.toml")))
