"""Kafka's log storage: file records, indexes, segments, a partition's log, recovery, retention,
the cleaner, checkpoint files, directory locks, the leader-epoch cache and the log manager.

Storage works on files and record bytes; it knows no transport, no Kubernetes and no Spark.
"""
