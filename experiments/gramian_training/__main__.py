"""Command line of the training comparison (``--help`` for every flag).

python -m experiments.gramian_training --preset quick                          # synthetic default
python -m experiments.gramian_training --dataset movielens-100k --data-dir ml-100k/ --preset paper
"""

import sys

from experiments import harness
from experiments.gramian_training.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
