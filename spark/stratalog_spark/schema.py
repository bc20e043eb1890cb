"""The read schema of Spark's Kafka source, and user schemas as projections of it.

Users switch between ``format("kafka")`` and ``format("stratalog")``, so the
columns, their order and their types are exactly the Kafka source's. Spark
does no column pruning for Python data sources: a reader always produces every
column it declares. So a user-given schema is taken as a projection - any
subset of the Kafka columns, in any order - and only those columns are built:
``.schema("partition INT, offset BIGINT, key BINARY")`` never copies a value.

Arrow batches must match Spark's Arrow form of the schema exactly (types,
nullability, order), so it is derived with Spark's own ``to_arrow_schema``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType, StructType

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
HEADERS = "headers"
ALL_COLUMNS = KAFKA_COLUMNS + (HEADERS,)


def _types() -> dict[str, DataType]:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    return {"key": BinaryType(), "value": BinaryType(), "topic": StringType(), "partition": IntegerType(),
            "offset": LongType(), "timestamp": TimestampType(), "timestampType": IntegerType(),
            HEADERS: ArrayType(header)}


def kafka_schema(include_headers: bool) -> StructType:
    """The Kafka source's schema; ``headers`` only with ``includeHeaders=true``, as there."""
    from pyspark.sql.types import StructField, StructType

    types = _types()
    names = ALL_COLUMNS if include_headers else KAFKA_COLUMNS
    return StructType([StructField(name, types[name], True) for name in names])


def projection(schema: StructType) -> tuple[str, ...]:
    """The column names of a user schema, checked against the Kafka columns (names and types)."""
    types = _types()
    names = []
    for field in schema.fields:
        expected = types.get(field.name)
        if expected is None:
            raise ValueError(f"stratalog: column {field.name!r} is not a column of the Kafka source schema; "
                             f"the columns are {', '.join(ALL_COLUMNS)}")
        if field.dataType != expected:
            raise ValueError(f"stratalog: column {field.name!r} must be {expected.simpleString()}, "
                             f"not {field.dataType.simpleString()}")
        names.append(field.name)
    if len(set(names)) != len(names):
        raise ValueError(f"stratalog: a column is listed twice in the schema: {names}")
    if not names:
        raise ValueError("stratalog: the schema selects no column")
    return tuple(names)


def arrow_schema(columns: tuple[str, ...]) -> pa.Schema:
    """Spark's Arrow form of the projected schema: what every yielded RecordBatch must be."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    types = _types()
    spark = StructType([StructField(name, types[name], True) for name in columns])
    return to_arrow_schema(spark, timezone="UTC")
