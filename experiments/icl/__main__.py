"""Command line of the ICL experiment (``--help`` for every flag).

python -m experiments.icl --preset quick                                       # embedded synthetic graphs
python -m experiments.icl --dataset proteins-full --data-dir DIR --alpha-sweep 0.3,0.5,0.7 --preset quick
python -m experiments.icl --dataset digits-2 --preset quick                    # embedded 8×8 digits
python -m experiments.icl --dataset mnist-2 --data-dir mnist/ --preset paper --runs 5
"""

import sys

from experiments import harness
from experiments.icl.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
