"""The ``stratalog`` data source: Spark's Kafka source and sink, over stratalog's logs.

``spark.read.format("stratalog")`` and ``readStream`` take the Kafka source's
options and give its schema (``schema``, ``options``); ``df.write`` takes the
Kafka sink's columns (``writer``). The short name is never ``kafka``: Spark's
own Kafka connector keeps that name, and built-in sources win name clashes.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceWriter
from pyspark.sql.types import StructType

from .options import OptionError, parse_sink_options, parse_source_options
from .schema import kafka_schema, projection

FORMAT = "stratalog"


class StratalogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return kafka_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        from .reader import StratalogBatchReader

        return StratalogBatchReader(parse_source_options(self.options, streaming=False), projection(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream import StratalogStreamReader

        return StratalogStreamReader(parse_source_options(self.options, streaming=True), projection(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import StratalogArrowWriter

        if overwrite:
            raise OptionError("stratalog: save mode 'overwrite' is not supported (a log is appended to, never "
                              "replaced); use .mode(\"append\")")
        return StratalogArrowWriter(parse_sink_options(self.options), schema)
