"""Command line of the conceptor STS time-course experiment (``--help`` for every flag).

Real data: ``python -m experiments.conceptors_sts --vectors glove.840B.300d.txt --freq enwiki_vocab_min200.txt
--sts-dir STS/ --out DIR``. Without the three paths it runs on the embedded synthetic corpus.
"""

import sys

from experiments import harness
from experiments.conceptors_sts.experiment import EXPERIMENT


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
