"""``python -m stratalog_spark.jobs``: the same as the ``stratalog-spark`` command."""

import sys

from .cli import main

sys.exit(main())
