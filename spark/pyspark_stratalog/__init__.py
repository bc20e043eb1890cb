"""Static registration of the ``stratalog`` data source (PySpark imports ``pyspark_*`` modules for it).

PySpark 4.x looks up Python data sources by importing every top-level module
whose name starts with ``pyspark_`` and taking its ``DefaultSource``; it has no
entry points. Keep this module an import and nothing else: the lookup imports
it in every session.
"""

from stratalog_spark.source import StratalogDataSource as DefaultSource

__all__ = ["DefaultSource"]
