"""``python -m rewardkit``: the same command line as the ``rewardkit`` console script."""

import sys

from .cli import main

sys.exit(main())
