"""``python -m stratalog.cli``: the same as the ``stratalog`` console script."""

import sys

from . import main

sys.exit(main())
