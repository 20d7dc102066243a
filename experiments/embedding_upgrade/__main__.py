"""Command line of the embedding-upgrade experiment (``--help`` for every flag).

Real models and data: ``make upgrade-models``, then
``python -m experiments.embedding_upgrade --sts-dir STS/ --preset paper --out DIR``.
"""

import sys

from experiments import harness
from experiments.embedding_upgrade.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
