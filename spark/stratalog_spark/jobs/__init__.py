"""Spark jobs on stratalog topics: work that outgrows one engine process.

* ``verify`` - every segment's CRCs, structure and indexes checked in parallel
  (one task per segment, with the engine's own ``stratalog.storage.inspect``).
* ``compaction-plan`` - the latest offset of every key over a whole topic,
  computed by Spark, written as per-partition keep files the engine applies in
  one pass (``stratalog apply-compaction-plan``).
* ``export`` - a topic, or an offset/time range of it, to Parquet.

Run them as ``stratalog-spark JOB ...`` or ``python -m stratalog_spark.jobs JOB ...``
(also under ``spark-submit``, which supplies the master).
"""
