"""python -m experiments.reproduction [--runs DIR] [--check]: summaries from run folders, and the page from them."""

import sys

from experiments.reproduction.cli import main

sys.exit(main())
