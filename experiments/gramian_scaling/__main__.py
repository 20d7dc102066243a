"""Command line of the corpus-size curve (``--help`` for every flag).

python -m experiments.gramian_scaling --preset quick              # n = 10K, 100K, 1M synthetic link corpora
python -m experiments.gramian_scaling --preset quick --sizes 10000,100000 --seeds 1
"""

import sys

from experiments import harness
from experiments.gramian_scaling.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
