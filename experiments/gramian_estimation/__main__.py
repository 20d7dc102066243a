"""Command line of the Gramian-estimation experiment (``--help`` for every flag).

python -m experiments.gramian_estimation --preset quick                          # synthetic default
python -m experiments.gramian_estimation --dataset movielens-100k --data-dir ml-100k/
"""

import sys

from experiments import harness
from experiments.gramian_estimation.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
