"""stratalog: Apache Kafka's log storage layer, rebuilt in Python, byte-compatible with Kafka's on-disk format.

Layers, each importing only those below it:

    errors, names, config          vocabulary: error codes, file names, settings
    records                        the v0/v1/v2 wire and disk format of record batches
    index, file_records, segment   one segment: .log, .index, .timeindex
    validation, log, loader        one partition: append/read/roll/truncate, crash recovery
    checkpoint, dir_lock,
    log_manager                    data directories: checkpoints, locks, topics
    cli                            the ``stratalog`` command
"""

__version__ = "0.1.0"
