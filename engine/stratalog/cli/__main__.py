"""``python -m stratalog.cli``: the same as the ``stratalog`` console script."""

import sys

from stratalog.cli import main

sys.exit(main())
