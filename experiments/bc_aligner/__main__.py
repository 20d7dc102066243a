"""Command line of the BC-Aligner experiment (``--help`` for every flag).

python -m experiments.bc_aligner --preset quick                                    # synthetic default
python -m experiments.bc_aligner --dataset movielens-100k --data-dir ml-100k/ --preset paper --epochs 100
python -m experiments.bc_aligner --dataset amazon-Musical_Instruments --download --preset paper
python -m experiments.bc_aligner --resume runs/bc_aligner-20261122-101500          # finish a killed run
"""

import sys

from experiments import harness
from experiments.bc_aligner.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
