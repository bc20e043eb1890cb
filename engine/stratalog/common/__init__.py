"""The vocabulary every layer shares: Kafka's error codes, file and topic names, the log settings,
and the file primitives (directory fsync, atomic writes) that every crash-safe write is built on.

Nothing here knows a record, a segment or a transport.
"""
