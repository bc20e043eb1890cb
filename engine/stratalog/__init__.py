"""stratalog: Apache Kafka's log storage layer, rebuilt in Python, byte-compatible with Kafka's on-disk format.

Layers, each importing only those below it (docs/architecture.md; enforced by import-linter):

    cli                 the ``stratalog`` command
    server              the HTTP API: parse, call the broker, encode
    broker              what a broker does with a request, whatever carried it
    storage             segments, logs, recovery, retention, the cleaner, checkpoints, the log manager
    records             the v0/v1/v2 format of record batches: bytes only
    common              error codes, names, settings, file primitives
"""

__version__ = "0.1.0"
