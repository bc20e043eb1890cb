"""Segment files exactly as they are on disk, for the tools that inspect them (dump-log, verify).

Read-only, never through the loader (whose recovery would repair what these tools must report),
returning data and findings and never printing or writing. One module per kind of file:
``walk`` (the ``.log``), ``index_files``, ``txn_index``; ``checks`` judges a segment and its
indexes; ``findings`` is what they report. Producer snapshots are read with the engine's own
``stratalog.storage.producer_snapshot``, which also writes them.
"""
