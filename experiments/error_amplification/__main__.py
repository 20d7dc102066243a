"""``python -m experiments.error_amplification --preset quick --out runs/demo`` (``--help`` for every flag)."""

import sys

from experiments import harness
from experiments.error_amplification.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
