"""The SparkSession a job runs in, with the data sources it needs registered.

Under ``spark-submit`` the master and resources come from there; run directly,
``--master`` picks one (``local[*]`` by default). Registration is explicit:
static registration does not see packages installed in editable mode.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def job_session(app: str, master: str | None) -> SparkSession:
    # Executors must run this interpreter: it is the one that has stratalog installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(f"stratalog-spark {app}")
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit, which names the master itself
        builder = builder.master("local[*]")
    spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    from .. import register

    register(spark)
    return spark
