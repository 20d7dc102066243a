"""What `pip install bcjax` (no extras) gives: the README's examples print what the README shows, the upgrade tool
and its command import, and every name of the support tier raises an ImportError that names its extra.

`make test-core` runs this in a fresh virtual environment holding the core install alone; the suite runs it with the
extras' modules blocked (tests/test_tiers.py). Standard library and bcjax only: no test framework in the core.
Usage: python .ci/core_check.py README.md [--block]
"""

import contextlib
import io
import os
import re
import sys

# Import names of every library outside the core install that bcjax or its tests could reach: blocked with --block,
# so that the suite's environment (which has them all) behaves as the core install does.
NOT_CORE = (
  "flax",
  "jraph",
  "dm_pix",
  "orbax",
  "tqdm",
  "faiss",
  "lancedb",
  "qdrant_client",
  "pyarrow",
  "sklearn",
  "matplotlib",
  "onnxruntime",
  "tokenizers",
)

# (what is reached, the extra its error must name)
NEEDS_AN_EXTRA = (
  ("import bcjax.models", "models"),
  ("import bcjax.data", "models"),
  ("bcjax.TwoTower", "models"),
  ("bcjax.BackwardLinear", "models"),
  ("bcjax.alignment.BackwardMap", "models"),
  ("bcjax.LearningRateAgent", "models"),
  ("bcjax.contrastive.ddpg", "models"),
  ("bcjax.upgrade.LanceDBStore('no-such-dir/db', 'docs')", "stores"),  # the extra is checked before the path
  ("bcjax.upgrade.FaissStore('no-such-dir/index.faiss')", "stores"),
)


def examples(text: str) -> list[tuple[str, str]]:
  """(code, printed) pairs: every ```python block and the ```text block that follows it."""
  return re.findall(r"```python\n(.*?)```\s*\n```text\n(.*?)```", text, flags=re.S)


def check(readme: str) -> list[str]:
  """Every failure, as a line (none when the core install does what the README and the extras promise)."""
  import bcjax  # the core alone

  failures = []
  runs = examples(readme)
  if len(runs) < 4:
    failures.append(f"the README has {len(runs)} examples with output, expected at least 4")
  for code, printed in runs:
    out = io.StringIO()
    try:
      with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    except Exception as e:  # each failure is reported, then the next example runs
      failures.append(f"README example {printed.splitlines()[0]!r} raised {type(e).__name__}: {e}")
      continue
    if out.getvalue() != printed:
      failures.append(f"README example printed {out.getvalue()!r}, the README shows {printed!r}")
  import bcjax.cli  # the upgrade tool's command and its modules need the core only
  import bcjax.upgrade
  import bcjax.versioning

  bcjax.cli.build_parser()
  for statement, extra in NEEDS_AN_EXTRA:
    try:
      exec(statement, {"bcjax": bcjax})
    except ImportError as e:
      if f"pip install 'bcjax[{extra}]'" not in str(e):
        failures.append(f"{statement}: the ImportError does not name bcjax[{extra}]: {e}")
    except Exception as e:  # the library was there: the call went on to the path
      failures.append(f"{statement}: reached the {extra} extra's libraries ({type(e).__name__}: {e})")
    else:
      failures.append(f"{statement}: ran without the {extra} extra's libraries")
  return failures


def main(argv: list[str]) -> int:
  if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--block"):
    print(__doc__.strip().splitlines()[-1], file=sys.stderr)
    return 2
  if len(argv) == 3:
    for name in NOT_CORE:
      sys.modules[name] = None  # an import of it raises ImportError, as where it is not installed
  if os.environ.get("JAX_ENABLE_X64", "0") not in ("0", "false", "False", ""):
    print("core_check: run with JAX_ENABLE_X64 unset (the README's numbers are float32)", file=sys.stderr)
    return 2
  with open(argv[1], encoding="utf-8") as f:
    failures = check(f.read())
  for line in failures:
    print(f"FAIL {line}", file=sys.stderr)
  print(f"core_check: {'ok' if not failures else f'{len(failures)} failures'}")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
