"""stratalog_spark: Spark's Kafka source and sink over stratalog logs, and Spark jobs on them.

* ``format("stratalog")`` - a PySpark Python data source (``source``) with the
  Kafka connector's schema and options: batch reads, Structured Streaming
  reads, batch writes. Data lives in data directories (``path``, read
  directly) or behind ``stratalog serve`` (``url``).
* ``stratalog-spark verify | compaction-plan | export`` - jobs (``jobs``).

Installing the package registers the source: PySpark imports every top-level
module named ``pyspark_*`` that exports ``DefaultSource`` (``pyspark_stratalog``
does) the first time a session looks a Python data source up. PySpark has no
entry-point registration. ``register(spark)`` does it explicitly, for sessions
where that lookup is disabled (``spark.sql.pyspark.dataSource.staticImport.enabled``)
or ran before the package was installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "stratalog"
__version__ = "0.1.0"


def register(spark: SparkSession) -> None:
    """Register ``format("stratalog")`` in this session (idempotent)."""
    from .source import StratalogDataSource

    spark.dataSource.register(StratalogDataSource)
