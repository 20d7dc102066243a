"""``python -m bcjax.cli``: the ``bcjax`` command."""

import sys

from bcjax.cli import main

sys.exit(main())
